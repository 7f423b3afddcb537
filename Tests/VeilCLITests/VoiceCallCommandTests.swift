import Foundation
import XCTest

/// `veil call --camera none`: two programs in a call, alice speaking from an espeak-ng recording
/// without a camera; bob is told her avatar is voice-driven and receives only voice-driven frames.
final class VoiceCallCommandTests: XCTestCase {
    func testACallWithoutACameraSendsVoiceDrivenFrames() throws {
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("veil-voice-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: work) }

        let espeak = try XCTUnwrap(["/usr/bin/espeak-ng", "/usr/local/bin/espeak-ng"].first { FileManager.default.isExecutableFile(atPath: $0) },
                                   "espeak-ng is not installed (scripts/bootstrap installs it)")
        let speak = Process()
        speak.executableURL = URL(fileURLWithPath: espeak)
        speak.arguments = ["-v", "en", "-s", "150", "-w", work.appendingPathComponent("speech.wav").path,
                           "I have no camera, but my avatar still talks when I do. Watch my mouth move with my voice."]
        try speak.run()
        speak.waitUntilExit()
        XCTAssertEqual(speak.terminationStatus, 0)

        func process(_ args: [String]) throws -> (Process, Pipe, Pipe) {
            let p = try VeilCommandTests.process(args, in: work, headless: true)
            let out = Pipe(), err = Pipe()
            p.standardOutput = out; p.standardError = err
            return (p, out, err)
        }
        let secret = work.appendingPathComponent("secret").path
        let (server, _, serverErr) = try process(["serve", "--port", "0", "--secret-file", secret])
        try server.run()
        defer { server.terminate(); server.waitUntilExit() }
        var url: String?
        var log = ""
        let deadline = Date().addingTimeInterval(10)
        while url == nil, Date() < deadline {
            log += String(decoding: serverErr.fileHandleForReading.availableData, as: UTF8.self)
            url = log.split(separator: " ").first { $0.hasPrefix("ws://") }.map { String($0).trimmingCharacters(in: CharacterSet(charactersIn: ";,\n")) }
        }
        let serverURL = try XCTUnwrap(url, "no URL from veil serve: \(log)")
        let tokens = try ["alice", "bob"].map { user -> String in
            let (p, out, _) = try process(["token", "--room", "r1", "--user", user, "--ttl", "5m", "--secret-file", secret])
            try p.run()
            let data = out.fileHandleForReading.readDataToEndOfFile()
            p.waitUntilExit()
            return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        }

        let calls = try [("alice", tokens[0], "speech.wav"), ("bob", tokens[1], "none")].map { user, token, audio in
            try process(["call", "--server", serverURL, "--room", "r1", "--user", user, "--token", token, "--camera", "none",
                         "--audio-in", audio, "--out", "none", "--duration", "9", "--json"])
        }
        try calls[0].0.run()
        Thread.sleep(forTimeInterval: 0.5)
        try calls[1].0.run()
        var lines: [[[String: Any]]] = []
        for (p, out, err) in calls {
            let data = out.fileHandleForReading.readDataToEndOfFile()
            let errText = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            p.waitUntilExit()
            XCTAssertEqual(p.terminationStatus, 0, errText)
            lines.append(String(decoding: data, as: UTF8.self).split(separator: "\n").compactMap {
                try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
            })
        }
        let (alice, bob) = (lines[0], lines[1])
        // Alice is told her avatar follows her voice, and sends only voice-driven frames.
        XCTAssertTrue(alice.contains { $0["event"] as? String == "expressionSource" && $0["source"] as? String == "voice" })
        XCTAssertFalse(alice.contains { $0["event"] as? String == "expressionSource" && $0["source"] as? String == "camera" })
        let aliceReport = try XCTUnwrap(alice.last { $0["event"] as? String == "report" }, "no report line")
        XCTAssertEqual(aliceReport["cameraFramesSent"] as? Int, 0)
        XCTAssertGreaterThan(aliceReport["voiceFramesSent"] as? Int ?? 0, 120)
        // Bob is told alice's avatar is voice-driven, and every frame he got from her was.
        XCTAssertTrue(bob.contains { $0["event"] as? String == "voiceDriven" && $0["user"] as? String == "alice" && $0["voiceDriven"] as? Bool == true },
                      "bob's output has no voiceDriven event for alice")
        let bobReport = try XCTUnwrap(bob.last { $0["event"] as? String == "report" }, "no report line")
        let received = bobReport["expressionFramesReceived"] as? Int ?? 0
        print("alice sent \(aliceReport["voiceFramesSent"] ?? 0) voice-driven frames; bob received \(received), \(bobReport["voiceDrivenFramesReceived"] ?? 0) voice-driven")
        XCTAssertGreaterThan(received, 120)
        XCTAssertEqual(bobReport["voiceDrivenFramesReceived"] as? Int, received)
    }
}
