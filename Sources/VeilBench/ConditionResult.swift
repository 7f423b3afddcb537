import Foundation

/// What one network condition of `ChromiumAnchor.run` measured: the mouth-to-ear delay of each
/// tone burst, and side B's receiver statistics (libwebrtc's NetEq) over the condition.
public struct ConditionResult: Codable, Sendable, Equatable {
    /// The condition the relay applied.
    public var condition: LatencyCondition
    /// How long the condition really ran (its boundaries fall between bursts, so whole bursts).
    public var seconds: Double
    /// Bursts side A emitted while the condition was in force.
    public var burstsSent: Int
    /// Of those, bursts whose onset side B heard (matched by time and pitch); the others count as lost.
    public var burstsDetected: Int
    /// Mouth-to-ear delay of each detected burst, in emission order, in milliseconds: heard onset −
    /// scheduled start, both on the page's one AudioContext clock (no device buffer in it).
    public var mouthToEarMillis: [Double]
    /// Onsets heard that matched no burst (a pitch that was not sent, or heard too late).
    public var unmatchedOnsets: Int
    /// NetEq's mean delay over the condition: Δ`jitterBufferDelay` / Δ`jitterBufferEmittedCount`
    /// (the time each sample spent in the jitter buffer), in milliseconds. Nil without statistics.
    public var netEqDelayMillis: Double?
    /// NetEq's mean target delay over the condition (Δ`jitterBufferTargetDelay` / Δ emitted), in ms.
    public var netEqTargetDelayMillis: Double?
    /// Concealed audio per minute of audio played: Δ`concealedSamples` / Δ`totalSamplesReceived` × 60.
    public var concealedSecondsPerMinute: Double?
    /// Runs of concealed audio that began during the condition (Δ inbound-rtp `concealmentEvents`:
    /// a concealed sample after a received one, for a lost packet or a late one). Nil without statistics.
    public var concealmentEvents: Int?
    /// RTP packets received (inbound-rtp `packetsReceived`) during the condition.
    public var packetsReceived: Int
    /// RTP packets never received (inbound-rtp `packetsLost`: expected − received, RFC 3550).
    /// libwebrtc has no late-packet counter as such: a packet that arrives late counts as received.
    public var packetsLost: Int
    /// Packets NetEq received but threw away, mostly because they came too late to be played
    /// (inbound-rtp `packetsDiscarded`): the nearest libwebrtc has to a late-packet count.
    public var packetsDiscarded: Int
    /// Datagrams the relay forwarded side A → side B and back, and dropped as loss (both ways).
    public var datagramsForwardedAToB: Int, datagramsForwardedBToA: Int, datagramsDropped: Int
    /// Whether side B's selected candidate pair sent to the relay throughout.
    public var throughRelay: Bool
    /// Seconds of the page's audio clock per second of the wall clock, over the condition (1 when
    /// the headless browser's audio output keeps real time). Nil with fewer than two bursts.
    public var audioClockRate: Double?
    /// The browser, as its user agent names it ("HeadlessChrome/156.0.0.0").
    public var browser: String

    /// The condition's name.
    public var name: String { condition.name }

    /// Share of the bursts sent that were heard, 0...1 (0 when none were sent).
    public var detectedShare: Double { burstsSent == 0 ? 0 : Double(burstsDetected) / Double(burstsSent) }

    /// The `p`th percentile (0…100) of the mouth-to-ear delays, interpolated; nil when none was heard.
    public func mouthToEarPercentile(_ p: Double) -> Double? {
        mouthToEarMillis.isEmpty ? nil : Stats.percentile(p, ofSorted: mouthToEarMillis.sorted())
    }
}
