/// How usable the connection to one peer is, in the six levels call SDKs show users (TRTC,
/// Agora): from `excellent` to `down`. Levels are ordered: `excellent < good < … < down`.
public enum NetworkQuality: Int, Sendable, Comparable, CaseIterable, CustomStringConvertible {
    /// Voice and expressions as if in the same room.
    case excellent = 1
    /// Slight delay or rare loss; nobody notices.
    case good
    /// Noticeable delay or concealed loss; conversation still flows.
    case poor
    /// Frequent dropouts or long delay; people talk over each other.
    case bad
    /// Barely usable.
    case veryBad
    /// Not connected, or nothing arrives.
    case down

    /// Lower-camel name, e.g. `"veryBad"`.
    public var description: String {
        switch self {
        case .excellent: "excellent"
        case .good: "good"
        case .poor: "poor"
        case .bad: "bad"
        case .veryBad: "veryBad"
        case .down: "down"
        }
    }

    /// Worse levels compare greater: `excellent < good < poor < bad < veryBad < down`.
    public static func < (a: NetworkQuality, b: NetworkQuality) -> Bool { a.rawValue < b.rawValue }

    /// Upper bounds (inclusive) of round-trip time in milliseconds for excellent, good, poor and bad;
    /// anything longer is very bad. Chosen from ITU-T G.114 (one-way < 150 ms keeps conversation
    /// natural, so RTT ≤ 300 ms is still usable) and the levels call SDKs publish.
    public static let roundTripLimitsMillis: [Double] = [100, 200, 300, 500]
    /// Upper bounds (inclusive) of packet loss (fraction 0…1) for excellent, good, poor and bad;
    /// more is very bad. Opus with in-band FEC conceals about 5–10 % of loss in speech.
    public static let lossLimits: [Double] = [0.01, 0.03, 0.08, 0.15]

    /// The level for a round-trip time and a packet-loss fraction: the worse of the level each
    /// gives on its own (`roundTripLimitsMillis`, `lossLimits`). `down` when not connected or when
    /// everything sent was lost (`lossFraction >= 1`). A metric that is not known yet (nil, e.g.
    /// RTT before the first RTCP round trip) does not lower the level; NaN counts as unknown and
    /// negative values as 0.
    public static func assess(roundTripMillis: Double?, lossFraction: Double?, isConnected: Bool) -> NetworkQuality {
        guard isConnected else { return .down }
        func level(_ value: Double?, _ limits: [Double]) -> NetworkQuality {
            guard let value, !value.isNaN else { return .excellent }
            let index = limits.firstIndex(where: { max(value, 0) <= $0 }) ?? limits.count
            return NetworkQuality(rawValue: index + 1) ?? .veryBad
        }
        if let lossFraction, !lossFraction.isNaN, lossFraction >= 1 { return .down }
        return max(level(roundTripMillis, roundTripLimitsMillis), level(lossFraction, lossLimits))
    }
}
