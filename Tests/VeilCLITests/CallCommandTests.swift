import Foundation
import VeilCore
import VeilVision
import VeilMedia
import VeilTestSupport
import XCTest

/// `veil serve`, `veil token` and two `veil call` processes: a real call between two programs.
final class CallCommandTests: XCTestCase {
    func testTwoCallsThroughAServer() throws {
        let work = try CallWorkspace("veil-call")
        defer { work.remove() }

        // A clip to act as a camera.
        try work.runToEnd(["synth", try VeilResources.file("photos", "takeo.ppm").path, "-o", "face.mp4", "--quiet"])

        // The server on a free port; its URL is on stderr.
        let (server, serverURL) = try work.startServer()
        defer { server.terminate(); server.waitUntilExit() }

        let tokens = try work.tokens(["alice", "bob"], room: "r1")
        XCTAssertTrue(tokens.allSatisfy { $0.hasPrefix("v1.") })

        let calls = try [("alice", tokens[0], "tone"), ("bob", tokens[1], "none")].map { user, token, audio in
            try work.process(["call", "--server", serverURL, "--room", "r1", "--user", user, "--token", token, "--video", "face.mp4",
                              "--audio-in", audio, "--out", "\(user).mp4", "--duration", "6", "--json"])
        }
        let outputs = try CallWorkspace.run(calls)
        // Events as JSON lines: joined, the other participant, statistics with a candidate pair and RTT.
        let aliceEvents = CallWorkspace.events(outputs[0])
        XCTAssertTrue(aliceEvents.contains { $0["event"] as? String == "joined" })
        // Bob is in the room when alice joins, or joins after her (alice starts first, but on a busy
        // machine either may reach the server first).
        XCTAssertTrue(aliceEvents.contains { $0["event"] as? String == "participantJoined" && $0["user"] as? String == "bob"
                                             || $0["event"] as? String == "joined" && ($0["participants"] as? [String])?.contains("bob") == true },
                      "alice never saw bob: \(aliceEvents)")
        let stats = aliceEvents.filter { $0["event"] as? String == "statistics" }.compactMap { ($0["peers"] as? [[String: Any]])?.first }
        XCTAssertTrue(stats.contains { $0["rttMillis"] != nil && ($0["local"] as? String)?.contains(":") == true },
                      "no statistics with RTT and addresses: \(stats)")
        XCTAssertTrue(stats.contains { (($0["expressionFramesPerSecond"] as? Double) ?? 0) > 10 })

        // The self-view inset shows the avatar, never the camera: the camera clip is grey
        // (takeo's photo), the avatar and its background are in colour.
        let aliceVideo = try VideoSource(file: work.directory.appendingPathComponent("alice.mp4"))
        var aliceFrame = VideoFrame(image: RGBImage(width: 0, height: 0), timestampMicros: 0)
        for _ in 0..<120 { guard try aliceVideo.read(into: &aliceFrame) else { break } }
        let image = aliceFrame.image
        XCTAssertEqual(image.width, 640)
        // The inset: a quarter of the width, 12 px from the bottom-right corner (the default layout).
        let insetWidth = 160, insetHeight = 120
        var grey = 0, total = 0
        for y in (480 - 12 - insetHeight + 4)..<(480 - 12 - 4) {
            for x in (640 - 12 - insetWidth + 4)..<(640 - 12 - 4) {
                let i = (y * image.width + x) * 3
                if abs(Int(image.pixels[i]) - Int(image.pixels[i + 2])) <= 8 { grey += 1 }
                total += 1
            }
        }
        print("self-view inset: \(grey) of \(total) pixels grey")
        XCTAssertLessThan(Double(grey) / Double(max(total, 1)), 0.3,
                          "the self-view inset looks like the grey camera picture, not the avatar")

        // Bob's recording holds what he saw and heard: video, and alice's tone.
        let bobVideo = try VideoSource(file: work.directory.appendingPathComponent("bob.mp4"))
        var frame = VideoFrame(image: RGBImage(width: 0, height: 0), timestampMicros: 0)
        var frames = 0
        while try bobVideo.read(into: &frame) { frames += 1 }
        XCTAssertGreaterThan(frames, 120)
        let audio = try AudioSource(file: work.directory.appendingPathComponent("bob.mp4"))
        var chunk: [Int16] = []
        var energy = 0.0, count = 0
        while try audio.read(into: &chunk) != nil {
            for s in chunk { energy += Double(s) * Double(s) }
            count += chunk.count
        }
        let rms = (energy / Double(max(count, 1))).squareRoot() / 32768
        XCTAssertGreaterThan(rms, 0.02, "bob's recording should carry alice's voice")
    }
}

/// `veil demo` (what `make demo` runs): a short call between two built-in participants.
final class DemoCommandTests: XCTestCase {
    func testShortDemoCall() throws {
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("veil-demo-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: work) }
        let demo = try TestProgram.run(VeilCommandTests.process(["demo", "--out", work.path, "--seconds", "5", "--quiet"],
                                                                in: FileManager.default.temporaryDirectory))
        let (text, errors) = (demo.stdout, demo.stderr)
        XCTAssertEqual(demo.status, 0, text)
        // Two trackers start at once (alice and bob): the runtime's log stays quiet for both.
        XCTAssertFalse(errors.contains("INFO: ["), "the LiteRT runtime's log reached stderr:\n\(errors)")
        XCTAssertTrue(text.contains("camera pixels sent (non-audio B)  0 "), text)
        XCTAssertTrue(text.contains("outbound RTP streams              audio"), text)
        let report = try JSONSerialization.jsonObject(with: Data(contentsOf: work.appendingPathComponent("report.json"))) as? [String: Any]
        let alice = try XCTUnwrap(report?["alice"] as? [String: Any])
        XCTAssertNotNil(alice["joinMilliseconds"])
        let offsets = try XCTUnwrap(alice["lipSyncOffsetsMillis"] as? [Double])
        XCTAssertFalse(offsets.isEmpty)
        let inside = offsets.filter { $0 <= 45 && $0 >= -125 }.count
        XCTAssertGreaterThanOrEqual(Double(inside) / Double(offsets.count), 0.95, "lip-sync outside +45/−125 ms too often")
        for user in ["alice", "bob"] {
            XCTAssertTrue(FileManager.default.fileExists(atPath: work.appendingPathComponent("\(user).mp4").path))
        }
    }
}
