import Foundation
import Synchronization
import VeilCall
import VeilCore
import XCTest

/// The strict privacy level is what `veil render` and `veil call` send unless the user asks
/// otherwise (`--privacy standard`, `--privacy off`): each command run at several levels on the
/// same talking face, and what comes out read for each level's signature (docs/privacy.md).
final class PrivacyDefaultTests: XCTestCase {
    /// What the filter sends: its six channels (jaw; smile with the dimples and cheeks that follow
    /// it; brows up; frown; pucker; funnel), one canonical blink, and gaze. Nothing else.
    static let filteredShapes: Set<String> = [
        "jawOpen", "mouthSmileLeft", "mouthSmileRight", "mouthDimpleLeft", "mouthDimpleRight", "cheekSquintLeft", "cheekSquintRight",
        "browInnerUp", "browOuterUpLeft", "browOuterUpRight", "mouthFrownLeft", "mouthFrownRight", "mouthPucker", "mouthFunnel",
        "eyeBlinkLeft", "eyeBlinkRight", "eyeLookInLeft", "eyeLookOutLeft", "eyeLookInRight", "eyeLookOutRight",
        "eyeLookUpLeft", "eyeLookUpRight", "eyeLookDownLeft", "eyeLookDownRight",
    ]
    /// Left and right move as one through the filter.
    static let pairs = [("mouthSmileLeft", "mouthSmileRight"), ("browOuterUpLeft", "browOuterUpRight"),
                        ("mouthFrownLeft", "mouthFrownRight"), ("eyeBlinkLeft", "eyeBlinkRight"),
                        ("mouthDimpleLeft", "mouthDimpleRight"), ("cheekSquintLeft", "cheekSquintRight")]

    /// What in one frame's blendshapes the filter would not have sent: a coefficient outside its
    /// vocabulary, or a left and right that differ (beyond the wire's quantisation).
    static func unfiltered(_ shapes: [String: Double]) -> [String] {
        var found = shapes.filter { !filteredShapes.contains($0.key) && $0.value > 0.01 }.map { "\($0.key)=\(String(format: "%.2f", $0.value))" }
        for (left, right) in pairs where abs((shapes[left] ?? 0) - (shapes[right] ?? 0)) > 0.01 {
            found.append("\(left)≠\(right)")
        }
        return found.sorted()
    }

    /// What in one frame the strict level would not have sent: an event above its canonical
    /// intensity, or a head roll.
    static func notCanonical(_ shapes: [String: Double], roll: Double) -> [String] {
        var found: [String] = []
        for event in CanonicalExpressionStage.events {
            for shape in event.shapes where (shapes[shape.name] ?? 0) > Double(event.intensity) + 0.01 {
                found.append("\(shape.name)=\(String(format: "%.2f", shapes[shape.name] ?? 0))")
            }
        }
        if abs(roll) > 0.01 { found.append("roll=\(String(format: "%.1f", roll))") }
        return found
    }

    /// Reports how many frames carry what the strict level does not send.
    static func tallyStrict(_ frames: [(shapes: [String: Double], roll: Double)], _ label: String) -> Int {
        let marked = frames.map { notCanonical($0.shapes, roll: $0.roll) }.filter { !$0.isEmpty }
        print("\(label): \(marked.count) of \(frames.count) tracked frames carry what the strict level does not send, e.g. \(marked.prefix(3))")
        return marked.count
    }

    static func shapes(of expression: VeilCore.Expression) -> [String: Double] {
        Dictionary(uniqueKeysWithValues: BlendShape.allCases.map { ($0.name, Double(expression[$0])) })
    }

    /// Reports how many frames carry something the filter would not send, and a few examples.
    static func tally(_ frames: [[String: Double]], _ label: String) -> Int {
        let marked = frames.map(unfiltered).filter { !$0.isEmpty }
        print("\(label): \(marked.count) of \(frames.count) tracked frames carry what the filter does not send, e.g. \(marked.prefix(3))")
        return marked.count
    }

