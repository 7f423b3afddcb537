import Foundation

/// 16-bit PCM audio in a WAV (RIFF/WAVE) file, read and written in pure Swift: for tests, tools and
/// fixtures that should not depend on GStreamer.
public struct WAVAudio: Sendable, Equatable {
    /// The samples, interleaved when there are several channels.
    public var samples: [Int16]
    /// Samples per second per channel.
    public var sampleRate: Int
    /// Channels per frame (1 mono, 2 stereo, ...).
    public var channels: Int

    /// Audio of `channels` interleaved channels at `sampleRate`.
    public init(samples: [Int16], sampleRate: Int, channels: Int = 1) {
        self.samples = samples
        self.sampleRate = sampleRate
        self.channels = channels
    }

    /// Seconds of audio (0 when the format is unusable).
    public var duration: Double {
        guard sampleRate > 0, channels > 0 else { return 0 }
        return Double(samples.count / channels) / Double(sampleRate)
    }

    /// Parses a WAV file holding 16-bit PCM (plain or WAVE_FORMAT_EXTENSIBLE). Throws
    /// `.unsupportedInput` for anything else, or a truncated or malformed file.
    public init(data: Data) throws {
        let bytes = [UInt8](data)
        func fail(_ reason: String) -> MediaError {
            MediaError(.unsupportedInput, "not a 16-bit PCM WAV file: \(reason); convert it, e.g. sox in.wav -b 16 -e signed out.wav")
        }
        func u16(_ at: Int) -> Int { Int(bytes[at]) | Int(bytes[at + 1]) << 8 }
        func u32(_ at: Int) -> Int { u16(at) | u16(at + 2) << 16 }
        guard bytes.count >= 12, bytes[0..<4].elementsEqual("RIFF".utf8), bytes[8..<12].elementsEqual("WAVE".utf8) else {
            throw fail("no RIFF/WAVE header")
        }
        var format: (channels: Int, rate: Int)?
        var offset = 12
        while offset + 8 <= bytes.count {
            let id = bytes[offset..<offset + 4]
            let size = u32(offset + 4)
            let body = offset + 8
            guard size <= bytes.count - body else {
                // A truncated data chunk (a recorder that stopped early) still holds its samples.
                guard id.elementsEqual("data".utf8), let format else { throw fail("chunk extends past the end of the file") }
                self.init(samples: Self.samples(bytes[body...]), sampleRate: format.rate, channels: format.channels)
                return
            }
            if id.elementsEqual("fmt ".utf8) {
                guard size >= 16 else { throw fail("format chunk too short") }
                let tag = u16(body), channels = u16(body + 2), rate = u32(body + 4), bits = u16(body + 14)
                let extensiblePCM = tag == 0xFFFE && size >= 26 && u16(body + 24) == 1
                guard tag == 1 || extensiblePCM else { throw fail("format tag \(tag) is not PCM") }
                guard bits == 16 else { throw fail("\(bits) bits per sample") }
                guard channels > 0, rate > 0 else { throw fail("\(channels) channels at \(rate) Hz") }
                format = (channels, rate)
            } else if id.elementsEqual("data".utf8) {
                guard let format else { throw fail("data before the format chunk") }
                self.init(samples: Self.samples(bytes[body..<body + size]), sampleRate: format.rate, channels: format.channels)
                return
            }
            offset = body + size + (size & 1)  // chunks are padded to even sizes
        }
        throw fail(format == nil ? "no format chunk" : "no data chunk")
    }

    /// Reads and parses the WAV file at `url`.
    public init(contentsOf url: URL) throws {
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw MediaError(.notFound, "cannot read \(url.path) (\(error.localizedDescription)); check that it exists and is readable")
        }
        try self.init(data: data)
    }

    /// The audio as a canonical 44-byte-header WAV file.
    public var data: Data {
        var data = Data(capacity: 44 + samples.count * 2)
        func u32(_ value: Int) { withUnsafeBytes(of: UInt32(truncatingIfNeeded: value).littleEndian) { data.append(contentsOf: $0) } }
        func u16(_ value: Int) { withUnsafeBytes(of: UInt16(truncatingIfNeeded: value).littleEndian) { data.append(contentsOf: $0) } }
        let dataBytes = samples.count * 2
        data.append(contentsOf: "RIFF".utf8); u32(36 + dataBytes); data.append(contentsOf: "WAVE".utf8)
        data.append(contentsOf: "fmt ".utf8); u32(16); u16(1); u16(channels); u32(sampleRate)
        u32(sampleRate * channels * 2); u16(channels * 2); u16(16)
        data.append(contentsOf: "data".utf8); u32(dataBytes)
        for sample in samples { withUnsafeBytes(of: sample.littleEndian) { data.append(contentsOf: $0) } }
        return data
    }

    /// Writes the audio as a WAV file at `url`, replacing what is there.
    public func write(to url: URL) throws {
        do {
            try data.write(to: url)
        } catch {
            throw MediaError(.notWritable, "cannot write \(url.path) (\(error.localizedDescription)); check that the directory exists and is writable")
        }
    }

    private static func samples(_ bytes: ArraySlice<UInt8>) -> [Int16] {
        let start = bytes.startIndex
        return (0..<bytes.count / 2).map { i in
            Int16(bitPattern: UInt16(bytes[start + 2 * i]) | UInt16(bytes[start + 2 * i + 1]) << 8)
        }
    }
}
