import VeilCore

/// Something that happened on a `PeerConnection`, other than signaling and expression frames.
public enum PeerEvent: Sendable {
    /// The connection state changed (webrtcbin's `connection-state`, or `closed` after `close()`).
    case connectionState(PeerConnection.State)
    /// The expression data channel is open: `send(_:)` now delivers frames.
    case dataChannelOpened
    /// The expression data channel closed (the remote closed it or left).
    case dataChannelClosed
    /// Something failed. Media and negotiation failures that end the call also move the state
    /// to `failed`; a failing input file does not (the call goes on with silence).
    case failure(PeerError)
}

/// An `ExpressionFrame` received from the remote peer, decoded and checked.
public struct ReceivedExpressionFrame: Sendable, Equatable {
    /// The decoded frame. Its `captureTimeMicros` is on the sender's media clock: map it to the
    /// local playout time with `PeerConnection.playoutMapping`.
    public var frame: ExpressionFrame
    /// When it arrived, on this device's media clock (µs).
    public var arrivalMediaTimeMicros: UInt64
    /// Its size on the wire in bytes (≤ `ExpressionFrame.maximumEncodedSize`).
    public var byteCount: Int

    /// A received frame; see the properties.
    public init(frame: ExpressionFrame, arrivalMediaTimeMicros: UInt64, byteCount: Int) {
        self.frame = frame
        self.arrivalMediaTimeMicros = arrivalMediaTimeMicros
        self.byteCount = byteCount
    }
}

/// The decision `PeerConnection.send(_:)` makes for each frame: send it now, or drop it because
/// frames are already waiting (a queued expression is stale by the time it would leave).
enum ExpressionSendPolicy {
    /// True when a frame of `frameSize` bytes may be handed to a channel holding `bufferedAmount`
    /// unsent bytes, given the limit `maximumBuffered`.
    static func shouldSend(bufferedAmount: UInt64, frameSize: Int, maximumBuffered: UInt64) -> Bool {
        bufferedAmount + UInt64(max(frameSize, 0)) <= maximumBuffered
    }
}
