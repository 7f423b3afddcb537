// The receiving side of the expression stream: frames arrive over an unordered, unreliable data
// channel and are drawn at the moment their audio is heard. docs/lip-sync.md states the contract
// this buffer keeps and how the call layer feeds it.

/// A jitter buffer for one peer's `ExpressionFrame`s that answers "what should the avatar show for
/// the moment being heard now?".
///
/// A pure value type: it never reads a clock and does no I/O. Frames go in with `insert(_:arrivalTimeMicros:)`
/// in whatever order the network delivers them (duplicated, reordered, lost, late, sequence numbers
/// wrapping at `UInt32.max`); the picture comes out of `expression(atPlayoutOf:)` when the peer's
/// audio is playing, or `expression(atLocalTime:)` when it is not.
///
/// **Times.** Two clocks meet here. *Sender media time* is the peer's capture clock, the one its
/// audio is timestamped with: `ExpressionFrame.captureTimeMicros` and the argument of
/// `expression(atPlayoutOf:)`. It is compared modulo 2^48 µs, like the wire format sends it, so a
/// sender clock that wraps is followed. *Local time* is this device's monotonic clock in
/// microseconds (e.g. `g_get_monotonic_time()`): `arrivalTimeMicros` and the argument of
/// `expression(atLocalTime:)`. The two are never compared directly, only through their difference.
///
/// **What is drawn at sender media time `t`** (`earlier` = newest frame at or before `t`, `later` =
/// oldest frame after it):
/// - a frame at exactly `t` is drawn as it is;
/// - between two tracked frames at most `maximumInterpolationGapMicros` apart, coefficients, head
///   pose and gaze (when both have one) are interpolated linearly — across lost sequence numbers too;
/// - otherwise `earlier` is held for `holdLimitMicros`, then eased to neutral over
///   `fadeToNeutralMicros`; as `t` approaches a `later` frame the picture eases into it over
///   `reentryEaseMicros` (`lostEaseMicros` when `later` says the face was lost);
/// - a `lost` frame means "no face": it counts as the neutral expression, reached by the time of the
///   lost frame.
///
/// Rendered time never goes back (small steps back are clamped), and frames captured before it are
/// dropped on arrival as late: a backlog that arrives after a network stall is skipped, never
/// replayed. A step back of more than `discontinuityMicros` is taken as a restarted stream.
/// Memory is bounded by `capacity` frames and `jitterWindowMaximumSamples` delay samples.
public struct ExpressionJitterBuffer: Sendable {

    // MARK: Configuration

    /// Tuning of an `ExpressionJitterBuffer`. Values that make no sense are repaired when the buffer
    /// is created (see `init(configuration:)`).
    public struct Configuration: Equatable, Sendable {
        /// Most frames kept; when exceeded the oldest are dropped. 64 is about 2 s at 30 fps.
        public var capacity: Int
        /// How long the last frame is held when the next one is missing, before easing to neutral.
        public var holdLimitMicros: UInt64
        /// How long the ease from a held frame to neutral takes once the hold limit has passed.
        public var fadeToNeutralMicros: UInt64
        /// How long before a `lost` frame the face starts easing to neutral (at most the gap to it).
        public var lostEaseMicros: UInt64
        /// How long before a frame that follows a long gap (or no face) the picture starts easing into
        /// it (at most the gap to it).
        public var reentryEaseMicros: UInt64
        /// Largest gap between two tracked frames that is bridged by linear interpolation.
        public var maximumInterpolationGapMicros: UInt64
        /// Lower clamp of the adaptive playout delay used by `expression(atLocalTime:)`.
        public var minimumDelayMicros: UInt64
        /// Upper clamp of the adaptive playout delay used by `expression(atLocalTime:)`.
        public var maximumDelayMicros: UInt64
        /// Percentile (0…1] of the arrival-delay deviation that the adaptive delay covers.
        public var delayPercentile: Double
        /// The adaptive delay looks at frames that arrived within this long of the newest one.
        public var jitterWindowMicros: UInt64
        /// Most arrival samples kept for the adaptive delay, whatever the window.
        public var jitterWindowMaximumSamples: Int
        /// How fast the applied delay follows its target, as a fraction of elapsed time: 0.1 plays
        /// between 0.9× and 1.1× speed while adapting. Changes larger than `maximumDelayMicros` jump.
        public var delayAdaptationRate: Double
        /// A jump of sender media time (or of the arrival/capture offset) larger than this is taken as
        /// a restarted stream rather than as late data.
        public var discontinuityMicros: UInt64

