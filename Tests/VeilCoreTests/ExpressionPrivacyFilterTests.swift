import XCTest
@testable import VeilCore
@testable import VeilVision

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

    func testTheJawReadsAlikeWhateverTheShapeOfItsResponse() {
        // The same syllables, read compressively on one face (a half-open jaw already reads 0.7 of
        // its widest) and expansively on another (0.25): the jaw is sent by rank, so both send the
        // same openings.
        func jaw(_ response: (Float) -> Float) -> [Float] {
            var filter = ExpressionPrivacyFilter()
            return run(&filter, seconds: 20) { t in
                var e = VeilCore.Expression()
                e[.jawOpen] = response(Float(abs(sin(t * 7) * sin(t * 1.3))))
                return e
            }.map { $0[.jawOpen] }
        }
        let compressive = jaw { 0.6 * $0.squareRoot() }, expansive = jaw { 0.3 * $0 * $0 }
        let lastTen = (30 * 10)..<(30 * 20)
        for n in lastTen { XCTAssertEqual(compressive[n], expansive[n], accuracy: 0.02, "frame \(n)") }
        // Peak-normalised, the compressive face's half-open jaw would read twice as wide.
        XCTAssertEqual(lastTen.map { compressive[$0] }.max()!, 0.7, accuracy: 0.01)
        XCTAssertEqual(lastTen.map { compressive[$0] }.min()!, 0, "the mouth still closes")
    }

    func testAListenersJawStaysClosedAndOpensWithTheFirstWords() {
        // 10 s of listening, the tracker's jaw reading jittering between 0 and 0.03 (noise, which
        // ranked would be half open), then speech: the jaw opens within 0.3 s of the first syllable.
        var filter = ExpressionPrivacyFilter()
        var random = SplitMix64(seed: 11)
        let outs = run(&filter, seconds: 12) { t in
            var e = VeilCore.Expression()
            let noise = Float(random.next() % 1000) / 1000 * 0.03
            e[.jawOpen] = t < 10 ? noise : noise + 0.3 * Float(abs(sin((t - 10) * 9)))
            return e
        }.map { $0[.jawOpen] }
        XCTAssertEqual(outs[0..<300].max()!, 0, "listening")
        XCTAssertGreaterThan(outs[300..<309].max()!, 0.2, "the first syllable")
    }

    func testALongClosureOfTheLidsIsOneCanonicalBlink() {
        // One face's tracking reads its left lid half shut for 2 s at a time: the avatar blinks
        // once (closing, holding and opening in `lidCloseSeconds + lidHoldSeconds +
        // lidOpenSeconds`), and blinks again only after the lids have read open.
        var filter = ExpressionPrivacyFilter()
        let outs = run(&filter, seconds: 8) { t in
            var e = VeilCore.Expression()
            e[.eyeBlinkLeft] = (t > 2 && t < 4) || (t > 6 && t < 8) ? 0.5 : 0
            return e
        }.map { $0[.eyeBlinkLeft] }
        XCTAssertEqual(outs[30 * 2 + 4], 1, "shut at the start of the closure")
        for n in (30 * 2 + 9)..<(30 * 6) { XCTAssertEqual(outs[n], 0, "open again from 0.3 s into the closure (frame \(n))") }
        XCTAssertEqual(outs[30 * 6 + 4], 1, "the next closure is a blink again")
    }

    func testBriefFrownsPuckersAndGlancesAreNotSentButHeldOnesAre() {
        // Some faces' tracking reads a frown, a pucker or a glance for a few frames now and then;
        // the performances never hold one. A 0.2 s twitch at 3 s is not sent; a 1 s one at 5 s is,
        // `sustainedOnsetSeconds` late.
        var filter = ExpressionPrivacyFilter()
        let outs = run(&filter, seconds: 7) { t in
            let on: Float = (t >= 3 && t < 3.2) || (t >= 5 && t < 6) ? 1 : 0
            var e = VeilCore.Expression(gaze: Gaze(x: 0.8 * on, y: 0))
            e[.mouthPucker] = 0.6 * on
            e[.mouthFrownLeft] = 0.8 * on; e[.mouthFrownRight] = e[.mouthFrownLeft]
            return e
        }
        for out in outs[0..<(30 * 5 + 9)] {
            XCTAssertEqual(out[.mouthPucker], 0)
            XCTAssertEqual(out[.mouthFrownLeft], 0)
            XCTAssertEqual(out.gaze?.x ?? 0, 0)
        }
        let held = outs[30 * 5 + 20]
        XCTAssertGreaterThan(held[.mouthPucker], 0.3)
        XCTAssertGreaterThan(held[.mouthFrownLeft], 0.3)
        XCTAssertGreaterThan(held.gaze?.x ?? 0, 0.3)
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

    func testANeutralLearntDuringASmileDoesNotMakeRestAFrown() {
        // The estimator calibrated while this face smiled, so its rest reads as a 0.3 frown; later
        // a real frown (2 s) and a real smile (1 s) come through, each against that rest.
        var filter = ExpressionPrivacyFilter()
        let outs = run(&filter, seconds: 30) { t in
            var e = VeilCore.Expression()
            let frown: Float = 0.3 + (t > 24 && t < 26 ? 0.5 : 0)
            let smile: Float = t > 28 && t < 29 ? 0.8 : 0
            // The estimator reports one of the two; a smile lifts the corners past the rest first.
            let g = ExpressionEstimator.Gains()
            let net = smile * g.smile - frown * g.frown
            e[.mouthSmileLeft] = max(net, 0) / g.smile; e[.mouthSmileRight] = e[.mouthSmileLeft]
            e[.mouthFrownLeft] = max(-net, 0) / g.frown; e[.mouthFrownRight] = e[.mouthFrownLeft]
            return e
        }
        for t in [5, 10, 20] {
            XCTAssertEqual(outs[30 * t][.mouthFrownLeft], 0, "rest at \(t) s")
            XCTAssertEqual(outs[30 * t][.mouthSmileLeft], 0, "rest at \(t) s")
        }
        XCTAssertGreaterThan(outs[30 * 25][.mouthFrownLeft], 0.3, "the frown at 25 s")
        XCTAssertEqual(outs[30 * 25][.mouthSmileLeft], 0)
        XCTAssertGreaterThan(outs[30 * 28 + 20][.mouthSmileLeft], 0.3, "the smile at 28.7 s")
        XCTAssertEqual(outs[30 * 28 + 20][.mouthFrownLeft], 0)
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
        let outs = run(&filter, seconds: 13) { t in
            let frame = Int((t * 30).rounded())
            // 10 s at the usual pose; a one-frame 10° nod and gaze jump at 5 s; a held 10° turn,
            // nod and look from 10 s on.
            let spike: Float = frame == 150 ? 10 : 0
            let held: Float = t >= 10 ? 10 : 0
            return VeilCore.Expression(headPose: HeadPose(yaw: held, pitch: spike + held, roll: 0),
                                       gaze: Gaze(x: frame == 150 ? 0.9 : (t >= 10 ? 0.7 : 0), y: 0))
        }
        for out in outs[0..<300] {
            XCTAssertEqual(out.headPose, .frontal)
            XCTAssertEqual(out.gaze, Gaze(x: 0, y: 0))
        }
        let held = outs.last!
        XCTAssertEqual(held.headPose.yaw, 9, accuracy: 1e-4)
        XCTAssertEqual(held.headPose.pitch, 10, accuracy: 1e-4, "a nod past `nodDeadZone` is sent whole")
        XCTAssertEqual(held.gaze?.x ?? 0, 0.5, accuracy: 1e-4)
        XCTAssertEqual(held[.eyeLookOutLeft], 0.5, accuracy: 1e-4)
    }

    func testAFaintSmileAfterAStillStretchReadsFaint() {
        // A full smile at 2 s, then 40 s without one, then a smile a third as wide: it reads well
        // below the first (before, the peak was forgotten while the face was still, and the faint
        // smile read as wide as the full one).
        var filter = ExpressionPrivacyFilter()
        let outs = run(&filter, seconds: 46) { t in
            var e = VeilCore.Expression()
            let smile: Float = t >= 2 && t < 4 ? 0.6 : (t >= 44 ? 0.2 : 0)
            e[.mouthSmileLeft] = smile; e[.mouthSmileRight] = smile
            return e
        }
        let first = outs[30 * 3][.mouthSmileLeft], faint = outs[30 * 45][.mouthSmileLeft]
        XCTAssertGreaterThan(first, 0.7)
        XCTAssertGreaterThan(faint, 0, "the faint smile is sent")
        XCTAssertLessThan(faint, first * 0.6, "the faint smile reads as wide as the full one")
    }

    func testTheUsualPoseReadsFrontal() {
        // A face that sits 12° turned and 5° tilted: after its first seconds it reads frontal, and
        // turns are sent from there. A turn held for more than half of `poseBaselineSeconds`
        // becomes the usual pose in its turn.
        var filter = ExpressionPrivacyFilter()
        let outs = run(&filter, seconds: 40) { t in
            let turn: Float = t >= 12 && t < 13 ? 10 : (t >= 20 ? 10 : 0)
            return VeilCore.Expression(headPose: HeadPose(yaw: -12 + turn, pitch: 0, roll: 5), gaze: Gaze(x: 0, y: 0))
        }
        XCTAssertEqual(outs[30 * 11].headPose, .frontal)
        XCTAssertEqual(outs[30 * 12 + 15].headPose.yaw, 9, accuracy: 1e-4, "a turn from the usual pose")
        XCTAssertEqual(outs[30 * 39].headPose, .frontal, "a turn held for 19 s")
    }

    func testUnsteadyTrackingNeedsALargerMoveToBeSent() {
        // Two faces turn 5° for a second at 15 s. One is tracked steadily; the other's yaw wanders
        // by ±2° with every frame, as the tracker reads some faces: its dead zone grows (up to
        // `poseSpreadDeadZoneLimit`), so its wandering is not sent and the turn only in part.
        func yaws(wander: Float) -> [Float] {
            var filter = ExpressionPrivacyFilter()
            var random = SplitMix64(seed: 3)
            return run(&filter, seconds: 17) { t in
                let noise = wander * (Float(random.next() % 1001) / 500 - 1)
                return VeilCore.Expression(headPose: HeadPose(yaw: (t >= 15 && t < 16 ? 5 : 0) + noise, pitch: 0, roll: 0))
            }.map(\.headPose.yaw)
        }
        let steady = yaws(wander: 0), unsteady = yaws(wander: 2)
        XCTAssertEqual(steady[30 * 15 + 15], 4, accuracy: 1e-4)
        XCTAssertEqual(unsteady[30 * 5..<30 * 15].map(abs).max()!, 0, "the wandering")
        let turn = unsteady[(30 * 15 + 10)..<(30 * 16)]
        XCTAssertGreaterThan(turn.max()!, 0)
        XCTAssertLessThan(turn.max()!, 4, "the turn, less its larger dead zone")
    }

    func testBriefFacialMovementsAreNotSentButTheJawIs() {
        // A 0.15 s twitch of smile and brows with every syllable (how jaw movement reads on some
        // faces), then a held smile at 4 s: the twitches are not sent, the smile is, 0.16 s late;
        // the jaw is sent at once.
        var filter = ExpressionPrivacyFilter()
        let outs = run(&filter, seconds: 6) { t in
            var e = VeilCore.Expression()
            let syllable = t < 3.5 && t.truncatingRemainder(dividingBy: 0.5) < 0.15
            e[.jawOpen] = syllable ? 0.3 : 0
            e[.browInnerUp] = syllable ? 0.3 : 0
            e[.mouthSmileLeft] = syllable || t >= 4 ? 0.5 : 0
            e[.mouthSmileRight] = e[.mouthSmileLeft]
            return e
        }
        XCTAssertGreaterThan(outs[30 * 3 + 3][.jawOpen], 0.3)
        for out in outs[0..<(30 * 4 + 4)] {
            XCTAssertEqual(out[.mouthSmileLeft], 0)
            XCTAssertEqual(out[.browInnerUp], 0)
        }
        XCTAssertGreaterThan(outs[30 * 4 + 6][.mouthSmileLeft], 0.5)
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
