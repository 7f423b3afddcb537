/// SplitMix64 (Steele, Lea & Flood): a small, seedable generator. Used where randomness must be
/// reproducible (backoff jitter under a test's seed, randomised tests), never for secrets.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

extension SplitMix64 {
    /// A uniform number in [0, 1) from the top 53 bits of the next random number.
    mutating func unit() -> Double { Double(next() >> 11) / 9_007_199_254_740_992 }
}