        /// The defaults: 64 frames, hold 500 ms then fade 250 ms, lost ease 100 ms, re-entry ease
        /// 150 ms, interpolation across gaps up to 500 ms, adaptive delay = 95th percentile of the
        /// deviation plus one frame interval, clamped to 40…200 ms, over a 3 s window.
        public init(capacity: Int = 64,
                    holdLimitMicros: UInt64 = 500_000,
                    fadeToNeutralMicros: UInt64 = 250_000,
                    lostEaseMicros: UInt64 = 100_000,
                    reentryEaseMicros: UInt64 = 150_000,
                    maximumInterpolationGapMicros: UInt64 = 500_000,
                    minimumDelayMicros: UInt64 = 40_000,
                    maximumDelayMicros: UInt64 = 200_000,
                    delayPercentile: Double = 0.95,
                    jitterWindowMicros: UInt64 = 3_000_000,
                    jitterWindowMaximumSamples: Int = 256,
                    delayAdaptationRate: Double = 0.1,
                    discontinuityMicros: UInt64 = 2_000_000) {
            self.capacity = capacity
            self.holdLimitMicros = holdLimitMicros
            self.fadeToNeutralMicros = fadeToNeutralMicros
            self.lostEaseMicros = lostEaseMicros
            self.reentryEaseMicros = reentryEaseMicros
            self.maximumInterpolationGapMicros = maximumInterpolationGapMicros
            self.minimumDelayMicros = minimumDelayMicros
            self.maximumDelayMicros = maximumDelayMicros
            self.delayPercentile = delayPercentile
            self.jitterWindowMicros = jitterWindowMicros
            self.jitterWindowMaximumSamples = jitterWindowMaximumSamples
            self.delayAdaptationRate = delayAdaptationRate
            self.discontinuityMicros = discontinuityMicros
        }

        /// The same configuration with nonsense replaced: capacity at least 2, sample count at least
        /// 8, a maximum delay not below the minimum, percentile and adaptation rate in (0, 1], and
        /// times kept below 2^46 µs so that sums cannot overflow.
        var repaired: Configuration {
            let limit: UInt64 = 1 << 46
            var c = self
            c.capacity = max(2, capacity)
            c.jitterWindowMaximumSamples = max(8, jitterWindowMaximumSamples)
            c.holdLimitMicros = min(holdLimitMicros, limit)
            c.fadeToNeutralMicros = min(fadeToNeutralMicros, limit)
            c.lostEaseMicros = min(lostEaseMicros, limit)
            c.reentryEaseMicros = min(reentryEaseMicros, limit)
            c.maximumInterpolationGapMicros = min(maximumInterpolationGapMicros, limit)
            c.minimumDelayMicros = min(minimumDelayMicros, limit)
            c.maximumDelayMicros = min(max(maximumDelayMicros, c.minimumDelayMicros), limit)
            c.delayPercentile = delayPercentile.isFinite ? min(max(delayPercentile, 0.01), 1) : 0.95
            c.delayAdaptationRate = delayAdaptationRate.isFinite && delayAdaptationRate > 0
                ? min(delayAdaptationRate, 1) : 0.1
            c.jitterWindowMicros = max(1, min(jitterWindowMicros, limit))
            c.discontinuityMicros = max(1, min(discontinuityMicros, limit))
            return c
        }
    }

    // MARK: Output types

    /// What happened to a frame handed to `insert(_:arrivalTimeMicros:)`.
    public enum InsertOutcome: Hashable, Sendable {
        /// Buffered for playout.
        case accepted
        /// Its sequence number was seen recently: dropped.
        case duplicate
        /// Captured before the time already rendered: dropped.
        case late
    }

