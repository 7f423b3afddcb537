import VeilCore

/// What one endpoint receives for a frame of Veil's expression stream, as datagrams: the pure half
/// of sending (`InteropSender` in VeilInteropNetwork does the I/O).
///
/// A tracked frame becomes `ExpressionUpdate(frame.expression)`, timed by the frame's capture time
/// (seconds on the tracker's clock): for VMC the datagrams of `VMCEncoder` with that time in
/// `/VMC/Ext/T`; for Live Link one `LiveLinkFacePacket` whose frame time is that time at
/// `framesPerSecond`. A lost frame becomes nothing, as from a Performer that pauses: a Marionette
/// keeps the values of its last apply and a Live Link subject its last frame, rather than jumping
/// to a neutral face and back at every dropout.
public struct InteropFrameEncoder: Sendable {
    /// The protocol encoded for.
    public let kind: InteropEndpoint.Kind
    /// The VMC encoder (its datagram size and bone positions).
    public var vmc: VMCEncoder
    /// Live Link's device id (the Live Link Face app sends a UUID).
    public var deviceID: String
    /// Live Link's subject name: what the face is called in Unreal's Live Link window.
    public var subjectName: String
    /// The tracker's frame rate, which Live Link's frame times count in.
    public var framesPerSecond: Int32

    /// The Live Link subject name Veil uses unless told otherwise.
    public static let defaultSubjectName = "Veil"

    /// An encoder for `kind`.
    public init(kind: InteropEndpoint.Kind, vmc: VMCEncoder = VMCEncoder(), deviceID: String = "Veil",
                subjectName: String = InteropFrameEncoder.defaultSubjectName, framesPerSecond: Int32 = 30) {
        self.kind = kind; self.vmc = vmc; self.deviceID = deviceID; self.subjectName = subjectName
        self.framesPerSecond = max(framesPerSecond, 1)
    }

    /// The datagrams that carry `frame`, in the order they are sent; none for a lost frame.
    /// Throws `InteropError.oversized` when `deviceID` or `subjectName` is too long for Live Link.
    public func datagrams(for frame: ExpressionFrame) throws -> [[UInt8]] {
        guard frame.state == .tracked else { return [] }
        let seconds = Double(frame.captureTimeMicros) / 1e6
        let update = ExpressionUpdate(frame.expression, time: seconds)
        switch kind {
        case .vmc:
            return vmc.datagrams(for: update)
        case .liveLink:
            let time = LiveLinkFacePacket.FrameTime(seconds: seconds, framesPerSecond: framesPerSecond)
            return [try LiveLinkFacePacket(deviceID: deviceID, subjectName: subjectName, frameTime: time, update: update).encoded()]
        }
    }
}
