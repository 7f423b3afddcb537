import Foundation

/// The privacy stage between `ExpressionEstimator` and the wire: it re-expresses what a face does in
/// a small canonical vocabulary, so that the stream says as little as it can about *which face*
/// produced it.
///
/// The estimator's output depends on the face as well as on the movement. In the
/// re-identification experiment (docs/privacy.md) the same jaw drop reads 1.7–4.7× differently on
/// different faces, blinks 0.2–0.9, some faces read a frown whenever the jaw opens or a smile at
/// rest, and some move their pupils and nod when they only talk. Each such response is a signature:
/// a nearest-neighbour classifier names the person from the estimator's output two times in three.
/// This stage is causal (it uses only past frames) and keeps, per person:
///
/// - **Canonical channels**: jaw opening, smile, brow raise, frown, pucker and funnel. Each one
///   has its resting level tracked (a low percentile of the last `baselineSeconds`, so a neutral
///   face that was learnt while talking, or a tracker that settles elsewhere, reads 0 again), its
///   running peak (forgotten with a time constant of `peakSeconds`), and is sent as the fraction
///   of that peak, after a dead zone of `deadZone` (noise and weak cross-talk read 0), scaled to
///   the channel's canonical strength. Left and right are one channel: winks and one-sided
///   smiles are not sent. Smile and frown are the two directions of one movement of the mouth
///   corners and share one resting level (`cornerBaselinePercentile` of the signed corner
///   movement): a neutral face learnt during a smile, which would read every rest as a frown,
///   reads 0 again.
/// - **Blinks** as one canonical blink: a blink starts when the lids close past half of the
///   person's usual blink (at most once per `blinkRefractorySeconds`, and again only once they
///   have opened past a third of it); the avatar's lids then close, hold and open at one canonical
///   speed, however long the reading stays closed. Some faces' tracking reads a lid half shut for
///   seconds at a time; long closures of the eyes are sent as a blink.
/// - **Onset**: every channel but the jaw is sent only once it has stayed above its dead zone for
///   `onsetSeconds`; on some faces the tracker makes the smile or brows twitch with each syllable.
///   Frowns, puckers and funnels, which some faces' tracking reads now and then on its own, and
///   looks away wait `sustainedOnsetSeconds`.
/// - **Head pose and gaze** through a median of the last `medianFrames` frames (the spikes that
///   some faces' tracking shows drop out), as departures from their usual value (the median of
///   the last `poseBaselineSeconds`: a face that sits turned reads frontal), with dead zones:
///   `yawDeadZone` degrees off yaw and `gazeDeadZone` off each gaze axis; pitch and roll pass a
///   gate of `nodDeadZone` with hysteresis (sent whole once past it, until back within half of
///   it), both growing with how unsteadily the axis is tracked (`poseSpreadFactor`).
/// - Everything else (squint, wide eyes, brow lowering, cheek puff, mouth shift, sneer, rolls,
///   presses, tongue) is not sent; dimples and cheek raise follow the smile as the estimator
///   derives them.
///
/// At rest everything is 0, so two people at rest send the same frame.
///
/// What it costs: winks and one-sided expressions, absolute intensity (each person's own range is
/// mapped to the same range), the expressions it drops, nods and tilts
/// smaller than `nodDeadZone`, about `medianFrames / 2` frames of delay on head pose and gaze,
/// `onsetSeconds` on the onset of smiles and brows and `sustainedOnsetSeconds` on frowns, puckers
/// and looks away, long closures of the eyes (sent as a blink), and a turn
/// held for more than half of `poseBaselineSeconds` becoming straight ahead. `veil call --full-expression`
/// turns it off.
public struct ExpressionPrivacyFilter: Sendable {
    /// One canonical channel: the coefficients it reads (their mean) and writes.
    public struct Channel: Sendable {
        public var shapes: [BlendShape]
        /// For smile and frown: the signed mouth-corner movement (inter-eye distances, up positive)
        /// that reads as 1 on this channel, measured from the corners' shared resting level
        /// instead of the channel's own.
        public var cornerUnit: Float?
        /// The running peak before anything has been seen (in the estimator's units); a channel
        /// sent by rank (`rankFloor`) keeps no peak.
        public var initialPeak: Float
        /// The smallest peak an intensity is computed from, so that a channel that barely moves
        /// (noise, cross-talk) is not blown up.
        public var peakFloor: Float
        /// What the person's own peak (or, sent by rank, the top rank) is sent as.
        public var strength: Float
        /// For the jaw: sent by rank instead of by its peak. A reading's rank among the person's
        /// readings over `baselineSeconds` (its mid-rank, 0…1) is sent from `rankFloor` up,
        /// rescaled to 0…1; readings within `deadZone` of `peakFloor` above rest read 0, and all do
        /// while the readings of the last `baselineSeconds` span less than `peakFloor`. The same
        /// syllables then open every face's jaw as often and as wide, however strongly or
        /// compressively its tracking reads a dropped jaw.
        public var rankFloor: Float?
        /// How long the channel must stay above its dead zone before it is sent.
        public var onset: Onset
        public init(_ shapes: [BlendShape], initialPeak: Float, peakFloor: Float, strength: Float, onset: Onset = .brief,
                    rankFloor: Float? = nil, cornerUnit: Float? = nil) {
            self.shapes = shapes; self.initialPeak = initialPeak; self.peakFloor = peakFloor; self.strength = strength
            self.onset = onset; self.rankFloor = rankFloor; self.cornerUnit = cornerUnit
        }
    }