    /// One of the frames a `Playout` was made from.
    public struct FrameReference: Equatable, Sendable {
        /// The frame's sequence number.
        public var sequence: UInt32
        /// The frame's capture time (sender media time, modulo 2^48).
        public var captureTimeMicros: UInt64
        /// The frame's share of the picture, 0…1 (the rest, if any, is neutral or the other frame).
        public var weight: Float
    }

    /// What the avatar should show for one moment, and how it was obtained.
    public struct Playout: Equatable, Sendable {
        /// How the expression was obtained.
        public enum Source: Equatable, Sendable {
            /// A frame captured at exactly this moment.
            case frame
            /// Linear interpolation between the frames before and after this moment.
            case interpolated
            /// The frame before this moment, unchanged, because nothing later has arrived (or the
            /// next frame is far away).
            case held
            /// An ease between a frame and neutral, or into the next frame after a gap.
            case easing
            /// Nothing to show: no frames, the sender has no face in view, or a hold that has run out.
            case neutral
        }

        /// The expression to draw (coefficients, head pose and gaze).
        public var expression: Expression
        /// How much of a face this is: 1 tracked, 0 neutral because nothing is known or the sender
        /// has no face in view; in between while easing. Renderers may use it to dim the avatar.
        public var faceWeight: Float
        /// Whether the dominant frame was derived from the sender's voice rather than a camera.
        public var isVoiceDriven: Bool
        /// How the expression was obtained.
        public var source: Source
        /// The sender media time this playout is for (modulo 2^48), after clamping: never earlier
        /// than the previous playout's, unless the stream restarted.
        public var mediaTimeMicros: UInt64
        /// The frame at or before `mediaTimeMicros` that contributed, if any.
        public var earlier: FrameReference?
        /// The frame after `mediaTimeMicros` that contributed, if any.
        public var later: FrameReference?
        /// The capture time the picture stands for: the weighted mean of the contributing frames'
        /// capture times (equal to `mediaTimeMicros` when interpolating), nil when no frame
        /// contributes. Lip-sync is measured with this time (see `LipSync`).
        public var sourceTimeMicros: UInt64?
    }

    /// Counters since the buffer was created, and the current delay.
    public struct Statistics: Equatable, Sendable {
        /// Every frame handed to `insert`, whatever became of it.
        public var framesReceived = 0
        /// Frames whose sequence number had been seen recently.
        public var duplicates = 0
        /// Frames dropped because they were captured before the time already rendered.
        public var lateDropped = 0
        /// Frames dropped because the buffer was full (the oldest go first).
        public var overflowDropped = 0
        /// Distinct gaps in the sequence numbers that were bridged by interpolation.
        public var gapsInterpolated = 0
        /// Frames held now.
        public var bufferedFrames = 0
        /// The playout delay the estimator asks for now (0 before any frame): what
        /// `expression(atLocalTime:)` converges to, and the audio latency that would make every
        /// frame arrive in time for its audio (see docs/lip-sync.md).
        public var targetDelayMicros: UInt64 = 0
        /// The playout delay `expression(atLocalTime:)` applies now, measured from the fastest
        /// recent arrival; equal to the target until that mode is used.
        public var currentDelayMicros: UInt64 = 0
    }

    // MARK: State

    /// The configuration in use (repaired).
    public let configuration: Configuration

    /// A frame on the unwrapped sender timeline.
    private struct Entry: Sendable {
        var frame: ExpressionFrame
        var time: UInt64
    }

    /// Buffered frames, sorted by unwrapped capture time (equal times in arrival order).
    private var entries: [Entry] = []
    /// The unwrapped sender media time rendered last; nothing before it is accepted.
    private var renderedUpTo: UInt64?
    /// Where the sender timeline was last seen, for unwrapping 48-bit times.
    private var timelineReference: UInt64?
    private var recentSequences: RecentSequences
    private var estimator: DelayEstimator
    /// Local time minus sender media time currently applied by `expression(atLocalTime:)`.
    private var appliedOffset: Int64?
    private var lastLocalRender: UInt64?
    private var lastCountedGap: UInt64?
    private var counters = Statistics()

