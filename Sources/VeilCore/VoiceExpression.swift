import Foundation

/// An avatar expression made from a person's voice alone, for a participant without a camera or
/// whose face has been out of view for a while: the mouth opens with speech energy, the eyes blink
/// at natural random intervals, the head moves a little, and the brows lift on emphasis.
///
/// Feed it the speech level (RMS of a short window of the outgoing audio, samples in -1…1) with
/// the window's time, and it returns the expression for that moment. It is deterministic: the same
/// levels at the same times with the same seed give the same expressions, here and in the
/// browser's `web/voice.js` (the algorithm is specified in docs/expression.md, "Voice-driven
/// expressions", precisely enough for both to agree). Frames made from it are sent with
/// `ExpressionFrame.isVoiceDriven` set.
///
/// A pure value type: it never reads a clock. Times only need to be increasing; steps back are
/// treated as no time passing, and steps longer than half a second as half a second.
public struct VoiceExpressionGenerator: Sendable {
    /// The largest jawOpen speech produces (a fully open jaw reads as a shout).
    public static let maximumJawOpen = 0.6
    /// Blinks start 2–6 s apart (uniformly) and last this long (s).
    public static let blinkDuration = 0.15
    /// Idle head motion amplitudes in degrees (yaw, pitch, roll); the pitch also lifts with emphasis.
    public static let headAmplitude = (yaw: 3.0, pitch: 2.0, roll: 1.5)

    private var random: SplitMix64
    private var started = false
    private var startTime = 0.0
    private var lastTime = 0.0
    /// Noise floor and recent peak of the level (dBFS): the auto-gain.
    private var floor = -50.0
    private var peak = -20.0
    /// Smoothed speech activity (0…1): the mouth.
    private var envelope = 0.0
    /// Slow average of the activity, and the smoothed emphasis above it (the brows).
    private var average = 0.0
    private var brow = 0.0
    /// The blinks, in seconds after the first update.
    private var blinks = BlinkSchedule()
    /// Per axis (yaw, pitch, roll): two sines, frequency (Hz) and phase (rad) each.
    private var head: [(f1: Double, p1: Double, f2: Double, p2: Double)] = []
    private var funnelPhase = 0.0

    /// A generator whose blinks and head motion follow `seed`.
    public init(seed: UInt64) {
        random = SplitMix64(seed: seed)
    }

    private static func approach(_ value: Double, _ target: Double, _ dt: Double, _ tau: Double) -> Double {
        value + (target - value) * (1 - exp(-dt / tau))
    }

    private static func smoothstep(_ x: Double) -> Double {
        let c = min(max(x, 0), 1)
        return c * c * (3 - 2 * c)
    }

    /// How closed the eyes are `p` seconds into a blink: shut over 50 ms, held 40 ms, open over 60 ms.
    static func blinkShape(_ p: Double) -> Double {
        if p < 0 || p >= blinkDuration { return 0 }
        if p < 0.05 { return smoothstep(p / 0.05) }
        if p < 0.09 { return 1 }
        return smoothstep((blinkDuration - p) / 0.06)
    }

