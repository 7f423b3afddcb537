import Foundation
import VeilCore
import VeilVision

/// Decodes one image file after the other: directories of frames, and PPM stills.
final class StillFilesReader: FrameReader {
    private let files: [URL]
    private let framesPerSecond: Double?
    private let timeout: Double
    private var index = 0
    /// The first image, decoded at start-up to learn the size and handed out by the first `read`.
    private var first: RGBImage?
    let info: SourceInfo

    init(files: [URL], framesPerSecond: Double?, timeout: Double) throws {
        guard let firstFile = files.first else {
            throw MediaError(.notFound, "no image files to read; give at least one")
        }
        var image = RGBImage(width: 0, height: 0)
        try ImageIO.load(firstFile, into: &image, timeout: timeout)
        self.files = files
        self.framesPerSecond = framesPerSecond
        self.timeout = timeout
        self.first = image
        self.info = SourceInfo(width: image.width, height: image.height, framesPerSecond: framesPerSecond,
                               durationSeconds: framesPerSecond.map { Double(files.count) / $0 },
                               frameCount: files.count, isLive: false)
    }

    func read(into frame: inout VideoFrame) throws -> Bool {
        guard index < files.count else { return false }
        if let first {
            frame.image = first
            self.first = nil
        } else {
            try ImageIO.load(files[index], into: &frame.image, timeout: timeout)
        }
        frame.timestampMicros = framesPerSecond.map { UInt64((Double(index) / $0 * 1e6).rounded()) } ?? 0
        index += 1
        return true
    }
}
