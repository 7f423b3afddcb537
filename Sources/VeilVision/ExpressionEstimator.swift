import Foundation
import VeilCore

/// Turns a stream of `FaceLandmarks` into identity-free `Expression`s.
///
/// Every coefficient is a deviation from the person's own neutral face, so that a resting face
/// reads near zero whatever its shape: the neutral is calibrated automatically over the first
/// `calibrationFrames` tracked frames (medians, and a low percentile for the mouth, which is
/// closed at rest but may be talking), and can be reset at any time. Outputs pass through
/// One-Euro filters: steady at rest, quick for blinks and speech.
///
/// The mouth corners sink as the lips part, by a different fraction on every face: that part of
/// their movement is learnt per person (`LipGapCoupling`) and taken out before smile, frown and
/// stretch are read, so that talking reads as neither, and the same speech gives the same smile
/// readings on different faces.
///
/// Head pose is reported relative to the person's resting pose over the same window, so that
/// looking at the screen (wherever the camera sits) faces the viewer, and a habitual tilt of the
/// head does not travel.
///
/// Gains map physical movement to ARKit's 0…1 range; lengths are in inter-eye distances (IOD,
/// between the eye centres, ≈ 63 mm on an adult). For example `jawOpen` reaches 1 when the lips
/// part by `Gains.jawOpen` IOD more than at rest.
public struct ExpressionEstimator: Sendable {
    /// Movement (in IOD, or as a ratio where noted) that drives a coefficient to 1.
    /// How far each measurement moves for a coefficient of 1 (`ExpressionGains`, in VeilCore, where
    /// the privacy filter reads the smile and frown gains too).
    public typealias Gains = ExpressionGains

    public var gains = Gains()
    /// Tracked frames used to learn the neutral face.
    public let calibrationFrames: Int
    /// Whether the neutral face has been learnt.
    public var isCalibrated: Bool { samples.count >= calibrationFrames }

    private var samples: [[Float]] = []
    private var poseSamples: [[Float]] = []
    private var poseNeutral: [Float] = [0, 0, 0]
    private var neutral: [Float]?
    private var coefficientFilters: OneEuroFilterBank
    private var poseFilters: OneEuroFilterBank
    private var gazeFilters: OneEuroFilterBank
    private var lastTime: Double?
    /// Lip gaps of the last `mouthRestSeconds`, for the closed mouth's level.
    private var recentLipGaps = SlidingPercentile(seconds: Self.mouthRestSeconds)
    /// The lowest of their 5th percentiles so far.
    private var lowestLipGap: Float?
    /// Seconds of lip gaps the closed mouth's level is taken from after calibration.
    private static let mouthRestSeconds: Double = 10
    /// The gaze last read with the eyes open enough to see the pupils.
    private var lastOpenGaze: Gaze?
    /// Blink reading (both eyes' mean) above which the pupils count as hidden.
    private let gazeHoldBlink: Float = 0.5
    private let poseCorrection: HeadPoseEstimator
    /// How this face's mouth corners move with its lip gap, taken out of smile, frown and stretch.
    private var lipGapCoupling = LipGapCoupling()
    private var lastMeasured: Double?

    /// - Parameters:
    ///   - calibrationFrames: tracked frames that learn the neutral face (≈ 1.5 s at 30 fps).
    ///   - smoothing: false turns the One-Euro filters off (raw per-frame estimates).
    public init(calibrationFrames: Int = 45, smoothing: Bool = true) {
        self.calibrationFrames = max(calibrationFrames, 1)
        let off = !smoothing
        coefficientFilters = OneEuroFilterBank(count: BlendShape.allCases.count, minCutoff: off ? 1e6 : 2.0, beta: off ? 0 : 8)
        poseFilters = OneEuroFilterBank(count: 3, minCutoff: off ? 1e6 : 1.0, beta: off ? 0 : 0.05)
        gazeFilters = OneEuroFilterBank(count: 2, minCutoff: off ? 1e6 : 1.5, beta: off ? 0 : 2)
        poseCorrection = HeadPoseEstimator()
    }

    /// Forgets the neutral face and the filters' state: the next frames calibrate anew.
    public mutating func resetCalibration() {
        samples = []; neutral = nil; poseSamples = []; poseNeutral = [0, 0, 0]; recentLipGaps.removeAll(); lowestLipGap = nil
        lipGapCoupling.reset(); lastMeasured = nil
        resetFilters()
    }

    /// Forgets the filters' state (after a tracking loss, so the avatar does not glide back).
    public mutating func resetFilters() {
        coefficientFilters.reset(); poseFilters.reset(); gazeFilters.reset(); lastTime = nil; lastOpenGaze = nil
    }

