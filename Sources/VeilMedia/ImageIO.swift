import Foundation
import VeilCore
import VeilVision

/// Loading and saving single images as `RGBImage`.
public enum ImageIO {
    /// Decodes the image at `url`: PNG, JPEG, binary PPM/PGM, or anything else GStreamer's decodebin
    /// handles (of a video, the first frame).
    public static func load(_ url: URL) throws -> RGBImage {
        var image = RGBImage(width: 0, height: 0)
        try load(url, into: &image, timeout: VideoSource.defaultTimeout)
        return image
    }

    /// Writes `image` as a PNG file at `url` (lossless), replacing an existing file.
    public static func savePNG(_ image: RGBImage, to url: URL) throws {
        guard image.width > 0, image.height > 0 else {
            throw MediaError(.invalidArgument, "cannot save an empty \(image.width)×\(image.height) image to \(url.path); give an image with pixels")
        }
        let writer = try VideoWriter(url: url, width: image.width, height: image.height, framesPerSecond: 1,
                                     container: .png, timeout: VideoWriter.defaultTimeout)
        try writer.write(image)
        try writer.finish()
    }

    /// Decodes `url` into `image`, reusing its storage when GStreamer decodes it.
    static func load(_ url: URL, into image: inout RGBImage, timeout: Double) throws {
        let name = "image \(url.path)"
        try VideoSource.requireFile(url, name)
        if try VideoSource.isPNM(url) {
            let bytes: [UInt8]
            do {
                bytes = [UInt8](try Data(contentsOf: url))
            } catch {
                throw MediaError(.notFound, "cannot read \(name) (\(error.localizedDescription)); check that it exists and is readable")
            }
            image = try PNM.decode(bytes, name: name)
            return
        }
        let reader = try VideoSource.decodingReader(file: url, name: name, caps: VideoSource.rgbCaps(width: nil, height: nil), timeout: timeout)
        var frame = VideoFrame(image: RGBImage(width: 0, height: 0), timestampMicros: 0)
        swap(&frame.image, &image)
        defer { swap(&frame.image, &image) }
        guard try reader.read(into: &frame) else {
            throw MediaError(.unsupportedInput, "\(name) contains no image; check the file")
        }
    }
}