    /// How long a movement must last before it is sent.
    public enum Onset: Sendable {
        /// At once: the jaw, which lip sync needs.
        case immediate
        /// After `onsetSeconds`: smiles and brows, which some faces' tracking twitches with every
        /// syllable.
        case brief
        /// After `sustainedOnsetSeconds`: frowns, puckers and funnels, which some faces' tracking
        /// reads on its own for a few frames now and then, while people hold them for longer.
        case sustained
    }

    /// The estimator's gains, which turn its smile and frown back into corner movement.
    static let estimatorGains = ExpressionGains()

    /// The channels sent, in the estimator's units.
    public static let channels: [Channel] = [
        Channel([.jawOpen], initialPeak: 0.3, peakFloor: 0.05, strength: 0.7, onset: .immediate, rankFloor: 0.6),
        Channel([.mouthSmileLeft, .mouthSmileRight], initialPeak: 0.5, peakFloor: 0.1, strength: 0.8,
                cornerUnit: estimatorGains.smile),
        Channel([.browInnerUp, .browOuterUpLeft, .browOuterUpRight], initialPeak: 0.3, peakFloor: 0.05, strength: 0.8),
        Channel([.mouthFrownLeft, .mouthFrownRight], initialPeak: 0.5, peakFloor: 0.3, strength: 0.6, onset: .sustained,
                cornerUnit: -estimatorGains.frown),
        Channel([.mouthPucker], initialPeak: 0.5, peakFloor: 0.3, strength: 0.6, onset: .sustained),
        Channel([.mouthFunnel], initialPeak: 0.5, peakFloor: 0.3, strength: 0.6, onset: .sustained),
    ]

    /// Seconds of history the resting level of each channel is taken from.
    public var baselineSeconds: Double = 20
    /// The percentile of that history taken as the resting level.
    public var baselinePercentile: Double = 0.1
    /// The percentile of the signed mouth-corner movement (smile up, frown down) over
    /// `baselineSeconds` taken as the corners' resting level: a smile or a frown held for less
    /// than this fraction of the time stays above or below it.
    public var cornerBaselinePercentile: Double = 0.2
    /// Time constant (s) with which a channel's peak is forgotten while the channel moves.
    public var peakSeconds: Double = 10
    /// Fraction of the peak below which a channel reads 0; the rest is rescaled to reach 1.
    public var deadZone: Float = 0.3
    /// Seconds a `.brief` channel must stay above its dead zone before it is sent.
    public var onsetSeconds: Double = 0.16
    /// Seconds a `.sustained` channel, or gaze, must stay beyond its dead zone before it is sent.
    public var sustainedOnsetSeconds: Double = 0.33
    /// Frames in the median taken of head pose and gaze.
    public var medianFrames = 7
    /// Degrees taken off the magnitude of yaw.
    public var yawDeadZone: Float = 1
    /// Degrees a nod or tilt of the head (pitch, roll) must pass to be sent, whole; smaller ones
    /// are how several faces' tracking wanders.
    public var nodDeadZone: Float = 8
    /// Taken off each gaze axis before rescaling to ±1.
    public var gazeDeadZone: Float = 0.4
    /// Seconds of history whose median is taken as the usual head pose and gaze, sent as 0.
    public var poseBaselineSeconds: Double = 20
    /// The dead zone of each head-pose axis grows to this many times its median absolute
    /// deviation over `poseBaselineSeconds` (how unsteady the tracking of this face is)…
    public var poseSpreadFactor: Float = 6
    /// …up to this many degrees.
    public var poseSpreadDeadZoneLimit: Float = 6
    /// The blink reading (eyeBlink, the mean of both eyes) assumed before the first blink.
    public var initialBlinkPeak: Float = 0.4
    /// The smallest blink peak: lids that barely move never read as a blink.
    public var blinkPeakFloor: Float = 0.12
    /// Time constant (s) with which the blink peak is forgotten.
    public var blinkPeakSeconds: Double = 30
    /// Seconds the avatar's lids take to close, stay shut and open in a blink.
    public var lidCloseSeconds: Double = 0.07
    /// See `lidCloseSeconds`.
    public var lidHoldSeconds: Double = 0.05
    /// See `lidCloseSeconds`.
    public var lidOpenSeconds: Double = 0.12
    /// The shortest time from one blink's start to the next's.
    public var blinkRefractorySeconds: Double = 0.3