    /// An empty buffer. The configuration is repaired: capacity at least 2, the maximum delay not
    /// below the minimum, percentile and adaptation rate in (0, 1], times below 2^46 µs.
    public init(configuration: Configuration = Configuration()) {
        let repaired = configuration.repaired
        self.configuration = repaired
        recentSequences = RecentSequences(capacity: 4 * repaired.capacity)
        estimator = DelayEstimator(configuration: repaired)
    }

    /// Counters and the current delay.
    public var statistics: Statistics {
        var s = counters
        s.bufferedFrames = entries.count
        if let target = estimator.target {
            s.targetDelayMicros = target.delay
            if let applied = appliedOffset {
                let (delay, overflow) = applied.subtractingReportingOverflow(target.base)
                s.currentDelayMicros = overflow || delay < 0 ? 0 : UInt64(delay)
            } else {
                s.currentDelayMicros = target.delay
            }
        }
        return s
    }

    // MARK: Input

    /// Adds a frame received from the peer at local time `arrivalTimeMicros`.
    ///
    /// Duplicates (a sequence number among the last `4 × capacity` seen) and frames captured
    /// before the time already rendered are dropped and counted; every other frame is kept, and
    /// when the buffer is full the oldest frame goes. Every non-duplicate frame, late ones
    /// included, feeds the adaptive delay estimate.
    @discardableResult
    public mutating func insert(_ frame: ExpressionFrame, arrivalTimeMicros: UInt64) -> InsertOutcome {
        counters.framesReceived += 1
        if recentSequences.contains(frame.sequence) {
            counters.duplicates += 1
            return .duplicate
        }
        recentSequences.insert(frame.sequence)
        let time = unwrap(frame.captureTimeMicros)
        estimator.add(arrival: arrivalTimeMicros, capture: time, sequence: frame.sequence)

        if let rendered = renderedUpTo, time < rendered {
            counters.lateDropped += 1
            return .late
        }
        if renderedUpTo == nil { timelineReference = time }
        let index = firstIndex(after: time)
        entries.insert(Entry(frame: frame, time: time), at: index)
        if entries.count > configuration.capacity {
            let excess = entries.count - configuration.capacity
            entries.removeFirst(excess)
            counters.overflowDropped += excess
        }
        return .accepted
    }

    /// Forgets every frame, the rendered time and the delay estimate (statistics are kept). Call it
    /// when the peer's stream starts over, e.g. on a new peer connection.
    public mutating func reset() {
        entries.removeAll()
        renderedUpTo = nil
        timelineReference = nil
        recentSequences.removeAll()
        estimator.removeAll()
        appliedOffset = nil
        lastLocalRender = nil
        lastCountedGap = nil
    }

    // MARK: Output

    /// What to draw while the peer's audio captured at `senderMediaTimeMicros` is being heard.
    ///
    /// The caller passes the sender media time of the audio at the output at the moment the picture
    /// will appear (docs/lip-sync.md: how to get it from the audio pipeline). A time earlier than
    /// the previous call's is clamped to it (a step back larger than `discontinuityMicros` restarts
    /// the stream instead). Frames before the returned moment's `earlier` frame are discarded.
    public mutating func expression(atPlayoutOf senderMediaTimeMicros: UInt64) -> Playout {
        render(at: unwrap(senderMediaTimeMicros))
    }