    func testRenderSendsTheFilteredStreamUnlessToldOtherwise() throws {
        let work = try CallWorkspace("veil-privacy-render")
        defer { work.remove() }
        try work.runToEnd(["synth", try VeilResources.file("photos", "takeo.ppm").path, "-o", "face.mp4", "--quiet"])
        try work.runToEnd(["render", "face.mp4", "-o", "default.mp4", "--expressions", "default.jsonl", "--quiet"])
        try work.runToEnd(["render", "face.mp4", "-o", "standard.mp4", "--expressions", "standard.jsonl", "--privacy", "standard", "--quiet"])
        try work.runToEnd(["render", "face.mp4", "-o", "full.mp4", "--expressions", "full.jsonl", "--full-expression", "--quiet"])
        func tracked(_ name: String) throws -> [(shapes: [String: Double], roll: Double)] {
            try String(contentsOf: work.directory.appendingPathComponent(name), encoding: .utf8).split(separator: "\n").compactMap { line in
                guard let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                      object["state"] as? String == "tracked", let shapes = object["blendshapes"] as? [String: Double] else { return nil }
                return (shapes, ((object["headPose"] as? [String: Double])?["roll"]) ?? .nan)
            }
        }
        let strict = try tracked("default.jsonl"), standard = try tracked("standard.jsonl"), full = try tracked("full.jsonl")
        XCTAssertGreaterThan(strict.count, 200)
        XCTAssertEqual(Self.tally(strict.map(\.shapes), "veil render"), 0, "veil render does not filter by default")
        XCTAssertEqual(Self.tallyStrict(strict, "veil render"), 0, "veil render's default is not the strict level")
        XCTAssertEqual(Self.tally(standard.map(\.shapes), "veil render --privacy standard"), 0)
        XCTAssertGreaterThan(Self.tallyStrict(standard, "veil render --privacy standard"), 10,
                             "the standard level carries nothing the strict one does not: the check above proves nothing")
        XCTAssertGreaterThan(Self.tally(full.map(\.shapes), "veil render --full-expression"), full.count / 4,
                             "the same face unfiltered carries nothing outside the filter's vocabulary: the check above proves nothing")
    }

    func testACallSendsTheFilteredStreamUnlessToldOtherwise() throws {
        let work = try CallWorkspace("veil-privacy-call")
        defer { work.remove() }
        try work.runToEnd(["synth", try VeilResources.file("photos", "takeo.ppm").path, "-o", "face.mp4", "--quiet"])
        let (server, serverURL) = try work.startServer()
        defer { server.terminate(); server.waitUntilExit() }
        let url = try XCTUnwrap(URL(string: serverURL))

        // Two calls at once, one per room: alice with the defaults, carol with --privacy off;
        // bob and dave, in this process, keep every frame they receive.
        final class Received: Sendable { let frames = Mutex<[ExpressionFrame]>([]) }
        var calls: [(process: (Process, Pipe, Pipe), session: CallSession, received: Received, label: String)] = []
        for (room, sender, receiver, extra) in [("r1", "alice", "bob", [String]()), ("r2", "carol", "dave", ["--privacy", "off"])] {
            let tokens = try work.tokens([sender, receiver], room: room)
            let session = CallSession(configuration: .init(server: url, room: room, user: receiver, token: tokens[1], audioInput: .silence))
            let received = Received()
            calls.append((try work.process(["call", "--server", serverURL, "--room", room, "--user", sender, "--token", tokens[0],
                                            "--video", "face.mp4", "--audio-in", "none", "--out", "none", "--duration", "10"] + extra),
                          session, received, "veil call " + (extra.first ?? "(defaults)")))
        }
        for call in calls {
            let (session, received) = (call.session, call.received)
            Task { for await (_, item) in session.expressionFrames { received.frames.withLock { $0.append(item.frame) } } }
            session.start()
        }
        Thread.sleep(forTimeInterval: 0.5)
        for call in calls { try call.process.0.run() }
        _ = CallWorkspace.outputs(of: calls.map { $0.process })
        let group = DispatchGroup()
        for call in calls {
            group.enter()
            Task { await call.session.leave(); group.leave() }
        }
        _ = group.wait(timeout: .now() + 10)

        var counts: [Int] = []
        for call in calls {
            let tracked = call.received.frames.withLock { $0 }.filter { $0.state == .tracked && !$0.isVoiceDriven }.map { Self.shapes(of: $0.expression) }
            XCTAssertGreaterThan(tracked.count, 60, "\(call.label): too few frames of the face arrived")
            counts.append(Self.tally(tracked, call.label))
            if call.label.hasSuffix("(defaults)") {
                XCTAssertEqual(counts.last, 0, "veil call does not filter by default")
                let frames = call.received.frames.withLock { $0 }.filter { $0.state == .tracked && !$0.isVoiceDriven }
                XCTAssertEqual(Self.tallyStrict(frames.map { (Self.shapes(of: $0.expression), Double($0.expression.headPose.roll)) }, call.label), 0,
                               "veil call's default is not the strict level")
            }
        }
        XCTAssertGreaterThan(counts.last ?? 0, 10, "the same face unfiltered carries nothing outside the filter's vocabulary: the check proves nothing")
    }
}
