import Foundation
import VeilCore

/// How much of the mouth corners' movement a face's lip gap explains: when the jaw drops without
/// any smile, the corners sink by a fraction of the gap (0.28–0.63 of it against the middle of the
/// upper lip on MediaPipe's mesh of different faces) and spread or narrow a little. Read as it
/// is, that reads talking as a frown, a mouth closing after speech as a smile, and a different
/// smile on every face for the same speech.
///
/// Learnt per person, online, as the least-squares slope of corner lift and of corner spread on
/// the lip gap over the last `seconds` (exponentially weighted), drawn towards `priorLiftSlope`
/// and `priorSpreadSlope` while the gap has not varied much. A smile or frown that does not go
/// with the gap adds scatter but no slope, so it stays in the residual, which is what the
/// estimator reads.
public struct LipGapCoupling: Sendable, Equatable {
    /// Time constant (s) of the weighting.
    public var seconds: Double = 60
    /// Slope of corner lift on lip gap assumed before any data (the middle of the faces measured).
    public var priorLiftSlope: Float = -0.45
    /// Slope of corner spread on lip gap assumed before any data.
    public var priorSpreadSlope: Float = 0.05
    /// Weight of the priors, as a lip-gap variance (IOD²) times a count of frames: about one
    /// second of speech.
    public var priorWeight: Float = 30 * 0.03 * 0.03
    /// The range the slopes are held to.
    public var liftSlopes: ClosedRange<Float> = -1...0
    /// See `liftSlopes`.
    public var spreadSlopes: ClosedRange<Float> = -0.5...0.5

    private var weight: Double = 0
    private var meanGap: Double = 0, meanLift: Double = 0, meanSpread: Double = 0
    private var gapVariance: Double = 0, liftCovariance: Double = 0, spreadCovariance: Double = 0

    public init() {}

    /// Adds one frame's lip gap, corner lift and corner spread (each the mean of both sides),
    /// `dt` seconds after the last.
    public mutating func add(gap: Float, lift: Float, spread: Float, dt: Double) {
        guard gap.isFinite, lift.isFinite, spread.isFinite else { return }
        let decay = exp(-max(dt, 0) / seconds)
        weight = weight * decay + 1
        let w = 1 / weight
        let dGap = Double(gap) - meanGap
        meanGap += w * dGap
        let dLift = Double(lift) - meanLift, dSpread = Double(spread) - meanSpread
        meanLift += w * dLift
        meanSpread += w * dSpread
        // Weighted sums of products of deviations (West's update: the old mean times the new).
        gapVariance = gapVariance * decay + dGap * (Double(gap) - meanGap)
        liftCovariance = liftCovariance * decay + dGap * (Double(lift) - meanLift)
        spreadCovariance = spreadCovariance * decay + dGap * (Double(spread) - meanSpread)
    }

    /// Corner lift per unit of lip gap.
    public var liftSlope: Float { slope(liftCovariance, prior: priorLiftSlope, range: liftSlopes) }
    /// Corner spread per unit of lip gap.
    public var spreadSlope: Float { slope(spreadCovariance, prior: priorSpreadSlope, range: spreadSlopes) }

    private func slope(_ covariance: Double, prior: Float, range: ClosedRange<Float>) -> Float {
        let p = Double(priorWeight)
        let s = Float((covariance + p * Double(prior)) / (gapVariance + p))
        return min(max(s.isFinite ? s : prior, range.lowerBound), range.upperBound)
    }

    /// Forgets everything learnt (the settings stay).
    public mutating func reset() {
        weight = 0; meanGap = 0; meanLift = 0; meanSpread = 0; gapVariance = 0; liftCovariance = 0; spreadCovariance = 0
    }
}
