/// The One-Euro filter (Casiez, Roussel & Vogel, CHI 2012): a low-pass filter whose cutoff rises
/// with the signal's speed, so a signal at rest is smoothed hard (no jitter) while fast motion
/// passes with little lag.
///
/// Each sample: the speed is estimated from the last output and low-passed at `derivativeCutoff`;
/// the cutoff becomes `minCutoff + beta × |speed|`; the sample is low-passed at that cutoff. Tune
/// `minCutoff` (Hz) down until jitter at rest is acceptable, then `beta` (per signal unit) up until
/// fast moves no longer lag.
///
/// Robust to what trackers produce: the first sample passes through unchanged; a sample whose
/// timestamp is not later than the previous one is treated as a repeat (the last output is
/// returned and the state kept, though a clock that jumps back is followed from then on); a
/// non-finite sample or timestamp is ignored. Finite input never yields a non-finite output.
public struct OneEuroFilter: Sendable {
    /// Cutoff frequency at rest, in Hz (> 0).
    public let minCutoff: Double
    /// How much the cutoff rises per unit of speed (signal units per second), ≥ 0.
    public let beta: Double
    /// Cutoff frequency of the speed estimate, in Hz (> 0).
    public let derivativeCutoff: Double

    private var last: (time: Double, value: Double, derivative: Double)?

    /// A filter with the given parameters. Parameters that make no sense are repaired rather than
    /// trapped: a cutoff that is not a positive finite number becomes 1 Hz, a negative or non-finite
    /// `beta` becomes 0.
    public init(minCutoff: Double, beta: Double, derivativeCutoff: Double = 1) {
        func cutoff(_ hz: Double) -> Double { hz.isFinite && hz > 0 ? hz : 1 }
        self.minCutoff = cutoff(minCutoff)
        self.beta = beta.isFinite && beta >= 0 ? beta : 0
        self.derivativeCutoff = cutoff(derivativeCutoff)
    }

    /// The last value returned, or nil before the first finite sample (or after `reset()`).
    public var lastOutput: Double? { last?.value }

    /// Filters sample `x` taken at `timeSeconds` and returns the smoothed value.
    ///
    /// Returns the previous output for a non-finite `x` or time, and for a time not after the
    /// previous one; before any output exists such a sample is returned as it came.
    public mutating func filter(_ x: Double, at timeSeconds: Double) -> Double {
        guard x.isFinite, timeSeconds.isFinite else { return last?.value ?? x }
        guard let previous = last else {
            last = (timeSeconds, x, 0)
            return x
        }
        let dt = timeSeconds - previous.time
        guard dt > 0 else {
            // A repeat: keep the output. If the clock went back, follow the new clock from here so
            // that a restarted source is not ignored until it catches up with the old one.
            last?.time = timeSeconds
            return previous.value
        }
        let speed = (x - previous.value) / dt
        let derivative = previous.derivative + Self.alpha(cutoff: derivativeCutoff, dt: dt) * (speed - previous.derivative)
        let cutoff = minCutoff + beta * abs(derivative)
        let value = previous.value + Self.alpha(cutoff: cutoff, dt: dt) * (x - previous.value)
        // Overflow guard: a finite but absurd input (e.g. 1e308 after 0) must not leave NaN behind.
        guard value.isFinite, derivative.isFinite else {
            last = (timeSeconds, x, 0)
            return x
        }
        last = (timeSeconds, value, derivative)
        return value
    }

    /// Forgets all history: the next sample passes through unchanged.
    public mutating func reset() {
        last = nil
    }

    /// Smoothing factor of a first-order low-pass at `cutoff` Hz over `dt` seconds.
    private static func alpha(cutoff: Double, dt: Double) -> Double {
        let tau = 1 / (2 * Double.pi * cutoff)
        return 1 / (1 + tau / dt)
    }
}

/// One `OneEuroFilter` per channel of a fixed-size vector, e.g. the 52 blendshape coefficients or
/// the three head-pose angles, all sharing parameters and timestamps.
public struct OneEuroFilterBank: Sendable {
    private var filters: [OneEuroFilter]

    /// A bank of `count` independent filters (a negative count is taken as 0).
    public init(count: Int, minCutoff: Double, beta: Double, derivativeCutoff: Double = 1) {
        filters = Array(repeating: OneEuroFilter(minCutoff: minCutoff, beta: beta, derivativeCutoff: derivativeCutoff),
                        count: max(count, 0))
    }

    /// The number of channels.
    public var count: Int { filters.count }

    /// Filters each channel of `values` taken at `timeSeconds`. The result has as many elements as
    /// `values`: elements beyond `count` pass through unfiltered; channels missing from `values`
    /// keep their state.
    public mutating func filter(_ values: [Float], at timeSeconds: Double) -> [Float] {
        var out = values
        for index in 0..<min(values.count, filters.count) {
            out[index] = Float(filters[index].filter(Double(values[index]), at: timeSeconds))
        }
        return out
    }

    /// Forgets every channel's history.
    public mutating func reset() {
        for index in filters.indices { filters[index].reset() }
    }
}
