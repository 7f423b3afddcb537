import Foundation
import VeilCore
import VeilExpressionSource

/// A camera or a video file, its face tracked on a thread of its own at the chosen privacy level,
/// as a call sends it: the `CaptureLoop` with `CaptureLoop.Options.call`, each frame stamped with
/// the clock's time when it is tracked. A file plays in real time, as a camera would deliver it,
/// and starts over when it ends; a camera runs until stopped. A frame the tracker fails on is
/// skipped; a read that fails ends the deliveries (the call goes on, and the voice takes over as
/// when the face is lost).
///
/// `@unchecked Sendable`: the capture loop is used only by the loop's thread once it started;
/// `ExpressionSourceThread` keeps what other threads touch.
public final class CameraExpressionSource: ExpressionSource, @unchecked Sendable {
    /// The camera (`/dev/videoN`) or file, as `VideoSource.open` takes it.
    public let path: String
    public var sourceDescription: String { path }
    private let capture: CaptureLoop
    private let loop = ExpressionSourceThread(name: "veil-capture", stopTimeout: 5)

    /// Opens `path` and loads the face tracker. `clock` gives the media time (µs) frames are paced
    /// and stamped with. Throws what opening the input or loading the tracker throws.
    public init(path: String, privacy: PrivacyLevel, clock: @escaping @Sendable () -> UInt64) throws {
        self.path = path
        capture = try CaptureLoop(path: path, privacy: privacy, clock: clock)
    }

    deinit { stop() }

    public func start(voiceMouth: @escaping @Sendable () -> Float? = { nil },
                      deliver: @escaping @Sendable (ExpressionFrame) -> Void) {
        loop.start { [self] in
            // A failed read ends the deliveries; what the call does without them (lost frames, then
            // the voice) is the sender's part.
            try? capture.run(.call, voiceMouth: voiceMouth, while: { loop.isRunning }) { deliver($0.output.frame) }
        }
    }

    /// Stops the loop and waits for it to end (at most 5 s: a camera that stopped delivering is
    /// not waited for longer).
    public func stop() { loop.stop() }
}