    /// What to draw at local time `localTimeMicros` when no audio of the peer is playing (muted
    /// peer, audio not flowing yet): frames are played out an adaptive delay after their expected
    /// arrival.
    ///
    /// The sender media time drawn is `localTime − (baseOffset + delay)`, where `baseOffset` is the
    /// smallest arrival-minus-capture time over the jitter window (the fastest recent path, clock
    /// offset included) and `delay` is the percentile of the arrival deviation above it plus one
    /// frame interval, clamped to `minimumDelayMicros…maximumDelayMicros`. The applied offset moves
    /// towards that target by at most `delayAdaptationRate` of the elapsed local time, so the
    /// playout never jumps or runs backwards while adapting; a change larger than
    /// `maximumDelayMicros` (a restarted stream, a long stall) is applied at once. Returns neutral
    /// before the first frame.
    public mutating func expression(atLocalTime localTimeMicros: UInt64) -> Playout {
        guard let target = estimator.target else {
            return Playout(expression: .neutral, faceWeight: 0, isVoiceDriven: false, source: .neutral,
                           mediaTimeMicros: (renderedUpTo ?? 0) & Self.timeMask,
                           earlier: nil, later: nil, sourceTimeMicros: nil)
        }
        let (targetOffset, overflowed) = target.base.addingReportingOverflow(Int64(target.delay))
        if overflowed { return render(at: renderedUpTo ?? 0) }
        var applied = targetOffset
        if let current = appliedOffset, let last = lastLocalRender {
            let difference = targetOffset - current
            if difference.magnitude <= configuration.maximumDelayMicros {
                let elapsed = localTimeMicros > last ? localTimeMicros - last : 0
                let step = Int64(min(Double(elapsed) * configuration.delayAdaptationRate, Double(1 << 46)))
                applied = current + min(max(difference, -step), step)
            }
        }
        appliedOffset = applied
        lastLocalRender = localTimeMicros
        let local = Int64(bitPattern: localTimeMicros)
        let (media, overflow) = local.subtractingReportingOverflow(applied)
        return render(at: overflow || media < 0 ? 0 : UInt64(media))
    }

    // MARK: Playout

    private mutating func render(at requested: UInt64) -> Playout {
        var time = requested
        if let rendered = renderedUpTo, requested < rendered {
            if rendered - requested > configuration.discontinuityMicros {
                restartTimeline(at: requested)
            } else {
                time = rendered
            }
        }
        let upper = firstIndex(after: time)
        let earlier = upper > 0 ? entries[upper - 1] : nil
        let later = upper < entries.count ? entries[upper] : nil
        let playout = compose(earlier: earlier, later: later, at: time)

        renderedUpTo = time
        timelineReference = time
        if upper > 1 { entries.removeFirst(upper - 1) }
        return playout
    }

    /// The sender's clock went back a long way: the stream restarted. Frames far ahead of the new
    /// time belong to the old stream.
    private mutating func restartTimeline(at time: UInt64) {
        let horizon = time + configuration.discontinuityMicros
        entries.removeAll { $0.time > horizon }
        renderedUpTo = nil
        recentSequences.removeAll()
        lastCountedGap = nil
    }