    /// The expression of `landmarks`, captured at `timeSeconds`. Nil when the landmarks lack the
    /// regions needed (eyes, lips, brows).
    public mutating func update(_ landmarks: FaceLandmarks, at timeSeconds: Double) -> VeilCore.Expression? {
        guard let m = FaceMeasurements(landmarks) else { return nil }
        let v = m.vector
        guard v.allSatisfy(\.isFinite) else { return nil }
        let pose = poseCorrection.pose(landmarks)
        if samples.count < calibrationFrames {
            samples.append(v)
            neutral = Self.neutral(of: samples)
            poseSamples.append([pose.yaw, pose.pitch, pose.roll])
            poseNeutral = Self.neutral(of: poseSamples, lowPercentile: [])
        }
        guard var n = neutral else { return nil }
        n[4] = restingLipGap(v[4], calibrated: n[4], at: timeSeconds)
        lipGapCoupling.add(gap: v[4], lift: (v[7] + v[8]) / 2, spread: (v[9] + v[10]) / 2,
                           dt: lastMeasured.map { timeSeconds - $0 } ?? 1.0 / 30)
        lastMeasured = timeSeconds
        // The corners as the lip gap does not explain them, against the same of the neutral face.
        let lift = lipGapCoupling.liftSlope, spread = lipGapCoupling.spreadSlope
        var measured = v
        for (k, slope) in [(7, lift), (8, lift), (9, spread), (10, spread)] {
            measured[k] -= slope * v[4]
            n[k] = Self.percentile(samples.map { $0[k] - slope * $0[4] }, 0.5)
        }
        var e = VeilCore.Expression()
        map(measured, neutral: n, into: &e)
        e.headPose = HeadPose(yaw: pose.yaw - poseNeutral[0], pitch: pose.pitch - poseNeutral[1], roll: pose.roll - poseNeutral[2])
        if m.pupilX != nil {
            var g = Gaze(x: clamp((v[16] - n[16]) / gains.gaze, -1, 1), y: clamp(-(v[17] - n[17]) / gains.gaze, -1, 1))
            // Behind closing lids the pupil cannot be seen: the gaze holds where it was.
            if (e[.eyeBlinkLeft] + e[.eyeBlinkRight]) / 2 > gazeHoldBlink {
                g = lastOpenGaze ?? Gaze(x: 0, y: 0)
            } else {
                lastOpenGaze = g
            }
            // In eyes only a few pixels wide the iris model cannot place the pupil (its error is a
            // good part of the eye): the gaze fades to straight ahead instead of sending noise.
            let resolved = FaceMeasurements.pupilResolution(m.eyeWidthPixels)
            g = Gaze(x: g.x * resolved, y: g.y * resolved)
            e.gaze = g
            e[.eyeLookOutLeft] = max(g.x, 0); e[.eyeLookInLeft] = max(-g.x, 0)
            e[.eyeLookInRight] = max(g.x, 0); e[.eyeLookOutRight] = max(-g.x, 0)
            e[.eyeLookUpLeft] = max(g.y, 0); e[.eyeLookUpRight] = max(g.y, 0)
            e[.eyeLookDownLeft] = max(-g.y, 0); e[.eyeLookDownRight] = max(-g.y, 0)
        }
        return smooth(e, at: timeSeconds)
    }

    /// The lip gap of the closed mouth. The calibration learns it while the person may be talking,
    /// and on some faces its low percentile is then still an open mouth: small openings would read
    /// as closed for the rest of the call. So it also goes down to the 5th percentile of the last
    /// `mouthRestSeconds` whenever that is lower (a percentile, so that a single misread frame does
    /// not count), and never up again: a mouth held open must not become the rest.
    private mutating func restingLipGap(_ gap: Float, calibrated: Float, at time: Double) -> Float {
        recentLipGaps.add(gap, at: time)
        if recentLipGaps.count >= 30, let low = recentLipGaps.value(at: 0.05) {
            lowestLipGap = min(lowestLipGap ?? low, low)
        }
        return min(calibrated, lowestLipGap ?? calibrated)
    }

    /// Medians of the calibration samples; the mouth's gap and the chin use the 20th percentile.
    static func neutral(of samples: [[Float]], lowPercentile: Set<Int> = [4, 11]) -> [Float] {
        guard let width = samples.first?.count else { return [] }
        return (0..<width).map { k in percentile(samples.map { $0[k] }, lowPercentile.contains(k) ? 0.2 : 0.5) }
    }

