import Foundation

/// One network condition of the mouth-to-ear comparison: what the relay does to every datagram
/// each way, and for how long.
public struct LatencyCondition: Sendable, Codable, Equatable {
    /// How the report names it ("80 ± 20 ms jitter").
    public var name: String
    /// Mean one-way delay added, in milliseconds.
    public var delayMillis: Double
    /// Half-width of the uniform jitter around the delay, in milliseconds.
    public var jitterMillis: Double
    /// Probability that a datagram is dropped, 0...1.
    public var loss: Double
    /// How long the condition lasts.
    public var seconds: Double

    /// A condition; all zero is a clean path.
    public init(name: String, delayMillis: Double = 0, jitterMillis: Double = 0, loss: Double = 0, seconds: Double) {
        self.name = name
        self.delayMillis = delayMillis
        self.jitterMillis = jitterMillis
        self.loss = loss
        self.seconds = seconds
    }

    /// The relay's impairment for this condition: order-preserving, as on a single path.
    public var impairment: UDPRelay.Impairment {
        UDPRelay.Impairment(delayMillis: delayMillis, jitterMillis: jitterMillis, loss: loss)
    }

    /// The bench's schedule, run back to back through one call: clean, jitter, worse jitter with
    /// loss, then clean again (whether the jitter buffer comes back down).
    public static let standardSchedule: [LatencyCondition] = [
        LatencyCondition(name: "clean", seconds: 20),
        LatencyCondition(name: "80 ± 20 ms jitter", delayMillis: 80, jitterMillis: 20, seconds: 20),
        LatencyCondition(name: "200 ± 50 ms jitter, 5 % loss", delayMillis: 200, jitterMillis: 50, loss: 0.05, seconds: 20),
        LatencyCondition(name: "clean again", seconds: 20),
    ]
}