    private var history: [SlidingPercentile] = []
    /// The signed mouth-corner movement over `baselineSeconds`.
    private var cornerHistory = SlidingPercentile(seconds: 20)
    private var peaks: [Float] = []
    /// Per channel, since when it has been above its dead zone.
    private var activeSince: [Double?] = []
    /// Yaw, pitch, roll, gaze x and gaze y over `poseBaselineSeconds`.
    private var poseHistory: [SlidingPercentile] = []
    private var blinkPeak: Float = 0
    /// Since when gaze has been beyond its dead zone.
    private var gazeSince: Double?
    /// When the last blink started.
    private var blinkStart: Double?
    /// Whether the lids have opened since, so that a new blink may start.
    private var blinkArmed = true
    private var recentPoses: [[Float]] = []
    /// Per head-pose and gaze component, whether a gated departure is being sent.
    private var poseGateOpen = [Bool](repeating: false, count: 5)
    private var lastTime: Double?

    /// A filter with the default settings above.
    public init() { reset() }

    /// Forgets everything learnt (a new person, or a recalibration).
    public mutating func reset() {
        history = Self.channels.map { _ in SlidingPercentile(seconds: baselineSeconds) }
        cornerHistory = SlidingPercentile(seconds: baselineSeconds)
        peaks = Self.channels.map(\.initialPeak)
        activeSince = Self.channels.map { _ in nil }
        gazeSince = nil
        poseHistory = (0..<5).map { _ in SlidingPercentile(seconds: poseBaselineSeconds) }
        blinkPeak = initialBlinkPeak
        blinkStart = nil
        blinkArmed = true
        recentPoses = []
        poseGateOpen = [Bool](repeating: false, count: 5)
        lastTime = nil
    }

    /// The expression to transmit for `e`, estimated at `timeSeconds`.
    public mutating func apply(_ e: Expression, at timeSeconds: Double) -> Expression {
        let dt = lastTime.map { min(max(timeSeconds - $0, 0), 0.5) } ?? 1.0 / 30
        lastTime = timeSeconds
        var out = Expression()
        let corners = cornerMovement(e, at: timeSeconds)
        for (k, channel) in Self.channels.enumerated() {
            var sent: Float
            if let unit = channel.cornerUnit {
                sent = intensity(k, channel, level: max((corners.movement - corners.resting) / unit, 0), dt: dt)
            } else {
                let reading = channel.shapes.reduce(0) { $0 + e[$1] } / Float(channel.shapes.count)
                let rest = resting(k, reading, at: timeSeconds)
                if let rankFloor = channel.rankFloor {
                    sent = intensity(k, channel, rankOf: reading, above: rest, from: rankFloor)
                } else {
                    sent = intensity(k, channel, level: max(reading - rest, 0), dt: dt)
                }
            }
            sent *= channel.strength
            if !Self.held(sent > 0, since: &activeSince[k], at: timeSeconds, for: delay(of: channel.onset)) { sent = 0 }
            for shape in channel.shapes { out[shape] = sent }
        }
        Self.setSmile(out[.mouthSmileLeft], in: &out)
        let lids = blink((e[.eyeBlinkLeft] + e[.eyeBlinkRight]) / 2, dt: dt, at: timeSeconds)
        out[.eyeBlinkLeft] = lids; out[.eyeBlinkRight] = lids

        let p = median(of: [e.headPose.yaw, e.headPose.pitch, e.headPose.roll, e.gaze?.x ?? .nan, e.gaze?.y ?? .nan])
        out.headPose = HeadPose(yaw: fromUsual(0, p[0], yawDeadZone, at: timeSeconds),
                                pitch: fromUsual(1, p[1], nodDeadZone, gated: true, at: timeSeconds),
                                roll: fromUsual(2, p[2], nodDeadZone, gated: true, at: timeSeconds))
        if e.gaze != nil, p[3].isFinite, p[4].isFinite {
            let scale = 1 / max(1 - gazeDeadZone, 1e-3)
            var g = Gaze(x: clamp(fromUsual(3, p[3], gazeDeadZone, spread: false, at: timeSeconds) * scale, -1, 1),
                         y: clamp(fromUsual(4, p[4], gazeDeadZone, spread: false, at: timeSeconds) * scale, -1, 1))
            // A look away is sent once it has lasted `sustainedOnsetSeconds`: on some faces the
            // tracked pupils drift while the head turns.
            if !Self.held(g.x != 0 || g.y != 0, since: &gazeSince, at: timeSeconds, for: sustainedOnsetSeconds) { g = Gaze(x: 0, y: 0) }
            Self.setGaze(g, in: &out)
        }
        return out
    }