    private mutating func compose(earlier: Entry?, later: Entry?, at time: UInt64) -> Playout {
        let c = configuration
        let masked = time & Self.timeMask

        // Exactly on a frame.
        if let p = earlier, p.time == time {
            return Playout(expression: p.frame.expression, faceWeight: Self.face(p), isVoiceDriven: p.frame.isVoiceDriven,
                           source: .frame, mediaTimeMicros: masked,
                           earlier: Self.reference(p, weight: 1), later: nil, sourceTimeMicros: masked)
        }

        // Between two tracked frames close enough to bridge.
        if let p = earlier, let n = later, p.frame.state == .tracked, n.frame.state == .tracked,
           n.time - p.time <= c.maximumInterpolationGapMicros {
            let w = Float(Double(time - p.time) / Double(n.time - p.time))
            if Int32(bitPattern: n.frame.sequence &- p.frame.sequence) > 1 {
                let gap = UInt64(p.frame.sequence) << 32 | UInt64(n.frame.sequence)
                if lastCountedGap != gap {
                    lastCountedGap = gap
                    counters.gapsInterpolated += 1
                }
            }
            return Playout(expression: Self.blend(p.frame.expression, n.frame.expression, w, centreMissingGaze: false),
                           faceWeight: 1, isVoiceDriven: w < 0.5 ? p.frame.isVoiceDriven : n.frame.isVoiceDriven,
                           source: .interpolated, mediaTimeMicros: masked,
                           earlier: Self.reference(p, weight: 1 - w), later: Self.reference(n, weight: w),
                           sourceTimeMicros: masked)
        }

        // Hold the earlier frame (easing to neutral after the hold limit), ease into the later one.
        var held = Expression.neutral
        var heldFace: Float = 0
        var keep: Double = 0
        if let p = earlier {
            let age = time - p.time
            if age <= c.holdLimitMicros {
                keep = 1
            } else if c.fadeToNeutralMicros > 0 {
                keep = max(0, 1 - Double(age - c.holdLimitMicros) / Double(c.fadeToNeutralMicros))
            }
            held = Self.blend(.neutral, p.frame.expression, Float(keep), centreMissingGaze: true)
            heldFace = Self.face(p) * Float(keep)
        }
        var approach: Double = 0
        if let n = later {
            let span = n.frame.state == .lost ? c.lostEaseMicros : c.reentryEaseMicros
            let window = min(span, earlier.map { n.time - $0.time } ?? span)
            let remaining = n.time - time
            if window > 0, remaining < window {
                approach = 1 - Double(remaining) / Double(window)
            }
        }
        let w = Float(approach)
        let expression = later.map { Self.blend(held, $0.frame.expression, w, centreMissingGaze: true) } ?? held
        let faceWeight = heldFace * (1 - w) + (later.map(Self.face) ?? 0) * w

        let earlierWeight = Float(keep) * (1 - w)
        let source: Playout.Source
        if faceWeight == 0 {
            source = .neutral
        } else if approach == 0, keep == 1 {
            source = .held
        } else {
            source = .easing
        }
        var sourceTime: UInt64?
        switch (earlier, later) {
        case let (p?, n?) where earlierWeight + w > 0:
            let fraction = Double(w) / Double(earlierWeight + w)
            sourceTime = p.time + UInt64((Double(n.time - p.time) * fraction).rounded())
        case let (p?, _) where earlierWeight > 0:
            sourceTime = p.time
        case let (_, n?) where w > 0:
            sourceTime = n.time
        default:
            sourceTime = nil
        }
        let voice: Bool
        if let n = later, w > earlierWeight { voice = n.frame.isVoiceDriven } else { voice = earlier?.frame.isVoiceDriven ?? false }
        return Playout(expression: expression, faceWeight: faceWeight, isVoiceDriven: voice, source: source,
                       mediaTimeMicros: masked,
                       earlier: earlier.flatMap { earlierWeight > 0 ? Self.reference($0, weight: earlierWeight) : nil },
                       later: later.flatMap { w > 0 ? Self.reference($0, weight: w) : nil },
                       sourceTimeMicros: sourceTime.map { $0 & Self.timeMask })
    }

    // MARK: Helpers

    /// Sender media times travel modulo 2^48 (docs/wire-format.md).
    static let timeMask: UInt64 = (1 << 48) - 1

    /// Maps a 48-bit sender time onto an unbounded timeline: the value nearest to where the timeline
    /// was last seen. The timeline starts one period in, so that times before the first are positive.
    private func unwrap(_ value: UInt64) -> UInt64 {
        let low = value & Self.timeMask
        guard let reference = timelineReference else { return low + (1 << 48) }
        var difference = Int64(low) - Int64(reference & Self.timeMask)
        if difference >= 1 << 47 { difference -= 1 << 48 } else if difference < -(1 << 47) { difference += 1 << 48 }
        let unwrapped = Int64(bitPattern: reference) + difference
        return unwrapped > 0 ? UInt64(unwrapped) : 0
    }

    /// Index of the first entry captured after `time` (binary search).
    private func firstIndex(after time: UInt64) -> Int {
        var low = 0, high = entries.count
        while low < high {
            let mid = (low + high) / 2
            if entries[mid].time <= time { low = mid + 1 } else { high = mid }
        }
        return low
    }

    private static func face(_ entry: Entry) -> Float { entry.frame.state == .tracked ? 1 : 0 }

    private static func reference(_ entry: Entry, weight: Float) -> FrameReference {
        FrameReference(sequence: entry.frame.sequence, captureTimeMicros: entry.time & timeMask, weight: weight)
    }