    /// The expression at `time` (seconds, any origin) given the speech `level` there: the RMS of the
    /// audio around that time, samples in -1…1 (0 for silence; about 0.1 for ordinary speech).
    /// `muted`: the audio at `time` was muted. The mouth is then closed at once, not eased shut as
    /// in a pause, and the auto-gain does not learn the muted silence as the room's noise floor.
    public mutating func update(level: Double, at time: Double, muted: Bool = false) -> Expression {
        if !started {
            started = true
            startTime = time
            lastTime = time
            for _ in 0..<3 {
                let f1 = 0.05 + 0.10 * random.unit(), p1 = 2 * Double.pi * random.unit()
                let f2 = 0.13 + 0.12 * random.unit(), p2 = 2 * Double.pi * random.unit()
                head.append((f1, p1, f2, p2))
            }
            funnelPhase = 2 * Double.pi * random.unit()
            blinks.begin(at: 0, using: &random)
        }
        let dt = min(max(time - lastTime, 0), 0.5)
        lastTime = max(time, lastTime)
        let t = lastTime - startTime

        // Auto-gain: speech is judged against the noise floor (falls fast, rises slowly) and the
        // recent peak (rises fast, falls slowly), so quiet and loud microphones both work.
        var activity = 0.0
        if muted {
            envelope = 0
        } else {
            let safeLevel = level.isFinite ? level : 0
            let db = 20 * log10(max(abs(safeLevel), 1e-5))
            floor = Self.approach(floor, db, dt, db < floor ? 0.3 : 6)
            floor = max(floor, -90)
            peak = Self.approach(peak, db, dt, db > peak ? 0.05 : 3)
            // Speech is read over the 24 dB below the peak, and not within 6 dB of the floor.
            let low = max(floor + 6, peak - 24)
            activity = min(max((db - low) / max(peak - low, 12), 0), 1)
            if db < -70 { activity = 0 }
            // The mouth opens quickly and closes a little more slowly, like a jaw.
            envelope = Self.approach(envelope, activity, dt, activity > envelope ? 0.03 : 0.09)
        }
        // Emphasis: activity well above its slow average lifts the brows.
        average = Self.approach(average, activity, dt, 1.5)
        let emphasis = min(max((activity - average - 0.35) / 0.3, 0), 1)
        brow = Self.approach(brow, emphasis, dt, emphasis > brow ? 0.08 : 0.4)

        // Blinks: the schedule moves on once a blink is over.
        let blink = blinks.lids(at: t, using: &random)

        func sway(_ axis: Int) -> Double {
            let a = head[axis]
            return 0.6 * sin(2 * .pi * a.f1 * t + a.p1) + 0.4 * sin(2 * .pi * a.f2 * t + a.p2)
        }
        var expression = Expression(headPose: HeadPose(yaw: Float(Self.headAmplitude.yaw * sway(0)),
                                                       pitch: Float(Self.headAmplitude.pitch * sway(1) + 1.5 * brow),
                                                       roll: Float(Self.headAmplitude.roll * sway(2))))
        expression[.jawOpen] = Float(Self.maximumJawOpen * envelope)
        expression[.mouthFunnel] = Float(0.25 * envelope * (0.5 + 0.5 * sin(2 * .pi * 0.9 * t + funnelPhase)))
        expression[.eyeBlinkLeft] = Float(blink)
        expression[.eyeBlinkRight] = Float(blink)
        expression[.browInnerUp] = Float(0.4 * brow)
        expression[.browOuterUpLeft] = Float(0.3 * brow)
        expression[.browOuterUpRight] = Float(0.3 * brow)
        return expression
    }
}

extension VoiceExpressionGenerator {
    /// A seed made from `name` (FNV-1a): the same person blinks and sways the same way every call.
    public static func seed(for name: String) -> UInt64 {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in name.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0100_0000_01B3
        }
        return hash
    }
}

/// The speech level of a stretch of outgoing audio: what `VoiceExpressionGenerator` is fed.
public struct AudioLevel: Sendable, Equatable {
    /// The middle of the measured window, on the sender's media clock (µs): the clock
    /// `ExpressionFrame.captureTimeMicros` uses.
    public var timeMicros: UInt64
    /// Root mean square of the window's samples (-1…1 full scale).
    public var rms: Double
    /// The window's length (µs).
    public var durationMicros: UInt64
    /// The window was muted before it was sent (its `rms` is then 0).
    public var muted: Bool

    /// A level; see the properties.
    public init(timeMicros: UInt64, rms: Double, durationMicros: UInt64, muted: Bool = false) {
        self.timeMicros = timeMicros
        self.rms = muted ? 0 : rms
        self.durationMicros = durationMicros
        self.muted = muted
    }

    /// The level of 16-bit samples (0 when `muted`: they are not sent).
    public init(samples: UnsafeBufferPointer<Int16>, timeMicros: UInt64, sampleRate: Int, muted: Bool = false) {
        var sum = 0.0
        if !muted { for sample in samples { sum += Double(sample) * Double(sample) } }
        let rms = samples.isEmpty ? 0 : (sum / Double(samples.count)).squareRoot() / 32768
        self.init(timeMicros: timeMicros, rms: rms,
                  durationMicros: UInt64(samples.count) * 1_000_000 / UInt64(max(sampleRate, 1)), muted: muted)
    }
}

/// Blinks at natural random intervals, as the voice-driven avatar and the strict privacy level's
/// avatar make them: the first 0.8–3.3 s after the start, then one 2–6 s after another (uniformly),
/// each shaped as `VoiceExpressionGenerator.blinkShape`.
struct BlinkSchedule: Sendable {
    /// Start of the next (or current) blink (s).
    private var start = 0.0

    /// Draws the first blink's start after `origin`.
    mutating func begin(at origin: Double, using random: inout SplitMix64) { start = origin + 0.8 + 2.5 * random.unit() }

    /// How closed the eyes are at `time` (0…1); the schedule moves on once a blink is over.
    mutating func lids(at time: Double, using random: inout SplitMix64) -> Double {
        while time - start >= VoiceExpressionGenerator.blinkDuration { start += 2 + 4 * random.unit() }
        return VoiceExpressionGenerator.blinkShape(time - start)
    }
}