    /// Channel `k`'s intensity (0…1) for `level` above rest: the fraction of its running peak,
    /// less the dead zone.
    private mutating func intensity(_ k: Int, _ channel: Channel, level: Float, dt: Double) -> Float {
        // The peak is forgotten only while the channel moves: after a still stretch a faint smile
        // still reads faint, instead of as the person's widest.
        let moving = level > deadZone * max(peaks[k], channel.peakFloor)
        peaks[k] = max(level, moving ? peaks[k] * Float(exp(-dt / peakSeconds)) : peaks[k])
        let fraction = level / max(peaks[k], channel.peakFloor)
        return min(max(fraction - deadZone, 0) / (1 - deadZone), 1)
    }

    /// Channel `k`'s intensity (0…1) by rank: `reading`'s mid-rank among the channel's readings
    /// over `baselineSeconds`, from `rankFloor` up, rescaled to 0…1. It is 0 while the reading is
    /// within `deadZone` of the channel's `peakFloor` above `rest`, while fewer than
    /// `rankMinimumCount` readings are known, and while the readings' 98th percentile is less than
    /// `peakFloor` above rest: a face that has not moved the channel (a listener, a still picture)
    /// has only noise to rank.
    private func intensity(_ k: Int, _ channel: Channel, rankOf reading: Float, above rest: Float, from rankFloor: Float) -> Float {
        guard reading - rest > deadZone * channel.peakFloor, history[k].count >= Self.rankMinimumCount,
              let high = history[k].value(at: 0.98), high - rest >= channel.peakFloor,
              let rank = history[k].fraction(below: reading) else { return 0 }
        return min(max((Float(rank) - rankFloor) / max(1 - rankFloor, 1e-6), 0), 1)
    }

    /// Sets both mouth corners' smile to `smile` and the dimples and cheek raise that follow it.
    static func setSmile(_ smile: Float, in e: inout Expression) {
        e[.mouthSmileLeft] = smile; e[.mouthSmileRight] = smile
        e[.mouthDimpleLeft] = smile * 0.3; e[.mouthDimpleRight] = smile * 0.3
        e[.cheekSquintLeft] = max(smile - 0.2, 0) * 0.8; e[.cheekSquintRight] = e[.cheekSquintLeft]
    }

    /// Sets the gaze to `g` and the eye-look coefficients that follow it.
    static func setGaze(_ g: Gaze, in e: inout Expression) {
        e.gaze = g
        e[.eyeLookOutLeft] = max(g.x, 0); e[.eyeLookInLeft] = max(-g.x, 0)
        e[.eyeLookInRight] = max(g.x, 0); e[.eyeLookOutRight] = max(-g.x, 0)
        e[.eyeLookUpLeft] = max(g.y, 0); e[.eyeLookUpRight] = max(g.y, 0)
        e[.eyeLookDownLeft] = max(-g.y, 0); e[.eyeLookDownRight] = max(-g.y, 0)
    }

    /// Whether a movement that is `active` now has been so for `seconds` (its start kept in
    /// `since`, cleared when it stops): what every onset waits for.
    private static func held(_ active: Bool, since: inout Double?, at time: Double, for seconds: Double) -> Bool {
        guard active else { since = nil; return false }
        let start = since ?? time
        since = start
        return time - start >= seconds
    }

