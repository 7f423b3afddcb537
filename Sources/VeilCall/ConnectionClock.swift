import VeilCore

/// The clock one connection shows its peer: this device's media clock moved to a random origin,
/// and expression sequence numbers moved by a random amount, both drawn afresh for every
/// `PeerConnection`.
///
/// The device's media clock is its monotonic clock, the time since the machine booted. Sent as it
/// is, in frame capture times and RTCP sender reports, it would tell every peer the machine's boot
/// time to the microsecond: a number that links calls from one machine across rooms, names and
/// relays until it reboots. Every time a peer sees is on the connection's clock instead: frames
/// (`outgoing(_:)`), and RTCP sender reports, whose pipeline runs on a GStreamer clock calibrated
/// to the same origin (`PeerGraph`). Everything local (levels, received audio, playout mappings,
/// file start times) is converted back (`localMicros(ofConnectionNanos:)`), so the rest of Veil
/// keeps one process-wide clock and nothing of the origin leaves the device.
///
/// A connection's clock starts between 2^40 and 2^46 µs (12.7 days to 2.2 years), uniformly, so
/// it does not wrap the wire's 48-bit capture time for years and says nothing about the uptime.
public struct ConnectionClock: Sendable, Equatable {
    /// Connection media time minus this device's media time (µs).
    public let offsetMicros: Int64
    /// Added (wrapping) to every expression frame's sequence number on this connection.
    public let sequenceOffset: UInt32

    /// The range a connection's clock starts in (µs).
    public static let originRange: Range<UInt64> = (1 << 40) ..< (1 << 46)

    /// A clock with the given offsets (tests, and a connection's own draw).
    public init(offsetMicros: Int64, sequenceOffset: UInt32) {
        self.offsetMicros = offsetMicros
        self.sequenceOffset = sequenceOffset
    }

    /// A fresh random clock for a connection created at device media time `nowMicros`.
    public static func random<G: RandomNumberGenerator>(at nowMicros: UInt64, using generator: inout G) -> ConnectionClock {
        let origin = UInt64.random(in: originRange, using: &generator)
        return ConnectionClock(offsetMicros: Int64(bitPattern: origin) &- Int64(bitPattern: nowMicros),
                               sequenceOffset: UInt32.random(in: .min ... .max, using: &generator))
    }

    /// A fresh random clock from the system's random source.
    public static func random(at nowMicros: UInt64) -> ConnectionClock {
        var generator = SystemRandomNumberGenerator()
        return random(at: nowMicros, using: &generator)
    }

    /// `frame` as this connection's peer receives it: capture time and sequence on the connection's clock.
    public func outgoing(_ frame: ExpressionFrame) -> ExpressionFrame {
        var moved = frame
        moved.captureTimeMicros = connectionMicros(ofLocalMicros: frame.captureTimeMicros)
        moved.sequence = frame.sequence &+ sequenceOffset
        return moved
    }

    /// The frame as this device stamped it, from the one `outgoing(_:)` made of it (e.g. as a peer
    /// in the same process received it, for a measurement).
    public func original(of outgoing: ExpressionFrame) -> ExpressionFrame {
        var frame = outgoing
        frame.captureTimeMicros = localMicros(ofConnectionMicros: outgoing.captureTimeMicros)
        frame.sequence = localSequence(ofSent: outgoing.sequence)
        return frame
    }

    /// A device media time (µs) on the connection's clock.
    public func connectionMicros(ofLocalMicros local: UInt64) -> UInt64 {
        UInt64(bitPattern: Int64(bitPattern: local) &+ offsetMicros)
    }

    /// A connection clock time (µs) as device media time.
    public func localMicros(ofConnectionMicros time: UInt64) -> UInt64 {
        UInt64(bitPattern: Int64(bitPattern: time) &- offsetMicros)
    }

    /// A time of the connection's GStreamer clock (ns) as device media time (µs).
    public func localMicros(ofConnectionNanos nanos: UInt64) -> UInt64 {
        localMicros(ofConnectionMicros: nanos / 1000)
    }

    /// The sequence number this device gave a frame that went out as `sequence`.
    public func localSequence(ofSent sequence: UInt32) -> UInt32 { sequence &- sequenceOffset }
}
