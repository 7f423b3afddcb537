import Foundation

/// A privacy stage between `ExpressionEstimator` and the wire: it makes the stream say less about
/// *which face* produced it while keeping what the face does.
///
/// The estimator's output depends on the face as well as on the movement: the same jaw drop reads
/// 1.7–4.7× differently on different faces, one side of the face responds more than the other,
/// head pitch and roll wobble with speech on some faces, and the pupils of some faces seem to move
/// when the eyes do not (docs/privacy.md, re-identification experiment). This stage, causal (it
/// uses only past frames), removes part of that:
///
/// - **Symmetry**: each left/right pair of coefficients (blink, squint, wide, smile, frown,
///   dimple, stretch, brows, cheeks, sneer) is replaced by the mean of the two. Winks and
///   one-sided smiles are lost.
/// - **Per-person gain**: every coefficient is scaled so that its running peak (the largest value
///   seen, forgotten with a time constant of `peakSeconds`) maps to `target`. The gain is kept in
///   `minGain…maxGain` and the peak is floored at `peakFloor`, so that a channel that barely moves
///   (noise, cross-talk) is not amplified by more than `target / peakFloor`.
/// - **Head pitch and roll dead zone**: `poseDeadZone` degrees are taken off their magnitude
///   (soft threshold): small nods and tilts, mostly tracker coupling with speech, read 0.
/// - **Gaze dead zone**: `gazeDeadZone` is taken off each gaze axis and the rest rescaled to
///   reach ±1; `eyeLook*` follow the result.
///
/// At rest everything stays 0, so two people at rest still send the same frame.
///
/// Off unless asked for (`ExpressionCapture(privacy:)`, `veil call --privacy-filter`): it costs
/// winks, one-sided expressions and absolute intensity, and in the experiment it lowers
/// re-identification from 68 % to 58 % (chance: 20 %), so it does not make the stream anonymous.
public struct ExpressionPrivacyFilter: Sendable {
    /// What each coefficient's running peak is mapped to.
    public var target: Float = 0.6
    /// Time constant (s) with which a peak is forgotten.
    public var peakSeconds: Double = 5
    /// The smallest peak a gain is computed from, so that quiet channels are not blown up.
    public var peakFloor: Float = 0.3
    /// The range the per-coefficient gain is kept in.
    public var minGain: Float = 0.25
    /// See `minGain`.
    public var maxGain: Float = 2
    /// Degrees taken off the magnitude of head pitch and roll.
    public var poseDeadZone: Float = 2
    /// Taken off each gaze axis before rescaling to ±1.
    public var gazeDeadZone: Float = 0.3
    /// Whether left/right pairs are replaced by their mean.
    public var symmetric = true

    /// Running peak per coefficient; starts at `target` (gain 1) on the first frame.
    private var peaks: [Float] = []
    private var lastTime: Double?

    /// A filter with the default settings above.
    public init() {}

    /// Forgets the learnt peaks (a new person, or a recalibration).
    public mutating func reset() {
        peaks = []
        lastTime = nil
    }

    /// Left/right pairs averaged by the symmetry step (gaze-driven `eyeLook*` excluded, and
    /// mouthLeft/mouthRight, which are a sideways shift, not a pair of sides).
    static let pairs: [(BlendShape, BlendShape)] = BlendShape.allCases.compactMap { shape in
        guard shape.name.hasSuffix("Left"), !shape.name.hasPrefix("eyeLook"), shape != .mouthLeft else { return nil }
        let other = String(shape.name.dropLast(4)) + "Right"
        return BlendShape.allCases.first { $0.name == other }.map { (shape, $0) }
    }

    static let gazeShapes: Set<BlendShape> = [.eyeLookOutLeft, .eyeLookInLeft, .eyeLookInRight, .eyeLookOutRight,
                                              .eyeLookUpLeft, .eyeLookUpRight, .eyeLookDownLeft, .eyeLookDownRight]

    /// The expression to transmit for `e`, estimated at `timeSeconds`.
    public mutating func apply(_ e: Expression, at timeSeconds: Double) -> Expression {
        let dt = lastTime.map { min(max(timeSeconds - $0, 0), 0.5) } ?? 1.0 / 30
        lastTime = timeSeconds
        let decay = Float(exp(-dt / peakSeconds))
        if peaks.isEmpty { peaks = [Float](repeating: target, count: BlendShape.allCases.count) }
        var x = e.coefficients
        if symmetric {
            for (l, r) in Self.pairs {
                let m = (x[l.rawValue] + x[r.rawValue]) / 2
                x[l.rawValue] = m; x[r.rawValue] = m
            }
        }
        var out = e
        for shape in BlendShape.allCases where !Self.gazeShapes.contains(shape) {
            let k = shape.rawValue
            peaks[k] = max(x[k], peaks[k] * decay)
            let gain = min(max(target / max(peaks[k], peakFloor), minGain), maxGain)
            out[shape] = x[k] * gain
        }
        func shrink(_ v: Float, _ d: Float) -> Float { v > d ? v - d : (v < -d ? v + d : 0) }
        out.headPose = HeadPose(yaw: e.headPose.yaw, pitch: shrink(e.headPose.pitch, poseDeadZone),
                                roll: shrink(e.headPose.roll, poseDeadZone))
        if let g = e.gaze {
            let scale = 1 / max(1 - gazeDeadZone, 1e-3)
            let q = Gaze(x: clamp(shrink(g.x, gazeDeadZone) * scale, -1, 1), y: clamp(shrink(g.y, gazeDeadZone) * scale, -1, 1))
            out.gaze = q
            out[.eyeLookOutLeft] = max(q.x, 0); out[.eyeLookInLeft] = max(-q.x, 0)
            out[.eyeLookInRight] = max(q.x, 0); out[.eyeLookOutRight] = max(-q.x, 0)
            out[.eyeLookUpLeft] = max(q.y, 0); out[.eyeLookUpRight] = max(q.y, 0)
            out[.eyeLookDownLeft] = max(-q.y, 0); out[.eyeLookDownRight] = max(-q.y, 0)
        }
        return out
    }
}