    /// Readings a channel sent by rank needs before it is sent (a third of a second).
    static let rankMinimumCount = 10

    /// Seconds a channel with `onset` must stay above its dead zone before it is sent.
    private func delay(of onset: Onset) -> Double {
        switch onset {
        case .immediate: return 0
        case .brief: return onsetSeconds
        case .sustained: return sustainedOnsetSeconds
        }
    }

    /// The resting level of channel `k`: the `baselinePercentile` of its readings over the last
    /// `baselineSeconds`, this one included.
    private mutating func resting(_ k: Int, _ reading: Float, at time: Double) -> Float {
        history[k].seconds = baselineSeconds
        history[k].add(reading, at: time)
        return history[k].value(at: baselinePercentile) ?? reading
    }

    /// The mouth corners' signed movement (raised for a smile, lowered for a frown, in the
    /// estimator's units of inter-eye distance) and its resting level.
    private mutating func cornerMovement(_ e: Expression, at time: Double) -> (movement: Float, resting: Float) {
        let movement = (e[.mouthSmileLeft] + e[.mouthSmileRight]) / 2 * Self.estimatorGains.smile
            - (e[.mouthFrownLeft] + e[.mouthFrownRight]) / 2 * Self.estimatorGains.frown
        cornerHistory.seconds = baselineSeconds
        cornerHistory.add(movement, at: time)
        return (movement, cornerHistory.value(at: cornerBaselinePercentile) ?? movement)
    }

    /// The fractions of the person's usual blink past which the lids read closed, and open again.
    static let blinkCloses: Float = 0.5, blinkOpens: Float = 0.35

    /// The avatar's lids (0 open … 1 shut) from the blink reading.
    private mutating func blink(_ reading: Float, dt: Double, at time: Double) -> Float {
        blinkPeak = max(reading, blinkPeak * Float(exp(-dt / blinkPeakSeconds)))
        let fraction = reading / max(blinkPeak, blinkPeakFloor)
        if blinkArmed, fraction > Self.blinkCloses, blinkStart.map({ time - $0 >= blinkRefractorySeconds }) ?? true {
            blinkStart = time
            blinkArmed = false
        } else if !blinkArmed, fraction < Self.blinkOpens {
            blinkArmed = true
        }
        guard let start = blinkStart else { return 0 }
        let age = time - start
        if age < lidCloseSeconds { return Float(age / lidCloseSeconds) }
        if age < lidCloseSeconds + lidHoldSeconds { return 1 }
        return Float(max(1 - (age - lidCloseSeconds - lidHoldSeconds) / lidOpenSeconds, 0))
    }

    /// Per component, the median of the last `medianFrames` values (NaN where any is missing).
    private mutating func median(of values: [Float]) -> [Float] {
        recentPoses.append(values)
        if recentPoses.count > max(medianFrames, 1) { recentPoses.removeFirst(recentPoses.count - max(medianFrames, 1)) }
        return values.indices.map { i in
            let column = recentPoses.map { $0[i] }
            guard column.allSatisfy(\.isFinite) else { return .nan }
            return column.sorted()[column.count / 2]
        }
    }

    /// Head-pose or gaze component `k` as its departure from its usual value (the median of the
    /// last `poseBaselineSeconds`, this one included), less a dead zone of `deadZone` or, with
    /// `spread`, of `poseSpreadFactor` times how much it strays (up to `poseSpreadDeadZoneLimit`).
    /// With `gated` (pitch and roll), the dead zone is a gate instead: a departure past it is sent
    /// whole, until it comes back within half of it, so a 10° nod reads 10°, not 2°.
    private mutating func fromUsual(_ k: Int, _ value: Float, _ deadZone: Float, spread: Bool = true, gated: Bool = false,
                                    at time: Double) -> Float {
        poseHistory[k].seconds = poseBaselineSeconds
        poseHistory[k].add(value, at: time)
        var zone = deadZone
        if spread, let deviation = poseHistory[k].medianAbsoluteDeviation() {
            zone = max(deadZone, min(poseSpreadFactor * deviation, poseSpreadDeadZoneLimit))
        }
        let departure = value - (poseHistory[k].value(at: 0.5) ?? value)
        guard gated else { return shrink(departure, zone) }
        poseGateOpen[k] = abs(departure) > (poseGateOpen[k] ? zone / 2 : zone)
        return poseGateOpen[k] ? departure : 0
    }

    private func shrink(_ v: Float, _ d: Float) -> Float { v > d ? v - d : (v < -d ? v + d : 0) }
}
