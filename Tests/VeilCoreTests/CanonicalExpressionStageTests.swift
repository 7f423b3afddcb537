import XCTest
@testable import VeilCore

/// The strict level's canonical events: what the stream shows is that something happened, with one
/// profile for everyone, not how strongly or in what curve this face did it.
final class CanonicalExpressionStageTests: XCTestCase {
    /// Runs a fresh stage over `seconds` of frames at 30 fps made by `make(t)`.
    private func run(seconds: Double, voice: ((Double) -> Float?)? = nil, _ make: (Double) -> VeilCore.Expression) -> [VeilCore.Expression] {
        var stage = CanonicalExpressionStage(seed: 7)
        return (0..<Int(seconds * 30)).map { n in
            let t = Double(n) / 30
            return stage.apply(make(t), at: t, voiceMouth: voice?(t))
        }
    }

    func testTwoFacesSmilingAtTheSameMomentsSendTheSameSmile() {
        // One face's smile reads faint and rises slowly, the other's reads strong at once: the
        // stream carries only when each smile was on. A trace below `onReading` is not a smile.
        let faint = run(seconds: 4) { t in
            var e = VeilCore.Expression()
            if t >= 1, t < 2.5 { e[.mouthSmileLeft] = Float(0.3 + 0.1 * (t - 1)); e[.mouthSmileRight] = e[.mouthSmileLeft] }
            return e
        }
        let strong = run(seconds: 4) { t in
            var e = VeilCore.Expression()
            if t >= 1, t < 2.5 { e[.mouthSmileLeft] = 0.8; e[.mouthSmileRight] = 0.8 }
            return e
        }
        XCTAssertEqual(faint, strong)
        let peak = faint.map { $0[.mouthSmileLeft] }.max() ?? 0
        XCTAssertEqual(peak, CanonicalExpressionStage.events[0].intensity, accuracy: 1e-6)
        XCTAssertEqual(faint.last?[.mouthSmileLeft], 0, "the smile ends")
        XCTAssertGreaterThan(faint[Int(2.0 * 30)][.mouthSmileLeft], 0.6, "the smile shows while it lasts")
        let trace = run(seconds: 2) { t in
            var e = VeilCore.Expression()
            e[.mouthSmileLeft] = 0.2; e[.mouthSmileRight] = 0.2
            return e
        }
        XCTAssertTrue(trace.allSatisfy { $0[.mouthSmileLeft] == 0 }, "a trace of a smile became a smile")
    }

    func testAFlickerShowsAsTheShortestCanonicalEvent() {
        let outs = run(seconds: 2) { t in
            var e = VeilCore.Expression()
            if abs(t - 0.5) < 0.01 { e[.browInnerUp] = 0.4; e[.browOuterUpLeft] = 0.4; e[.browOuterUpRight] = 0.4 }
            return e
        }
        let raised = outs.filter { $0[.browInnerUp] > 0 }.count
        // On for minimumSeconds (0.4 s), then a fall of fallSeconds (0.25 s): about 20 frames.
        XCTAssertGreaterThanOrEqual(raised, 18)
        XCTAssertLessThanOrEqual(raised, 21)
        XCTAssertEqual(outs.last?[.browInnerUp], 0)
    }

