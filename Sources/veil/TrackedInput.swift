import Foundation
import VeilConsole
import VeilCore
import VeilMedia
import VeilTracking
import VeilVision

/// The input side `veil render` and `veil track` share: a camera, video file, image or image
/// sequence, read frame by frame, each frame tracked and reduced to an `ExpressionFrame` at the
/// privacy level chosen (what a call would send).
struct TrackedInput {
    /// One frame as read and tracked.
    struct Frame {
        /// 0 for the first frame read.
        var index: Int
        /// The picture and its timestamp on the source's clock.
        var video: VideoFrame
        /// The expression frame (after the privacy stage) and the tracker's view of the picture.
        var output: ExpressionCapture.Output
        var trackingMilliseconds: Double
    }

    let path: String
    let source: VideoSource
    let capture: ExpressionCapture

    /// Opens `path` (as `VideoSource.open` reads it) and a face tracker; a file that cannot be read
    /// is an `invalidInput` error that names it.
    init(_ path: String, privacy: PrivacyLevel) throws {
        if !path.hasPrefix("/dev/video") && !path.contains("%") && !FileManager.default.isReadableFile(atPath: path) {
            throw VeilError.invalidInput("cannot read \(path): no such file, or not readable")
        }
        self.path = path
        source = try VideoSource.open(path)
        capture = ExpressionCapture(tracker: try MediaPipeFaceTracker(), privacy: privacy)
    }

    /// The input's frame rate (30 where the source does not say, as for a still).
    var framesPerSecond: Double { source.framesPerSecond.flatMap { $0 > 0 ? $0 : nil } ?? 30 }

    /// Frames to expect: nil for a camera (it runs until stopped), else at most `maxFrames`.
    func expectedFrames(maxFrames: Int) -> Int? {
        source.isLive ? nil : source.estimatedFrameCount.map { min($0, maxFrames) }
    }

    /// Reads and tracks frames, handing each to `body`, until the input ends, `maxFrames` have
    /// been read or `body` returns false. `realTime`: a file's frames are tracked no earlier than
    /// their timestamps after the first (a camera delivers them so anyway), so that what is sent
    /// from them moves at the speed it was recorded.
    func forEachFrame(maxFrames: Int, realTime: Bool = false, _ body: (Frame) throws -> Bool) throws {
        var video = VideoFrame(image: RGBImage(width: 0, height: 0), timestampMicros: 0)
        var index = 0
        var start: (wall: Double, media: UInt64)?
        while index < maxFrames, try source.read(into: &video) {
            if realTime, !source.isLive {
                let origin = start ?? (monotonicMilliseconds(), video.timestampMicros)
                start = origin
                let due = origin.wall + Double(video.timestampMicros &- origin.media) / 1000
                let wait = due - monotonicMilliseconds()
                if wait > 0 { Thread.sleep(forTimeInterval: wait / 1000) }
            }
            let t0 = monotonicMilliseconds()
            let output = try capture.process(video.image, captureTimeMicros: video.timestampMicros)
            let frame = Frame(index: index, video: video, output: output, trackingMilliseconds: monotonicMilliseconds() - t0)
            index += 1
            guard try body(frame) else { break }
        }
    }
}