    /// `a` moved a fraction `w` of the way to `b`: coefficients and angles linearly (angles along
    /// the shorter arc), gaze linearly when both have one. When only one has a gaze, it is kept up
    /// to the midpoint — or, when the other side is a neutral stand-in, eased from/to straight ahead.
    static func blend(_ a: Expression, _ b: Expression, _ w: Float, centreMissingGaze: Bool) -> Expression {
        if w <= 0 { return a }
        if w >= 1 { return b }
        var out = Expression(headPose: HeadPose(yaw: angle(a.headPose.yaw, b.headPose.yaw, w),
                                                pitch: angle(a.headPose.pitch, b.headPose.pitch, w),
                                                roll: angle(a.headPose.roll, b.headPose.roll, w)))
        for shape in BlendShape.allCases {
            out[shape] = a[shape] + (b[shape] - a[shape]) * w
        }
        let centre = Gaze(x: 0, y: 0)
        switch (a.gaze, b.gaze) {
        case let (ga?, gb?):
            out.gaze = Gaze(x: ga.x + (gb.x - ga.x) * w, y: ga.y + (gb.y - ga.y) * w)
        case let (ga?, nil):
            out.gaze = centreMissingGaze ? blendGaze(ga, centre, w) : (w < 0.5 ? ga : nil)
        case let (nil, gb?):
            out.gaze = centreMissingGaze ? blendGaze(centre, gb, w) : (w < 0.5 ? nil : gb)
        case (nil, nil):
            out.gaze = nil
        }
        return out
    }

    private static func blendGaze(_ a: Gaze, _ b: Gaze, _ w: Float) -> Gaze {
        Gaze(x: a.x + (b.x - a.x) * w, y: a.y + (b.y - a.y) * w)
    }

    /// Linear interpolation of degrees along the shorter way round, result in −180…180.
    private static func angle(_ a: Float, _ b: Float, _ w: Float) -> Float {
        var delta = b - a
        if delta > 180 { delta -= 360 } else if delta < -180 { delta += 360 }
        var value = a + delta * w
        if value > 180 { value -= 360 } else if value < -180 { value += 360 }
        return value
    }
}

// MARK: - Duplicate detection

/// The last `capacity` sequence numbers seen, for spotting duplicates in O(1).
private struct RecentSequences: Sendable {
    private var ring: [UInt32] = []
    private var next = 0
    private var members: [UInt32: Int] = [:]
    private let capacity: Int

    init(capacity: Int) { self.capacity = max(1, capacity) }

    func contains(_ sequence: UInt32) -> Bool { members[sequence] != nil }

    mutating func insert(_ sequence: UInt32) {
        if ring.count < capacity {
            ring.append(sequence)
        } else {
            let evicted = ring[next]
            if let count = members[evicted] {
                members[evicted] = count > 1 ? count - 1 : nil
            }
            ring[next] = sequence
            next = (next + 1) % capacity
        }
        members[sequence, default: 0] += 1
    }

    mutating func removeAll() {
        ring.removeAll()
        members.removeAll()
        next = 0
    }
}

// MARK: - Adaptive delay

/// Estimates the playout delay from arrival times (see `ExpressionJitterBuffer.expression(atLocalTime:)`
/// and docs/lip-sync.md).
///
/// Each frame gives an offset `arrival − capture` (local clock minus sender clock: the clocks'
/// difference plus this frame's network delay). Over a window of recent arrivals, `base` is the
/// smallest offset — the fastest path — and each frame's deviation is its offset minus `base`. The
/// target delay is the chosen percentile of the deviations (nearest rank) plus the sender's frame
/// interval — interpolating needs the frame *after* the moment drawn, which is captured up to one
/// interval later — clamped to the configured range. Offsets further than the discontinuity
/// threshold from `base` are ignored, unless three come in a row: then the sender's clock has
/// jumped and the window starts afresh.
private struct DelayEstimator: Sendable {
    private struct Sample: Sendable {
        var arrival: UInt64
        var offset: Int64
        var capture: UInt64
        var sequence: UInt32
    }

    private let configuration: ExpressionJitterBuffer.Configuration
    private var samples: [Sample] = []
    private var newestArrival: UInt64 = 0
    private var outliersInARow = 0
    /// The smallest offset in the window and the delay to add to it.
    private(set) var target: (base: Int64, delay: UInt64)?

    /// The assumed frame interval until two frames give a better one (30 fps).
    private static let defaultFrameInterval: UInt64 = 33_333
    private static let maximumFrameInterval: UInt64 = 100_000

    init(configuration: ExpressionJitterBuffer.Configuration) { self.configuration = configuration }

    mutating func removeAll() {
        samples.removeAll()
        outliersInARow = 0
        target = nil
        newestArrival = 0
    }

