/// An OSC time tag: NTP format, seconds since 1900-01-01 and a 32-bit binary fraction.
public struct OSCTimeTag: Equatable, Sendable {
    public var seconds: UInt32
    public var fraction: UInt32

    /// The special value 1: "immediately", what VMC senders stamp their bundles with.
    public static let immediately = OSCTimeTag(seconds: 0, fraction: 1)

    /// Seconds between the NTP epoch (1900) and the Unix epoch (1970).
    public static let ntpToUnixSeconds: UInt64 = 2_208_988_800

    /// The tag with these raw fields.
    public init(seconds: UInt32, fraction: UInt32) { self.seconds = seconds; self.fraction = fraction }

    /// The time `unixMicros` microseconds after 1970-01-01 (NTP seconds wrap in 2036, as NTP's do).
    public init(unixMicros: UInt64) {
        let whole = unixMicros / 1_000_000, micros = unixMicros % 1_000_000
        seconds = UInt32(truncatingIfNeeded: whole &+ Self.ntpToUnixSeconds)
        fraction = UInt32(truncatingIfNeeded: (micros << 32) / 1_000_000)
    }
}
