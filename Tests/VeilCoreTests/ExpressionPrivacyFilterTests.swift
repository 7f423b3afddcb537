import XCTest
@testable import VeilCore

/// The privacy filter (on by default): what it keeps, what it evens out, what it drops.
final class ExpressionPrivacyFilterTests: XCTestCase {
    /// Runs `filter` over `seconds` of frames at 30 fps made by `make(t)`; returns the outputs.
    private func run(_ filter: inout ExpressionPrivacyFilter, seconds: Double, from start: Double = 0,
                     _ make: (Double) -> VeilCore.Expression) -> [VeilCore.Expression] {
        (0..<Int(seconds * 30)).map { n in
            let t = start + Double(n) / 30
            return filter.apply(make(t), at: t)
        }
    }

    func testRestStaysNeutral() {
        var filter = ExpressionPrivacyFilter()
        for out in run(&filter, seconds: 2, { _ in .neutral }) { XCTAssertEqual(out, .neutral) }
    }

    func testLeftAndRightAreOneChannel() {
        var filter = ExpressionPrivacyFilter()
        let outs = run(&filter, seconds: 2) { t in
            var e = VeilCore.Expression()
            e[.mouthSmileLeft] = t > 1 ? 0.6 : 0 // a one-sided smile
            return e
        }
        let last = outs.last!
        XCTAssertGreaterThan(last[.mouthSmileLeft], 0.2)
        XCTAssertEqual(last[.mouthSmileLeft], last[.mouthSmileRight])
    }

    func testTwoFacesWithDifferentGainsReadAlike() {
        // The same jaw movement, read 3× more strongly on one face than on the other.
        func lastSecond(_ gain: Float) -> [Float] {
            var filter = ExpressionPrivacyFilter()
            let outs = run(&filter, seconds: 20) { t in
                var e = VeilCore.Expression()
                e[.jawOpen] = gain * Float(abs(sin(t * 3)))
                return e
            }
            return outs.suffix(30).map { $0[.jawOpen] }
        }
        let weak = lastSecond(0.3), strong = lastSecond(0.9)
        XCTAssertEqual(weak.max()!, 0.7, accuracy: 0.05, "a channel's own peak is sent at its canonical strength")
        for (a, b) in zip(weak, strong) { XCTAssertEqual(a, b, accuracy: 0.02) }
        XCTAssertEqual(weak.min()!, 0, "the dead zone closes the mouth between syllables")
    }

    func testAFaceThatRestsAboveItsNeutralReadsZeroAgain() {
        // The neutral was learnt while talking, so this face's rest reads as a 0.25 smile; a real
        // smile later still comes through.
        var filter = ExpressionPrivacyFilter()
        let outs = run(&filter, seconds: 30) { t in
            var e = VeilCore.Expression()
            e[.mouthSmileLeft] = 0.25 + (t > 28 && t < 29 ? 0.5 : 0)
            e[.mouthSmileRight] = e[.mouthSmileLeft]
            return e
        }
        XCTAssertEqual(outs[30 * 20][.mouthSmileLeft], 0, "rest after 20 s")
        XCTAssertGreaterThan(outs[30 * 28 + 20][.mouthSmileLeft], 0.5, "the smile at 28 s")
    }

    func testWeakAndStrongBlinksCloseTheEyesAlike() {
        func lids(_ strength: Float) -> [Float] {
            var filter = ExpressionPrivacyFilter()
            // A blink every 2 s, 150 ms long; MediaPipe's lids read anywhere from 0.2 to 0.9 shut.
            let outs = run(&filter, seconds: 10) { t in
                var e = VeilCore.Expression()
                let phase = t.truncatingRemainder(dividingBy: 2)
                e[.eyeBlinkLeft] = phase > 1 && phase < 1.15 ? strength : 0
                e[.eyeBlinkRight] = e[.eyeBlinkLeft]
                return e
            }
            return outs.suffix(60).map { $0[.eyeBlinkLeft] }
        }
        let weak = lids(0.2), strong = lids(0.9)
        XCTAssertEqual(weak.max()!, 1, "a weak blinker's eyes close fully")
        XCTAssertEqual(weak, strong)
        XCTAssertEqual(weak.first!, 0)
    }

    func testSpikesInPoseAndGazeAreDroppedAndRealMovesKept() {
        var filter = ExpressionPrivacyFilter()
        let outs = run(&filter, seconds: 3) { t in
            let frame = Int((t * 30).rounded())
            // A one-frame 10° nod and gaze jump at frame 15; a held 10° nod and look from 1 s on.
            let spike: Float = frame == 15 ? 10 : 0
            let held: Float = t >= 1 ? 10 : 0
            return VeilCore.Expression(headPose: HeadPose(yaw: held, pitch: spike + held, roll: 0),
                                       gaze: Gaze(x: frame == 15 ? 0.9 : (t >= 1 ? 0.7 : 0), y: 0))
        }
        for out in outs[0..<30] {
            XCTAssertEqual(out.headPose, .frontal)
            XCTAssertEqual(out.gaze, Gaze(x: 0, y: 0))
        }
        let held = outs.last!
        XCTAssertEqual(held.headPose.yaw, 9, accuracy: 1e-4)
        XCTAssertEqual(held.headPose.pitch, 6, accuracy: 1e-4)
        XCTAssertEqual(held.gaze?.x ?? 0, 0.5, accuracy: 1e-4)
        XCTAssertEqual(held[.eyeLookOutLeft], 0.5, accuracy: 1e-4)
    }

    func testExpressionsOutsideTheVocabularyAreNotSent() {
        var filter = ExpressionPrivacyFilter()
        let outs = run(&filter, seconds: 2) { _ in
            var e = VeilCore.Expression()
            for shape in [BlendShape.eyeSquintLeft, .eyeWideRight, .browDownLeft, .cheekPuff, .mouthLeft, .noseSneerLeft, .tongueOut] {
                e[shape] = 0.8
            }
            return e
        }
        for out in outs { XCTAssertEqual(out, .neutral) }
    }
}