    mutating func add(arrival: UInt64, capture: UInt64, sequence: UInt32) {
        let offset = Int64(bitPattern: arrival &- capture)
        if let current = target {
            let (deviation, overflow) = offset.subtractingReportingOverflow(current.base)
            if overflow || deviation.magnitude > configuration.discontinuityMicros {
                outliersInARow += 1
                guard outliersInARow >= 3 else { return }
                samples.removeAll()
                newestArrival = 0
            }
        }
        outliersInARow = 0
        newestArrival = max(newestArrival, arrival)
        samples.append(Sample(arrival: arrival, offset: offset, capture: capture, sequence: sequence))
        let oldest = newestArrival > configuration.jitterWindowMicros ? newestArrival - configuration.jitterWindowMicros : 0
        var drop = max(0, samples.count - configuration.jitterWindowMaximumSamples)
        while drop < samples.count - 1, samples[drop].arrival < oldest { drop += 1 }
        if drop > 0 { samples.removeFirst(drop) }
        recompute()
    }

    private mutating func recompute() {
        guard let first = samples.first else { target = nil; return }
        var base = first.offset
        var earliest = first, latest = first
        for s in samples {
            base = min(base, s.offset)
            if s.capture < earliest.capture { earliest = s }
            if s.capture > latest.capture { latest = s }
        }
        let deviations = samples.map { UInt64(clamping: $0.offset - base) }.sorted()
        let rank = Int((Double(deviations.count) * configuration.delayPercentile).rounded(.up))
        let percentile = deviations[min(max(rank, 1), deviations.count) - 1]

        var interval = Self.defaultFrameInterval
        let frames = Int64(Int32(bitPattern: latest.sequence &- earliest.sequence))
        if frames > 0, latest.capture > earliest.capture {
            interval = min((latest.capture - earliest.capture) / UInt64(frames), Self.maximumFrameInterval)
        }
        let wanted = percentile.addingReportingOverflow(interval)
        let delay = min(max(wanted.overflow ? configuration.maximumDelayMicros : wanted.partialValue,
                            configuration.minimumDelayMicros), configuration.maximumDelayMicros)
        target = (base, delay)
    }
}

// MARK: - Lip-sync

/// The lip-sync acceptance window and how offsets are measured (docs/lip-sync.md).
///
/// Offsets are *audio lead*: positive when the sound is heard before the picture that belongs to it
/// (the picture is late), negative when the picture comes first. ITU-R BT.1359 finds audio leading
/// by more than 45 ms or lagging by more than 125 ms detectable; Veil keeps every rendered frame
/// inside that window.
public enum LipSync {
    /// The most the audio may lead the picture: 45 ms.
    public static let maximumAudioLeadMicros: Int64 = 45_000
    /// The most the audio may lag the picture: 125 ms.
    public static let maximumAudioLagMicros: Int64 = 125_000

    /// The offset of one rendered frame, as the call layer measures it: the local time the frame was
    /// shown minus the local time the audio with the same sender media time was (or will be) played.
    public static func audioLeadMicros(renderTimeMicros: UInt64, audioPlayoutTimeMicros: UInt64) -> Int64 {
        Int64(bitPattern: renderTimeMicros &- audioPlayoutTimeMicros)
    }

    /// The same offset in sender media time: the media time of the audio heard when the frame is
    /// shown minus the capture time the frame stands for (`Playout.sourceTimeMicros`). Both are
    /// compared modulo 2^48 like the wire format's times.
    public static func audioLeadMicros(audioMediaTimeMicros: UInt64, sourceTimeMicros: UInt64) -> Int64 {
        let difference = (audioMediaTimeMicros &- sourceTimeMicros) & ExpressionJitterBuffer.timeMask
        return difference >= 1 << 47 ? Int64(difference) - (1 << 48) : Int64(difference)
    }

    /// Whether `audioLeadMicros` lies within −125…+45 ms.
    public static func isAcceptable(audioLeadMicros: Int64) -> Bool {
        audioLeadMicros >= -maximumAudioLagMicros && audioLeadMicros <= maximumAudioLeadMicros
    }
}
