/// Maps a remote sender's media time (its `ExpressionFrame.captureTimeMicros`, the capture time of
/// its audio) to the local time at which audio captured then is played: the time a lip-sync layer
/// should show the expression captured at the same instant.
///
/// How it is measured: the sender's RTCP sender reports carry its media clock (Veil sets
/// `ntp-time-source=clock-time` and capture-time sync), the receiving jitter buffer stamps each
/// audio packet with the sender time it corresponds to (a reference-timestamp meta), and the
/// playout stage records, per packet, the difference between that and the packet's place on the
/// playout's timeline (`AudioPlayoutStage`: its media time put on the local clock by the fastest
/// packets). Playout adds the playout's delay. Both clocks are monotonic microseconds; drift
/// between two machines' clocks is absorbed because the offset is refreshed with every packet.
public struct PlayoutMapping: Sendable, Equatable {
    /// An audio packet's time on the playout's timeline (when the fastest packets bring it) minus
    /// the sender media time at which it was captured (µs). Includes the clock difference between the machines.
    public var offsetMicros: Int64
    /// From the playout's timeline to playout (µs): the playout's delay.
    public var latencyMicros: UInt64
    /// The sender media time of the latest packet (µs), to unwrap 48-bit capture times.
    public var referenceSenderMicros: UInt64

    /// A mapping; see the properties.
    public init(offsetMicros: Int64, latencyMicros: UInt64, referenceSenderMicros: UInt64) {
        self.offsetMicros = offsetMicros
        self.latencyMicros = latencyMicros
        self.referenceSenderMicros = referenceSenderMicros
    }

    /// Local media time at which audio the sender captured at `senderMicros` is played. Accepts
    /// full or 48-bit (wire) times: the value is unwrapped to the one nearest the latest packet.
    public func playoutTimeMicros(forSenderMediaTimeMicros senderMicros: UInt64) -> UInt64 {
        let sender = Self.unwrap48(senderMicros, near: referenceSenderMicros)
        let local = Int64(bitPattern: sender) &+ offsetMicros &+ Int64(clamping: latencyMicros)
        return UInt64(max(local, 0))
    }

    /// The sender media time of the audio being played at local media time `localMicros`.
    public func senderMediaTimeMicros(playingAt localMicros: UInt64) -> UInt64 {
        let sender = Int64(bitPattern: localMicros) &- Int64(clamping: latencyMicros) &- offsetMicros
        return UInt64(max(sender, 0))
    }

    private static let wireMask: UInt64 = (1 << 48) - 1

    /// The 64-bit time whose low 48 bits are those of `time` and which lies nearest `reference`.
    static func unwrap48(_ time: UInt64, near reference: UInt64) -> UInt64 {
        let difference = (time &- reference) & wireMask
        let signed = difference >= 1 << 47 ? Int64(difference) - Int64(1 << 48) : Int64(difference)
        return UInt64(bitPattern: Int64(bitPattern: reference) &+ signed)
    }
}
