import Foundation
import VeilCore
import VeilVision
import VeilMedia
import XCTest

/// `veil call --camera none`: two programs in a call, alice speaking from an espeak-ng recording
/// without a camera; bob is told her avatar is voice-driven and receives only voice-driven frames.
final class VoiceCallCommandTests: XCTestCase {
    func testACallWithoutACameraSendsVoiceDrivenFrames() throws {
        let work = try CallWorkspace("veil-voice-cli")
        defer { work.remove() }
        try work.speak("I have no camera, but my avatar still talks when I do. Watch my mouth move with my voice.")
        let (server, serverURL) = try work.startServer()
        defer { server.terminate(); server.waitUntilExit() }
        let tokens = try work.tokens(["alice", "bob"], room: "r1")

        let calls = try [("alice", tokens[0], "speech.wav"), ("bob", tokens[1], "none")].map { user, token, audio in
            try work.process(["call", "--server", serverURL, "--room", "r1", "--user", user, "--token", token, "--camera", "none",
                              "--audio-in", audio, "--out", "none", "--duration", "9", "--json"])
        }
        let lines = try CallWorkspace.run(calls).map(CallWorkspace.events)
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

    /// `veil call --video` on a clip whose face leaves the picture for 2.5 s: alice's avatar
    /// follows her face, then (after a second) her voice, then her face again; bob is told both ways.
    /// The face is in view for the clip's first 5 s, so a call that connects slowly (a busy
    /// machine) still sees it before it leaves, and for 7.5 s after it returns, time enough for a
    /// busy machine's tracker to find it again.
    func testAFaceThatLeavesThePictureHandsTheAvatarToTheVoiceAndBack() throws {
        let work = try CallWorkspace("veil-voice-lost")
        defer { work.remove() }

        // The camera: a talking face, with 2.5 s of an empty grey picture from 5 s on, 15 s in all.
        try work.runToEnd(["synth", try VeilResources.file("photos", "takeo.ppm").path, "-o", "face.mp4", "--quiet"])
        let face = try VideoSource(file: work.directory.appendingPathComponent("face.mp4"))
        var frame = VideoFrame(image: RGBImage(width: 0, height: 0), timestampMicros: 0)
        var images: [RGBImage] = []
        while images.count < 450, try face.read(into: &frame) { images.append(frame.image) }
        XCTAssertGreaterThan(images.count, 150)
        while images.count < 450 { images.append(images[images.count % 150]) }
        let (width, height) = (images[0].width, images[0].height)
        var empty = RGBImage(width: width, height: height)
        for i in empty.pixels.indices { empty.pixels[i] = 128 }
        let writer = try VideoWriter(url: work.directory.appendingPathComponent("camera.mp4"), width: width, height: height, framesPerSecond: 30)
        for (i, image) in images.enumerated() { try writer.write((150..<225).contains(i) ? empty : image) }
        try writer.finish()

        try work.speak("Here I am. Now I step out of the picture for a moment, but I keep on talking to you, and now I am back again.")
        let (server, serverURL) = try work.startServer()
        defer { server.terminate(); server.waitUntilExit() }
        let tokens = try work.tokens(["alice", "bob"], room: "r1")

        // Bob first, so that alice's clip plays while the call is up.
        let bobCall = try work.process(["call", "--server", serverURL, "--room", "r1", "--user", "bob", "--token", tokens[1], "--camera", "none",
                                        "--audio-in", "none", "--out", "none", "--duration", "18.5", "--json"])
        let aliceCall = try work.process(["call", "--server", serverURL, "--room", "r1", "--user", "alice", "--token", tokens[0], "--video", "camera.mp4",
                                          "--audio-in", "speech.wav", "--out", "none", "--duration", "15", "--json"])
        try bobCall.0.run()
        Thread.sleep(forTimeInterval: 1)
        try aliceCall.0.run()
        let lines = CallWorkspace.outputs(of: [aliceCall, bobCall]).map(CallWorkspace.events)
        let (alice, bob) = (lines[0], lines[1])
        // Alice: face, then voice, then face again (a slow start of the tracker may add a voice
        // spell before the first face).
        let sources = alice.filter { $0["event"] as? String == "expressionSource" }.compactMap { $0["source"] as? String }
        print("alice's avatar followed: \(sources.joined(separator: " → "))")
        let fromFace = Array(sources.drop { $0 != "camera" })
        XCTAssertTrue(fromFace.starts(with: ["camera", "voice", "camera"]), "sources: \(sources)")
        let aliceReport = try XCTUnwrap(alice.last { $0["event"] as? String == "report" }, "no report line")
        // Bob: told that alice's avatar follows her voice, then that it no longer does.
        let flags = bob.filter { $0["event"] as? String == "voiceDriven" && $0["user"] as? String == "alice" }.compactMap { $0["voiceDriven"] as? Bool }
        XCTAssertTrue(Array(flags.drop { !$0 }).starts(with: [true, false]), "bob's voiceDriven events for alice: \(flags)")
        let bobReport = try XCTUnwrap(bob.last { $0["event"] as? String == "report" }, "no report line")
        let received = bobReport["expressionFramesReceived"] as? Int ?? 0, voice = bobReport["voiceDrivenFramesReceived"] as? Int ?? 0
        print("alice sent \(aliceReport["cameraFramesSent"] ?? 0) camera and \(aliceReport["voiceFramesSent"] ?? 0) voice-driven frames; bob received \(received), \(voice) voice-driven")
        XCTAssertGreaterThan(voice, 20, "too few voice-driven frames while the face was away")
        // About 1.5 s of voice (2.5 s away, the first second of it lost frames), plus the time the
        // tracker takes to find the face again and any voice spell while it starts (seconds on a
        // busy machine): far from the whole call.
        XCTAssertLessThan(voice, 210, "voice-driven frames for much longer than the face was away")
        XCTAssertGreaterThan(received - voice, 100, "too few frames from the face")
    }
}
