import VeilCore

/// Where a participant's own expressions come from: a camera or video file and a face tracker
/// (`CameraExpressionSource`), a VMC Performer or the Live Link Face app (`InteropFaceSource`), and
/// later Apple's ARKit or Vision. Whoever sends them (`veil call`, `veil track`) starts a source,
/// takes the `ExpressionFrame`s it delivers, and stops it; what a source reads, a picture or a
/// datagram, stays inside it. A new source is a target of its own beside the others, depending on
/// this one, which links nothing beyond `VeilCore`.
///
/// Every frame delivered has already been through the privacy stage the user chose
/// (`ExpressionPrivacy`) and is stamped with its capture time on the clock the source was given.
public protocol ExpressionSource: AnyObject {
    /// Says what the source reads, for logs and statistics (`/dev/video0`, `Live Link Face on port 11111`).
    var sourceDescription: String { get }

    /// Starts delivering frames on a thread of the source's own: each one to `deliver`, on that
    /// thread, in order. `voiceMouth` gives the jaw opening of the voice being sent at about now
    /// (`ExpressionSender.voiceMouth`), which the strict privacy level moves the mouth with; nil: the
    /// source's own. Calls after the first do nothing.
    func start(voiceMouth: @escaping @Sendable () -> Float?, deliver: @escaping @Sendable (ExpressionFrame) -> Void)

    /// Stops the source; once it returns, `deliver` is not called again. Idempotent. `start` and
    /// `stop` are called from one thread, the one that owns the source.
    func stop()
}
