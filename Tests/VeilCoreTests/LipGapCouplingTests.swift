import XCTest
import VeilCore
import VeilVision

final class LipGapCouplingTests: XCTestCase {
    /// Speech on a face whose corners sink by 0.3 of the lip gap, with smiles that come and go on
    /// their own: the slope learnt is the face's, not the smiles'.
    func testLearnsTheFacesSlopeDespiteSmiles() {
        var rng = SplitMix64(seed: 7)
        var coupling = LipGapCoupling()
        for frame in 0..<900 {
            let gap = Float(Double.random(in: 0...0.2, using: &rng))
            let smiling = (frame / 40) % 3 == 0
            let lift = -0.3 * gap + (smiling ? 0.08 : 0) + Float(rng.nextGaussian() * 0.003)
            let spread = 0.2 * gap + (smiling ? 0.05 : 0) + Float(rng.nextGaussian() * 0.003)
            coupling.add(gap: gap, lift: lift, spread: spread, dt: 1.0 / 30)
        }
        XCTAssertEqual(coupling.liftSlope, -0.3, accuracy: 0.03)
        XCTAssertEqual(coupling.spreadSlope, 0.2, accuracy: 0.03)
    }

    /// Before the lips have moved, the prior holds; values outside the range are held to it, and
    /// non-finite input is ignored.
    func testPriorRangeAndBadInput() {
        var coupling = LipGapCoupling()
        XCTAssertEqual(coupling.liftSlope, coupling.priorLiftSlope)
        for _ in 0..<300 { coupling.add(gap: 0.05, lift: 0.02, spread: 0.4, dt: 1.0 / 30) }
        XCTAssertEqual(coupling.liftSlope, coupling.priorLiftSlope, accuracy: 1e-4, "a still mouth says nothing about the slope")
        coupling.add(gap: .nan, lift: 0, spread: 0, dt: 1.0 / 30)
        coupling.add(gap: 0.1, lift: .infinity, spread: 0, dt: 1.0 / 30)
        XCTAssertTrue(coupling.liftSlope.isFinite)
        for n in 0..<600 {
            let gap: Float = n % 2 == 0 ? 0 : 0.2
            coupling.add(gap: gap, lift: 3 * gap, spread: -3 * gap, dt: 1.0 / 30)
        }
        XCTAssertEqual(coupling.liftSlope, coupling.liftSlopes.upperBound)
        XCTAssertEqual(coupling.spreadSlope, coupling.spreadSlopes.lowerBound)
        coupling.reset()
        XCTAssertEqual(coupling.liftSlope, coupling.priorLiftSlope)
    }
}
