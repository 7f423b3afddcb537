import Foundation
import VeilCore
import VeilSynth
import XCTest

final class ExpressionScriptTests: XCTestCase {
    private let sample = """
    # a short test script
    fps 25
    duration 3
    jawDrop 0:0 0.5:0.08 1.0:0.02 1.5:0
    blink 1.2:0 1.28:1 1.4:0
    headYaw 0:0 2:-8.5
    """

    func testCompactTextParses() throws {
        let script = try ExpressionScript(parsing: sample)
        XCTAssertEqual(script.framesPerSecond, 25)
        XCTAssertEqual(script.duration, 3)
        XCTAssertEqual(script.frameCount, 75)
        XCTAssertEqual(script.tracks[.jawDrop]?.count, 4)
        XCTAssertEqual(script.tracks[.blinkLeft], script.tracks[.blinkRight])
        XCTAssertNil(script.tracks[.smile])
    }

    func testValuesAtKeysAreExactAndHeldOutside() throws {
        let script = try ExpressionScript(parsing: sample)
        for key in script.tracks[.jawDrop] ?? [] {
            XCTAssertEqual(script.value(of: .jawDrop, at: key.time), key.value, accuracy: 1e-12)
        }
        XCTAssertEqual(script.value(of: .blinkLeft, at: 1.28), 1, accuracy: 1e-12)
        XCTAssertEqual(script.value(of: .headYaw, at: 2.5), -8.5)
        XCTAssertEqual(script.value(of: .blinkRight, at: 0.1), 0)
        XCTAssertEqual(script.value(of: .smile, at: 1), 0)
        XCTAssertEqual(script.state(at: 0.5).jawDrop, 0.08, accuracy: 1e-12)
    }

    func testInterpolationIsMonotonicAndEased() throws {
        let script = try ExpressionScript(parsing: sample)
        // Rising 0 → 0.08 over 0…0.5 s, then falling to 0.02 at 1.0 s.
        var previous = -1.0
        for k in 0...100 {
            let v = script.value(of: .jawDrop, at: 0.5 * Double(k) / 100)
            XCTAssertGreaterThanOrEqual(v, previous); previous = v
        }
        previous = 1
        for k in 0...100 {
            let v = script.value(of: .jawDrop, at: 0.5 + 0.5 * Double(k) / 100)
            XCTAssertLessThanOrEqual(v, previous); previous = v
        }
        // Smoothstep: halfway at the midpoint, slow near the keys.
        XCTAssertEqual(script.value(of: .jawDrop, at: 0.25), 0.04, accuracy: 1e-12)
        XCTAssertLessThan(script.value(of: .jawDrop, at: 0.05), 0.08 * 0.1 * 0.5)
    }

    func testJSONAndTextRoundTrip() throws {
        let script = try ExpressionScript(parsing: sample)
        let json = try script.jsonData()
        XCTAssertEqual(try ExpressionScript(json: json), script)
        XCTAssertEqual(try ExpressionScript(parsing: String(decoding: json, as: UTF8.self)), script)
        XCTAssertEqual(try ExpressionScript(parsing: script.textForm), script)
        let talking = ExpressionScript.talking
        XCTAssertEqual(try ExpressionScript(json: talking.jsonData()), talking)
        XCTAssertEqual(try ExpressionScript(parsing: talking.textForm), talking)
    }

    func testJSONFormWithBlinkShorthandAndDefaultFPS() throws {
        let text = #"{"duration": 2, "tracks": {"blink": [[0.5, 0], [0.6, 1], [0.7, 0]], "smile": [[0, 0.5]]}}"#
        let script = try ExpressionScript(parsing: text)
        XCTAssertEqual(script.framesPerSecond, 30)
        XCTAssertEqual(script.frameCount, 60)
        XCTAssertEqual(script.value(of: .blinkLeft, at: 0.6), 1)
        XCTAssertEqual(script.value(of: .blinkRight, at: 0.6), 1)
        XCTAssertEqual(script.value(of: .smile, at: 1.5), 0.5)
    }

    func testRejectsMalformedScripts() {
        let bad = [
            "duration 2\nwink 0:1",                      // unknown action
            "duration 2\njawDrop 0:0 1:0.05 0.5:0",      // times not increasing
            "duration 2\njawDrop 0:0.9",                 // outside the action's range
            "duration 2\nsmile 0-1",                     // not time:value
            "duration x",                                // not a number
            "fps 30",                                    // no duration and no keys
            "duration 2\nblink 0:0\nblinkLeft 0:1",      // set twice
            #"{"duration": 2, "tracks": {"smile": [[0, 0.5, 1]]}}"#,
            #"{"tracks": {}}"#,
            "duration -1",
        ]
        for text in bad { XCTAssertThrowsError(try ExpressionScript(parsing: text), text) }
    }

