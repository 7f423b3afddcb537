/// The strict privacy level's last stage: it turns what `ExpressionPrivacyFilter` lets through
/// into canonical events, so that the stream says *that* someone smiled, frowned, raised their
/// brows, puckered, nodded or turned, and not *how* their face does it. What the re-identification
/// experiment found each face's tracking still to reveal through the filter (docs/privacy.md) is
/// not sent at all.
///
/// - **Events with fixed profiles.** Smile, brow raise, frown, pucker and funnel are each either on
///   (from a filter reading of `onReading` until it falls below `offReading`) or off. When one
///   comes on it rises to the channel's canonical intensity over `riseSeconds`,
///   stays there while it lasts and at least `minimumSeconds`, and falls back over `fallSeconds`:
///   every smile of every person is the same smile, only its timing is the person's.
/// - **The mouth follows the voice** when the caller hands in the voice's jaw opening (`voiceMouth`,
///   from `VoiceExpressionGenerator`: the voice travels anyway); without one, the filter's jaw.
/// - **Turns and nods as events.** The head is turned (yaw ±`turnDegrees`) or nodded (pitch
///   ±`nodDegrees`) while the filter's departure from the usual pose passes half of what this
///   face's own departures reach (the `turnPercentile` of their size over the last
///   `turnSeconds`, at least `turnThresholdFloor`), and back once it falls below half of that
///   threshold; the avatar's head moves at `headDegreesPerSecond`. Roll is not sent.
/// - **The avatar's own blinks.** Whether blinks read on a face depends on the face (how wide its
///   eyes are, how the tracker sees its lids), so blinks are not taken from the camera: the avatar
///   blinks on its own, 2–6 s apart at random, with `VoiceExpressionGenerator`'s blink.
/// - **No gaze** is sent: the tracked pupils of a face that looks ahead wander with the face.
public struct CanonicalExpressionStage: Sendable {
    /// One on/off channel: the coefficients that carry it and the intensity it is sent at.
    public struct Event: Sendable {
        public let shapes: [BlendShape]
        public let intensity: Float
    }

    /// Smile, brow raise, frown, pucker and funnel, in that order.
    public static let events: [Event] = [
        Event(shapes: [.mouthSmileLeft, .mouthSmileRight], intensity: 0.7),
        Event(shapes: [.browInnerUp, .browOuterUpLeft, .browOuterUpRight], intensity: 0.7),
        Event(shapes: [.mouthFrownLeft, .mouthFrownRight], intensity: 0.55),
        Event(shapes: [.mouthPucker], intensity: 0.6),
        Event(shapes: [.mouthFunnel], intensity: 0.5),
    ]

    /// The filter's reading at which an event comes on, and below which it goes off again: a
    /// trace the filter lets through (a smile read into an open jaw) is not made a whole smile.
    public var onReading: Float = 0.25
    public var offReading: Float = 0.1
    /// Seconds an event takes to reach its intensity.
    public var riseSeconds: Double = 0.15
    /// Seconds it takes to fall back to rest.
    public var fallSeconds: Double = 0.25
    /// The shortest event: a flicker shows as long as this.
    public var minimumSeconds: Double = 0.4
    /// The yaw of a turn and the pitch of a nod, in degrees.
    public var turnDegrees: Float = 15
    public var nodDegrees: Float = 8
    /// Seconds of history of the size of the head's departures, and the percentile of it whose
    /// half starts a turn or nod…
    public var turnSeconds: Double = 60
    public var turnPercentile: Double = 0.9
    /// …but never below this many degrees.
    public var turnThresholdFloor: Float = 3
    /// How fast the avatar's head moves into and out of a turn or nod.
    public var headDegreesPerSecond: Float = 90

    /// Per event: its level now, and since when it has been on (nil: off).
    private var levels = [Float](repeating: 0, count: events.count)
    private var onSince = [Double?](repeating: nil, count: events.count)
    /// Yaw and pitch: the size of the filter's departures over `turnSeconds`, the turn or nod in
    /// progress (-1, 0, 1) and where the avatar's head is.
    private var departures = [SlidingPercentile(seconds: 60), SlidingPercentile(seconds: 60)]
    private var turned = [0, 0]
    private var head: [Float] = [0, 0]
    private var lastTime: Double?
    /// The avatar's own blinks (nil before the first frame), and what times them.
    private var blinks: BlinkSchedule?
    private var random: SplitMix64

    /// A stage whose own blinks are timed by `seed` (a random one by default, so that their timing
    /// links nothing).
    public init(seed: UInt64 = UInt64.random(in: 0...UInt64.max)) { random = SplitMix64(seed: seed) }

    /// The canonical expression for `e` (the privacy filter's output) at `timeSeconds`.
    public mutating func apply(_ e: Expression, at timeSeconds: Double, voiceMouth: Float? = nil) -> Expression {
        let dt = Float(lastTime.map { min(max(timeSeconds - $0, 0), 0.5) } ?? 1.0 / 30)
        lastTime = timeSeconds
        var out = Expression()
        for (k, event) in Self.events.enumerated() {
            let reading = event.shapes.reduce(0) { $0 + e[$1] } / Float(event.shapes.count)
            if reading >= onReading {
                onSince[k] = onSince[k] ?? timeSeconds
            } else if let since = onSince[k], reading < offReading, timeSeconds - since >= minimumSeconds {
                onSince[k] = nil
            }
            let target: Float = onSince[k] == nil ? 0 : event.intensity
            let rate = event.intensity / Float(target > levels[k] ? riseSeconds : fallSeconds)
            levels[k] = approach(levels[k], target, rate * dt)
            for shape in event.shapes { out[shape] = levels[k] }
        }
        ExpressionPrivacyFilter.setSmile(out[.mouthSmileLeft], in: &out)
        out[.jawOpen] = voiceMouth ?? e[.jawOpen]
        let lids = Float(ownBlink(at: timeSeconds))
        out[.eyeBlinkLeft] = lids; out[.eyeBlinkRight] = lids

        let poses = [e.headPose.yaw, e.headPose.pitch]
        let sizes = [turnDegrees, nodDegrees]
        for k in 0..<2 {
            let value = poses[k].isFinite ? poses[k] : 0
            departures[k].seconds = turnSeconds
            departures[k].add(abs(value), at: timeSeconds)
            let threshold = max(turnThresholdFloor, 0.5 * (departures[k].value(at: turnPercentile) ?? 0))
            if abs(value) > threshold {
                turned[k] = value > 0 ? 1 : -1
            } else if abs(value) < threshold / 2 {
                turned[k] = 0
            }
            head[k] = approach(head[k], Float(turned[k]) * sizes[k], headDegreesPerSecond * dt)
        }
        out.headPose = HeadPose(yaw: head[0], pitch: head[1], roll: 0)
        return out
    }

    /// How closed the avatar's eyes are at `time` in its own blinking, 2–6 s apart.
    private mutating func ownBlink(at time: Double) -> Double {
        var schedule = blinks ?? BlinkSchedule()
        if blinks == nil { schedule.begin(at: time, using: &random) }
        let lids = schedule.lids(at: time, using: &random)
        blinks = schedule
        return lids
    }

    private func approach(_ value: Float, _ target: Float, _ step: Float) -> Float {
        value < target ? min(value + step, target) : max(value - step, target)
    }
}