    /// The value at `fraction` (0…1) of `values`, nearest rank (0 when empty).
    static func percentile(_ values: [Float], _ fraction: Double) -> Float {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return 0 }
        return sorted[min(Int(Double(sorted.count - 1) * fraction + 0.5), sorted.count - 1)]
    }

    private func map(_ v: [Float], neutral n: [Float], into e: inout VeilCore.Expression) {
        let g = gains
        // Eyes: opening relative to the person's own.
        for (open, lid, blink, wide, squint) in [(0, 2, BlendShape.eyeBlinkLeft, BlendShape.eyeWideLeft, BlendShape.eyeSquintLeft),
                                                  (1, 3, .eyeBlinkRight, .eyeWideRight, .eyeSquintRight)] {
            let ratio = n[open] > 1e-4 ? v[open] / n[open] : 1
            e[blink] = (1 - ratio - 0.1) / g.blink
            e[wide] = (ratio - 1.05) / g.wide
            e[squint] = (n[lid] - v[lid]) / g.squint * (1 - e[blink])
        }
        // Mouth.
        let jaw = (v[4] - n[4]) / g.jawOpen
        e[.jawOpen] = jaw
        let chin = (v[11] - n[11]) / (g.jawOpen * 1.2)
        e[.mouthClose] = chin - max(jaw, 0) - 0.15
        let narrow = n[5] > 1e-4 ? ((n[5] - v[5]) / n[5] - 0.04) / g.narrow : 0
        let open = min(max(jaw * 3, 0), 1)
        e[.mouthPucker] = narrow * (1 - open)
        e[.mouthFunnel] = narrow * open
        e[.mouthLeft] = (v[6] - n[6]) / g.mouthShift
        e[.mouthRight] = -(v[6] - n[6]) / g.mouthShift
        for (lift, spread, smile, frown, stretch, dimple) in [(7, 9, BlendShape.mouthSmileLeft, BlendShape.mouthFrownLeft, BlendShape.mouthStretchLeft, BlendShape.mouthDimpleLeft),
                                                              (8, 10, .mouthSmileRight, .mouthFrownRight, .mouthStretchRight, .mouthDimpleRight)] {
            let dLift = v[lift] - n[lift], dSpread = v[spread] - n[spread]
            e[smile] = (dLift + 0.5 * dSpread - 0.01) / g.smile
            e[frown] = (-dLift - 0.015) / g.frown
            e[stretch] = (dSpread - max(dLift, 0) - 0.03) / (g.smile * 1.5)
            e[dimple] = e[smile] * 0.3
        }
        // Brows, with the mesh's blink-coupled drop added back.
        let blinkLeft = e[.eyeBlinkLeft] * g.browDropPerBlink, blinkRight = e[.eyeBlinkRight] * g.browDropPerBlink
        let innerLeft = v[12] - n[12] + blinkLeft, innerRight = v[13] - n[13] + blinkRight
        let outerLeft = v[14] - n[14] + blinkLeft, outerRight = v[15] - n[15] + blinkRight
        e[.browInnerUp] = ((innerLeft + innerRight) / 2 - 0.01) / g.browUp
        e[.browOuterUpLeft] = (outerLeft - 0.01) / g.browUp
        e[.browOuterUpRight] = (outerRight - 0.01) / g.browUp
        e[.browDownLeft] = (-(innerLeft + outerLeft) / 2 - 0.01) / g.browDown
        e[.browDownRight] = (-(innerRight + outerRight) / 2 - 0.01) / g.browDown
        // Cheeks rise with a smile and push the lower lids up.
        e[.cheekSquintLeft] = max(e[.mouthSmileLeft] - 0.2, 0) * 0.8 + e[.eyeSquintLeft] * 0.3
        e[.cheekSquintRight] = max(e[.mouthSmileRight] - 0.2, 0) * 0.8 + e[.eyeSquintRight] * 0.3
    }

    private mutating func smooth(_ e: VeilCore.Expression, at t: Double) -> VeilCore.Expression {
        // A repeated or backwards timestamp is treated as one frame later (30 fps).
        let time = (lastTime.map { t > $0 ? t : $0 + 1.0 / 30 }) ?? t
        lastTime = time
        var out = e
        let filtered = coefficientFilters.filter(e.coefficients, at: time)
        for shape in BlendShape.allCases { out[shape] = filtered[shape.rawValue] }
        let p = poseFilters.filter([e.headPose.yaw, e.headPose.pitch, e.headPose.roll], at: time)
        out.headPose = HeadPose(yaw: p[0], pitch: p[1], roll: p[2])
        if let g = e.gaze {
            let f = gazeFilters.filter([g.x, g.y], at: time)
            out.gaze = Gaze(x: clamp(f[0], -1, 1), y: clamp(f[1], -1, 1))
        }
        return out
    }
}

