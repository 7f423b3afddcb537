import VeilCore
/// A packed 8-bit RGB image (3 bytes per pixel, rows without padding), the frame type Veil's sources
/// produce and its tracker reads. Sources fill one of these in place frame after frame.
public struct RGBImage: Sendable {
    public private(set) var width: Int
    public private(set) var height: Int
    /// `width * height * 3` bytes, row by row, R G B.
    public var pixels: [UInt8]

    /// A black image (negative sizes count as 0).
    public init(width: Int, height: Int) {
        self.width = max(width, 0); self.height = max(height, 0)
        pixels = [UInt8](repeating: 0, count: self.width * self.height * 3)
    }

    /// Wraps `pixels`, which must hold exactly `width * height * 3` bytes.
    public init?(width: Int, height: Int, pixels: [UInt8]) {
        guard width >= 0, height >= 0, pixels.count == width * height * 3 else { return nil }
        self.width = width; self.height = height; self.pixels = pixels
    }

    /// Changes the size, reusing the storage when it is large enough (contents become undefined).
    public mutating func resize(width: Int, height: Int) {
        let width = max(width, 0), height = max(height, 0)
        let count = width * height * 3
        if pixels.count != count {
            if pixels.count > count { pixels.removeLast(pixels.count - count) }
            else { pixels.append(contentsOf: repeatElement(0, count: count - pixels.count)) }
        }
        self.width = width; self.height = height
    }
}

/// A frame from a video source with its presentation time.
public struct VideoFrame: Sendable {
    public var image: RGBImage
    /// Presentation time in microseconds from the start of the source.
    public var timestampMicros: UInt64
    public init(image: RGBImage, timestampMicros: UInt64) {
        self.image = image; self.timestampMicros = timestampMicros
    }
}