    func testClampedState() {
        let state = ScriptState(jawDrop: 0.5, blinkLeft: .nan, blinkRight: -1, smile: 0.5, browRaise: 2, headYaw: -40).clamped
        XCTAssertEqual(state, ScriptState(jawDrop: 0.3, blinkLeft: 0, blinkRight: 0, smile: 0.5, browRaise: 1, headYaw: -30))
    }

    func testGroundTruthJSONLines() throws {
        let script = try ExpressionScript(parsing: sample)
        let lines = try script.groundTruthJSONLines().split(separator: "\n")
        XCTAssertEqual(lines.count, 75)
        let decoder = JSONDecoder()
        let frames = try lines.map { try decoder.decode(GroundTruthFrame.self, from: Data($0.utf8)) }
        XCTAssertEqual(frames.map(\.frame), Array(0..<75))
        XCTAssertEqual(frames[20].timeSeconds, 0.8, accuracy: 1e-12)
        XCTAssertEqual(frames[20].state, script.state(at: 0.8))
        let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(lines[0].utf8)) as? [String: Double])
        XCTAssertEqual(Set(object.keys), ["frame", "timeSeconds", "jawDrop", "blinkLeft", "blinkRight", "smile", "browRaise", "headYaw",
                                        "frown", "pucker", "headPitch", "gazeYaw", "gazePitch"])
    }

    // MARK: - The built-in talking script

    /// Spans (start, end) in seconds where `predicate` holds, sampled every millisecond.
    private func spans(_ script: ExpressionScript, _ predicate: (ScriptState) -> Bool) -> [(Double, Double)] {
        var out: [(Double, Double)] = []
        var start: Double?
        let steps = Int(script.duration * 1000)
        for k in 0...steps {
            let t = Double(k) / 1000
            if predicate(script.state(at: t)) { if start == nil { start = t } }
            else if let s = start { out.append((s, t)); start = nil }
        }
        if let s = start { out.append((s, script.duration)) }
        return out
    }

    func testTalkingScriptShape() throws {
        let script = ExpressionScript.talking
        XCTAssertEqual(script.framesPerSecond, 30)
        XCTAssert((8...10).contains(script.duration))
        XCTAssertEqual(script.frameCount, Int(script.duration * 30))
        XCTAssertEqual(script.state(at: 0), .neutral)
        XCTAssertEqual(script.state(at: script.duration), .neutral)
    }

    func testTalkingScriptBlinks() throws {
        let script = ExpressionScript.talking
        XCTAssertEqual(script.tracks[.blinkLeft], script.tracks[.blinkRight], "blinks use both eyes")
        let blinks = spans(script) { $0.blinkLeft > 0 }
        XCTAssertGreaterThanOrEqual(blinks.count, 4)
        for (start, end) in blinks {
            XCTAssert((0.14...0.26).contains(end - start), "blink lasts \(end - start) s")
        }
        for k in 1..<blinks.count { XCTAssertGreaterThanOrEqual(blinks[k].0 - blinks[k - 1].1, 0.8) }
        // Each blink shuts the eyes fully.
        for (start, end) in blinks {
            let peak = stride(from: start, through: end, by: 0.001).map { script.value(of: .blinkLeft, at: $0) }.max() ?? 0
            XCTAssertEqual(peak, 1, accuracy: 1e-3)
        }
    }

    func testTalkingScriptSpeech() throws {
        let script = ExpressionScript.talking
        let keys = try XCTUnwrap(script.tracks[.jawDrop])
        let peaks = keys.map(\.value).filter { $0 >= 0.02 }
        XCTAssertGreaterThanOrEqual(peaks.count, 20, "many syllables")
        XCTAssertEqual(keys.map(\.value).max() ?? 0, 0.12, accuracy: 1e-9)
        XCTAssertGreaterThanOrEqual(Set(peaks).count, 8, "varied amplitudes")
        // Closed-mouth pauses of at least 0.3 s between phrases, and full closures inside them.
        let closed = spans(script) { $0.jawDrop == 0 }.filter { $0.1 - $0.0 >= 0.3 }
        XCTAssertGreaterThanOrEqual(closed.count, 4)
        let open = spans(script) { $0.jawDrop > 0.05 }
        XCTAssertGreaterThanOrEqual(open.count, 12)
    }

    func testTalkingScriptSmilesBrowsAndTurn() throws {
        let script = ExpressionScript.talking
        XCTAssert((2...3).contains(spans(script) { $0.smile > 0.3 }.count))
        XCTAssertEqual(spans(script) { $0.browRaise > 0.5 }.count, 2)
        let turns = spans(script) { abs($0.headYaw) > 1 }
        XCTAssertEqual(turns.count, 1)
        let yaw = stride(from: 0.0, through: script.duration, by: 0.01).map { script.value(of: .headYaw, at: $0) }
        XCTAssert((5...12).contains(yaw.map(abs).max() ?? 0))
        XCTAssert(yaw.allSatisfy { $0 >= 0 }, "one turn to the person's left and back")
    }
}