    func testTurnsAndNodsAreEventsScaledToTheFacesOwnRange() {
        // Two faces turn and nod at the same moments; one's tracking reads the moves at half the
        // size of the other's. Both send the same turns and nods, of canonical size.
        func moves(gain: Float) -> [VeilCore.Expression] {
            run(seconds: 30) { t in
                var e = VeilCore.Expression()
                let turn: Float = Int(t / 3) % 2 == 1 && t.truncatingRemainder(dividingBy: 3) < 1.5 ? 14 : 0
                let nod: Float = Int(t / 4) % 3 == 2 && t.truncatingRemainder(dividingBy: 4) < 1 ? -10 : 0
                e.headPose = HeadPose(yaw: gain * turn, pitch: gain * nod, roll: gain * 5)
                return e
            }
        }
        let strong = moves(gain: 1), weak = moves(gain: 0.5)
        XCTAssertEqual(strong.map(\.headPose), weak.map(\.headPose))
        XCTAssertEqual(strong.map(\.headPose.yaw).max() ?? 0, 15, accuracy: 1e-5)
        XCTAssertEqual(strong.map(\.headPose.pitch).min() ?? 0, -8, accuracy: 1e-5)
        XCTAssertEqual(strong[30 * 25].headPose.yaw, 0, "between turns the head is straight")
        XCTAssertTrue(strong.allSatisfy { $0.headPose.roll == 0 }, "roll is not sent")
        // Below the floor (3°) nothing is sent, however still the face is otherwise.
        let still = run(seconds: 10) { t in VeilCore.Expression(headPose: HeadPose(yaw: 2 * Float(sin(t)), pitch: 0, roll: 0)) }
        XCTAssertTrue(still.allSatisfy { $0.headPose.yaw == 0 })
    }

    func testTheAvatarBlinksOnItsOwnAndLooksAhead() {
        // The camera reads the eyes shut and the gaze far to the side the whole time: neither is
        // sent; the avatar blinks 2–6 s apart on its own.
        let outs = run(seconds: 30) { _ in
            var e = VeilCore.Expression(gaze: Gaze(x: 0.9, y: 0))
            e[.eyeBlinkLeft] = 1; e[.eyeBlinkRight] = 1
            return e
        }
        let closing = zip(outs, outs.dropFirst()).filter { $0.0[.eyeBlinkLeft] < 0.5 && $0.1[.eyeBlinkLeft] >= 0.5 }.count
        XCTAssertGreaterThanOrEqual(closing, 5)
        XCTAssertLessThanOrEqual(closing, 15)
        XCTAssertTrue(outs.allSatisfy { $0.gaze == nil && $0[.eyeLookOutLeft] == 0 })
        // Two stages with different seeds blink at different moments.
        var a = CanonicalExpressionStage(seed: 1), b = CanonicalExpressionStage(seed: 2)
        let lidsA = (0..<300).map { a.apply(.neutral, at: Double($0) / 30)[.eyeBlinkLeft] }
        let lidsB = (0..<300).map { b.apply(.neutral, at: Double($0) / 30)[.eyeBlinkLeft] }
        XCTAssertNotEqual(lidsA, lidsB)
    }

    func testTheMouthFollowsTheVoiceWhenThereIsOne() {
        let outs = run(seconds: 1, voice: { t in t < 0.5 ? 0.3 : nil }) { _ in
            var e = VeilCore.Expression()
            e[.jawOpen] = 0.1
            return e
        }
        XCTAssertEqual(outs[3][.jawOpen], 0.3)
        XCTAssertEqual(outs.last?[.jawOpen], 0.1, "without a voice the camera's jaw is sent")
    }

    func testEachLevelOfTheStage() {
        var e = VeilCore.Expression()
        e[.eyeSquintLeft] = 0.5
        e[.mouthSmileLeft] = 0.4
        e.headPose = HeadPose(yaw: 3, pitch: 2, roll: 4)
        var off = ExpressionPrivacy(level: .off), standard = ExpressionPrivacy(level: .standard), strict = ExpressionPrivacy(level: .strict)
        XCTAssertEqual(off.apply(e, at: 0), e)
        var filter = ExpressionPrivacyFilter()
        XCTAssertEqual(standard.apply(e, at: 0), filter.apply(e, at: 0))
        let sent = strict.apply(e, at: 0)
        XCTAssertEqual(sent[.eyeSquintLeft], 0)
        XCTAssertEqual(sent.headPose, HeadPose(yaw: 0, pitch: 0, roll: 0))
        XCTAssertNil(sent.gaze)
        XCTAssertEqual(PrivacyLevel(name: "Strict"), .strict)
        XCTAssertNil(PrivacyLevel(name: "loose"))
        XCTAssertEqual(PrivacyLevel.default, .strict)
    }
}
