import Foundation
import VeilCore
import VeilExpressionSource
import VeilMedia
import VeilTracking
import VeilVision

/// A camera or a video file, its face tracked on a thread of its own (`ExpressionCapture` at the
/// chosen privacy level), as a call sends it: each frame stamped with the clock's time when it is
/// tracked. A file plays in real time, as a camera would deliver it, and starts over when it ends;
/// a camera runs until stopped. A frame the tracker fails on is skipped; a read that fails ends the
/// deliveries.
///
/// `@unchecked Sendable`: the capture and the video source are used only by the loop's thread once
/// it started; `ExpressionSourceThread` keeps what other threads touch.
public final class CameraExpressionSource: ExpressionSource, @unchecked Sendable {
    /// The camera (`/dev/videoN`) or file, as `VideoSource.open` takes it.
    public let path: String
    public var sourceDescription: String { path }
    private let firstSource: VideoSource
    private let capture: ExpressionCapture
    private let clock: @Sendable () -> UInt64
    private let loop = ExpressionSourceThread(name: "veil-capture", stopTimeout: 5)

    /// Opens `path` and loads the face tracker. `clock` gives the media time (µs) frames are paced
    /// and stamped with. Throws what opening the input or loading the tracker throws.
    public init(path: String, privacy: PrivacyLevel, clock: @escaping @Sendable () -> UInt64) throws {
        self.path = path
        self.clock = clock
        firstSource = try VideoSource.open(path)
        capture = ExpressionCapture(tracker: try MediaPipeFaceTracker(), privacy: privacy)
    }

    deinit { stop() }

    public func start(voiceMouth: @escaping @Sendable () -> Float? = { nil },
                      deliver: @escaping @Sendable (ExpressionFrame) -> Void) {
        loop.start { [self] in run(voiceMouth: voiceMouth, deliver: deliver) }
    }

    /// Stops the loop and waits for it to end (at most 5 s: a camera that stopped delivering is
    /// not waited for longer).
    public func stop() { loop.stop() }

    private func run(voiceMouth: () -> Float?, deliver: (ExpressionFrame) -> Void) {
        var frame = VideoFrame(image: RGBImage(width: 0, height: 0), timestampMicros: 0)
        var source = firstSource
        let pace = clock()
        var loopOffset: UInt64 = 0, lastStamp: UInt64 = 0
        while loop.isRunning {
            do {
                if try !source.read(into: &frame) {
                    guard !source.isLive, let again = try? VideoSource.open(path) else { break }
                    source = again
                    loopOffset += lastStamp + 33_333
                    continue
                }
            } catch { break }
            lastStamp = frame.timestampMicros
            // Files play in real time, as a camera would deliver them.
            if !source.isLive {
                let due = pace + loopOffset + frame.timestampMicros
                let now = clock()
                if due > now { Thread.sleep(forTimeInterval: Double(due - now) / 1e6) }
            }
            guard let out = try? capture.process(frame.image, captureTimeMicros: clock(), voiceMouth: voiceMouth()) else { continue }
            deliver(out.frame)
        }
    }
}
