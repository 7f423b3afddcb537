import VeilCore
import VeilVision

/// Netpbm images (binary PPM `P6` and PGM `P5`, 8 or 16 bits), decoded in Swift: Debian's
/// GStreamer has no parser that lets decodebin handle them.
enum PNM {
    /// True when `bytes` start like a binary PPM or PGM file.
    static func looksLikePNM(_ bytes: some Collection<UInt8>) -> Bool {
        var it = bytes.makeIterator()
        guard it.next() == UInt8(ascii: "P"), let kind = it.next() else { return false }
        return kind == UInt8(ascii: "5") || kind == UInt8(ascii: "6")
    }

    /// Decodes a `P6` or `P5` image; `name` is used in error messages.
    static func decode(_ bytes: [UInt8], name: String) throws -> RGBImage {
        func invalid(_ why: String) -> MediaError {
            MediaError(.unsupportedInput, "cannot read \(name) as a PPM/PGM image: \(why); convert it to PNG or binary PPM (P6)")
        }
        var position = 0
        func skipSpaceAndComments() {
            while position < bytes.count {
                let c = bytes[position]
                if c == UInt8(ascii: "#") {
                    while position < bytes.count, bytes[position] != 10, bytes[position] != 13 { position += 1 }
                } else if c == 32 || (9...13).contains(c) {
                    position += 1
                } else {
                    return
                }
            }
        }
        func number() throws -> Int {
            skipSpaceAndComments()
            var value = 0, digits = 0
            while position < bytes.count, (48...57).contains(bytes[position]) {
                value = value * 10 + Int(bytes[position] - 48)
                digits += 1; position += 1
                guard digits <= 6 else { throw invalid("a header number is too large") }
            }
            guard digits > 0 else { throw invalid("the header is malformed") }
            return value
        }
        guard looksLikePNM(bytes) else { throw invalid("it does not start with P5 or P6") }
        let channels = bytes[1] == UInt8(ascii: "6") ? 3 : 1
        position = 2
        let width = try number(), height = try number(), maxValue = try number()
        guard width > 0, height > 0, width <= 1 << 15, height <= 1 << 15 else { throw invalid("its size \(width)×\(height) is out of range") }
        guard (1...65535).contains(maxValue) else { throw invalid("its maximum value \(maxValue) is out of range") }
        // Exactly one whitespace byte separates the header from the samples.
        guard position < bytes.count else { throw invalid("it has no pixel data") }
        position += 1
        let bytesPerSample = maxValue > 255 ? 2 : 1
        let sampleCount = width * height * channels
        guard bytes.count - position >= sampleCount * bytesPerSample else { throw invalid("the file is truncated") }

        var image = RGBImage(width: width, height: height)
        image.pixels.withUnsafeMutableBufferPointer { out in
            bytes.withUnsafeBufferPointer { input in
                let data = input[position...]
                let base = data.startIndex
                func sample(_ i: Int) -> UInt8 {
                    let raw = bytesPerSample == 1
                        ? Int(data[base + i])
                        : Int(data[base + 2 * i]) << 8 | Int(data[base + 2 * i + 1])
                    return maxValue == 255 ? UInt8(raw) : UInt8(min(255, (raw * 255 + maxValue / 2) / maxValue))
                }
                if channels == 3 {
                    for i in 0..<sampleCount { out[i] = sample(i) }
                } else {
                    for i in 0..<sampleCount {
                        let v = sample(i)
                        out[3 * i] = v; out[3 * i + 1] = v; out[3 * i + 2] = v
                    }
                }
            }
        }
        return image
    }
}
