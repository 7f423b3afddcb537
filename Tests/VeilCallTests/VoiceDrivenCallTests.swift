import Foundation
import Synchronization
@testable import VeilCall
import VeilCore
import VeilMedia
import VeilServer
import XCTest

/// Voice-driven avatars in real calls: a real room server on loopback, two `CallSession`s over
/// real WebRTC, alice speaking from an espeak-ng recording through `ExpressionSender`.
final class VoiceDrivenCallTests: XCTestCase {
    final class Call: Sendable {
        let server: RoomServer
        let alice: CallSession
        let bob: CallSession
        /// Alice's frames as bob received them.
        let received = Mutex<[ReceivedExpressionFrame]>([])
        let directory: URL
        let speech: WAVAudio

        init(server: RoomServer, alice: CallSession, bob: CallSession, directory: URL, speech: WAVAudio) {
            self.server = server; self.alice = alice; self.bob = bob; self.directory = directory; self.speech = speech
        }
    }

    /// espeak-ng's recording of `text` as a WAV file in `directory`.
    static func speak(_ text: String, in directory: URL) throws -> URL {
        guard let tool = ["/usr/bin/espeak-ng", "/usr/local/bin/espeak-ng"].first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw DeadlineExceeded(description: "espeak-ng is not installed (scripts/bootstrap installs it)")
        }
        let file = directory.appendingPathComponent("speech.wav")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = ["-v", "en", "-s", "140", "-w", file.path, text]
        try process.run()
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0)
        return file
    }

    /// Alice (speaking `text` from a file) and bob (silent, recording alice's frames) in one room.
    func startCall(_ text: String) throws -> Call {
        try PeerConnection.prepare()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("veil-voice-call-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let speechFile = try Self.speak(text, in: directory)
        let secret = ServerSecret.random()
        let server = RoomServer(configuration: .init(secret: secret, port: 0))
        let url = try server.start()
        let authority = TokenAuthority(secret: secret)
        var aliceConfiguration = CallSession.Configuration(server: url, room: "voice", user: "alice",
                                                           token: try authority.issue(room: "voice", user: "alice", lifetime: 600),
                                                           audioInput: .file(speechFile))
        aliceConfiguration.statisticsInterval = 60
        var bobConfiguration = CallSession.Configuration(server: url, room: "voice", user: "bob",
                                                         token: try authority.issue(room: "voice", user: "bob", lifetime: 600),
                                                         audioInput: .silence)
        bobConfiguration.statisticsInterval = 60
        let alice = CallSession(configuration: aliceConfiguration)
        let bob = CallSession(configuration: bobConfiguration)
        let call = Call(server: server, alice: alice, bob: bob, directory: directory, speech: try WAVAudio(contentsOf: speechFile))
        Task { for await (user, frame) in bob.expressionFrames where user == "alice" { call.received.withLock { $0.append(frame) } } }
        alice.start()
        bob.start()
        return call
    }

    func end(_ call: Call) {
        let done = DispatchSemaphore(value: 0)
        Task { await call.alice.leave(); await call.bob.leave(); done.signal() }
        _ = done.wait(timeout: .now() + 10)
        call.server.stop()
        try? FileManager.default.removeItem(at: call.directory)
    }

    /// The speech's RMS over 40 ms around `seconds` into the file.
    static func envelope(_ audio: WAVAudio, at seconds: Double) -> Double {
        let centre = Int(seconds * Double(audio.sampleRate)), half = audio.sampleRate / 50
        let lower = max(0, centre - half), upper = min(audio.samples.count, centre + half)
        guard lower < upper else { return 0 }
        let range = lower..<upper
        let sum = audio.samples[range].reduce(0.0) { $0 + Double($1) * Double($1) }
        return (sum / Double(range.count)).squareRoot() / 32768
    }

    /// Coefficients a voice-driven frame may carry; a camera's estimate fills others too.
    static let voiceShapes: Set<BlendShape> = [.jawOpen, .mouthFunnel, .eyeBlinkLeft, .eyeBlinkRight, .browInnerUp,
                                               .browOuterUpLeft, .browOuterUpRight]

    func testWithoutACameraTheOtherSideSeesAMouthThatFollowsTheVoice() throws {
        let call = try startCall("Hello Bob. I have no camera today, but you can still see me talking. Can you hear me well? Good, then let us begin.")
        defer { end(call) }
        let sender = ExpressionSender(session: call.alice, hasCamera: false, seed: VoiceExpressionGenerator.seed(for: "alice"))
        sender.start()
        defer { sender.stop() }

        let deadline = Date().addingTimeInterval(15)
        while call.alice.audioFileStartMicros(for: "bob") == nil, Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        let fileStart = try XCTUnwrap(call.alice.audioFileStartMicros(for: "bob"), "the call did not connect within 15 s")
        // Meanwhile the mouth the strict privacy level gives a camera's frames follows the same voice.
        var mouths: [Float?] = []
        let speechEnd = Date().addingTimeInterval(call.speech.duration + 1)
        while Date() < speechEnd {
            mouths.append(sender.voiceMouth)
            Thread.sleep(forTimeInterval: 0.02)
        }
        XCTAssertGreaterThan(mouths.compactMap { $0 }.count, mouths.count / 2, "the voice's mouth is missing while audio is sent")
        XCTAssertGreaterThan(mouths.compactMap { $0 }.max() ?? 0, 0.3, "the voice's mouth does not open")

        // As alice stamped them: bob receives them on the connection's clock.
        let clock = try XCTUnwrap(call.alice.clock(for: "bob"))
        let frames = call.received.withLock { $0 }.map { clock.original(of: $0.frame) }
        let spoken = frames.filter { $0.captureTimeMicros >= fileStart && $0.captureTimeMicros < fileStart + UInt64(call.speech.duration * 1e6) }
        XCTAssertGreaterThan(Double(spoken.count), call.speech.duration * 25, "too few frames during the speech: \(spoken.count)")
        // Every frame is tracked, voice-driven, and carries nothing a face would add.
        XCTAssertTrue(frames.allSatisfy { $0.state == .tracked && $0.isVoiceDriven }, "a frame that is not voice-driven arrived")
        for frame in frames {
            for shape in BlendShape.allCases where !Self.voiceShapes.contains(shape) {
                XCTAssertEqual(frame.expression[shape], 0, "\(shape) set in a voice-driven frame")
            }
        }
        XCTAssertEqual(Set(frames.map(\.sequence)).count, frames.count, "sequence numbers repeat")
        // The mouth follows the speech envelope at the frame's capture time (the audio's clock).
        func correlation(lagMicros: Int64) -> Double {
            let jaw = spoken.map { Double($0.expression[.jawOpen]) }
            let voice = spoken.map { Self.envelope(call.speech, at: Double(Int64(bitPattern: $0.captureTimeMicros &- fileStart) + lagMicros) / 1e6) }
            return pearson(jaw, voice)
        }
        let r = correlation(lagMicros: 0)
        let best = stride(from: -200_000, through: 200_000, by: 20_000).max { correlation(lagMicros: Int64($0)) < correlation(lagMicros: Int64($1)) } ?? 0
        print("voice-driven call: \(frames.count) frames, \(spoken.count) during \(String(format: "%.1f", call.speech.duration)) s of speech; jawOpen vs speech envelope r = \(String(format: "%.3f", r)); best at \(best / 1000) ms")
        XCTAssertGreaterThan(r, 0.6, "the mouth does not follow the voice")
        XCTAssertLessThanOrEqual(abs(best), 100_000, "the mouth is out of step with the voice by \(best / 1000) ms")
        XCTAssertGreaterThan(spoken.map { $0.expression[.jawOpen] }.max() ?? 0, 0.3)
        // After the speech: silence closes the mouth, blinks go on.
        let after = frames.filter { $0.captureTimeMicros > fileStart + UInt64((call.speech.duration + 0.3) * 1e6) }
        XCTAssertFalse(after.isEmpty)
        XCTAssertLessThan(after.map { $0.expression[.jawOpen] }.max() ?? 1, 0.05)
        XCTAssertGreaterThan(frames.map { $0.expression[.eyeBlinkLeft] }.max() ?? 0, 0.9, "no blink in the whole call")
        // What bob draws says so.
        let playout = try XCTUnwrap(call.bob.playout(for: "alice", at: call.bob.mediaTimeMicros))
        XCTAssertTrue(playout.isVoiceDriven)
        XCTAssertEqual(sender.statistics.cameraFrames, 0)
    }

    /// Muting closes the voice-driven mouth from the first frame after it, with every core busy:
    /// the mute and the level that drives the mouth are applied together, buffer by buffer, on the
    /// outgoing audio's own thread, so no frame captured after `setMuted(true)` has returned shows
    /// an open mouth however late anything else runs. Unmuting brings the mouth back.
    func testMutingClosesTheVoiceDrivenMouth() throws {
        let call = try startCall("Now I keep talking for a while, on and on, so that you can hear me, then not hear me while I am muted, and then hear me again when I unmute myself.")
        defer { end(call) }
        let sender = ExpressionSender(session: call.alice, hasCamera: false, seed: 1)
        sender.start()
        defer { sender.stop() }
        let deadline = Date().addingTimeInterval(15)
        while call.alice.audioFileStartMicros(for: "bob") == nil, Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        _ = try XCTUnwrap(call.alice.audioFileStartMicros(for: "bob"), "the call did not connect within 15 s")
        Thread.sleep(forTimeInterval: 2)
        let load = BusyCores()
        defer { load.stop() }
        Thread.sleep(forTimeInterval: 0.3)
        // The mute's moment is when setMuted returns: audio captured from then on is muted.
        call.alice.setMuted(true)
        let mutedAt = call.alice.mediaTimeMicros
        Thread.sleep(forTimeInterval: 2)
        let unmutedAt = call.alice.mediaTimeMicros
        call.alice.setMuted(false)
        Thread.sleep(forTimeInterval: 2.5)
        load.stop()
        // As alice stamped them: bob receives them on the connection's clock.
        let clock = try XCTUnwrap(call.alice.clock(for: "bob"))
        let frames = call.received.withLock { $0 }.map { clock.original(of: $0.frame) }
        func jaw(_ from: UInt64, _ to: UInt64) -> [Float] {
            frames.filter { $0.captureTimeMicros >= from && $0.captureTimeMicros < to }.map { $0.expression[.jawOpen] }
        }
        // A level is timed at its buffer's middle: the first buffer captured wholly after the mute
        // is timed at most one buffer (10 ms) and a half after it. Unmuting, like muting, applies to
        // the audio sent from then on, which includes the last buffers captured before it on a busy
        // machine: the judged span ends 300 ms before the unmute.
        let firstAfterMute = mutedAt + 15_000, lastJudged = unmutedAt - 300_000
        let before = jaw(mutedAt - 1_500_000, mutedAt), muted = jaw(firstAfterMute, lastJudged), after = jaw(unmutedAt + 300_000, unmutedAt + 2_300_000)
        let open = frames.filter { $0.captureTimeMicros >= firstAfterMute && $0.captureTimeMicros < unmutedAt && $0.expression[.jawOpen] > 0 }
        print("muting with \(load.threads) busy threads: \(muted.count) frames while muted, open ones at \(open.map { (Int64($0.captureTimeMicros) - Int64(mutedAt)) / 1000 }) ms after muting")
        print("muting: jaw up to \(before.max() ?? 0) before, \(muted.max() ?? 0) while muted, \(after.max() ?? 0) after")
        XCTAssertGreaterThan(before.max() ?? 0, 0.3)
        XCTAssertGreaterThan(muted.count, 35, "frames stopped while muted")
        XCTAssertEqual(muted.max() ?? 1, 0, "the mouth was open in a frame captured after the mute")
        XCTAssertGreaterThan(after.max() ?? 0, 0.3, "the mouth did not move again after unmuting")
        XCTAssertTrue(frames.allSatisfy(\.isVoiceDriven))
    }

    /// A sender that is stopped, or released without `stop()`, lets go of its session at once, though
    /// no audio level ever comes (a session alone, never started): nothing keeps the session, its loop
    /// and its thread alive after the call.
    func testASenderStoppedOrReleasedLetsGoOfItsSession() throws {
        for stops in [true, false] {
            weak var session: CallSession?
            weak var sender: ExpressionSender?
            do {
                let alone = CallSession(configuration: .init(server: URL(string: "ws://127.0.0.1:9/ws")!, room: "voice",
                                                             user: "alice", token: "v1.unused"))
                let voice = ExpressionSender(session: alone, hasCamera: false, seed: 1)
                voice.start()
                if stops { voice.stop() }
                session = alone; sender = voice
            }
            let deadline = Date().addingTimeInterval(3)
            while session != nil || sender != nil, Date() < deadline { Thread.sleep(forTimeInterval: 0.02) }
            XCTAssertNil(sender, stops ? "a stopped sender is still alive" : "a released sender is still alive")
            XCTAssertNil(session, stops ? "a stopped sender still holds its session" : "a released sender still holds its session")
        }
    }

    func testALostFaceHandsOverToTheVoiceAfterASecondAndBackWhenItReturns() throws {
        let call = try startCall("I am talking while I move out of view of my camera, and then I come back again to show my face.")
        defer { end(call) }
        let deadline = Date().addingTimeInterval(15)
        while call.alice.audioFileStartMicros(for: "bob") == nil, Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        _ = try XCTUnwrap(call.alice.audioFileStartMicros(for: "bob"), "the call did not connect within 15 s")
        // The camera starts with the sender, as in `veil call`.
        let sender = ExpressionSender(session: call.alice, hasCamera: true, seed: 9)
        sender.start()
        defer { sender.stop() }

        // Alice's camera at 30 fps: her face (a smile no voice would make) for 1.5 s, out of view
        // for 2.5 s, back for 1.5 s.
        var face = VeilCore.Expression(headPose: HeadPose(yaw: 12))
        face[.mouthSmileLeft] = 0.8
        face[.mouthSmileRight] = 0.8
        var lostAt: UInt64 = 0, backAt: UInt64 = 0
        var sent: [(time: UInt64, state: ExpressionFrame.State, out: Bool)] = []
        let start = call.alice.mediaTimeMicros
        var sequence: UInt32 = 0
        while true {
            let now = call.alice.mediaTimeMicros
            let t = Double(now - start) / 1e6
            if t >= 5.5 { break }
            let lost = t >= 1.5 && t < 4
            if lost, lostAt == 0 { lostAt = now }
            if !lost, t >= 4, backAt == 0 { backAt = now }
            let frame = ExpressionFrame(sequence: sequence, captureTimeMicros: now, state: lost ? .lost : .tracked, expression: face)
            sequence &+= 1
            sent.append((now, frame.state, sender.send(cameraFrame: frame)))
            Thread.sleep(forTimeInterval: 1.0 / 30)
        }
        Thread.sleep(forTimeInterval: 0.5)

        // As alice stamped them: bob receives them on the connection's clock.
        let clock = try XCTUnwrap(call.alice.clock(for: "bob"))
        let frames = call.received.withLock { $0 }.map { clock.original(of: $0.frame) }
        func isFace(_ f: ExpressionFrame) -> Bool { f.state == .tracked && !f.isVoiceDriven }
        // Before: the face. During the first second of the loss: the camera's lost frames.
        XCTAssertGreaterThan(frames.filter { $0.captureTimeMicros < lostAt && isFace($0) }.count, 30)
        XCTAssertTrue(frames.filter { $0.captureTimeMicros < lostAt }.allSatisfy(isFace))
        let lostFrames = frames.filter { $0.state == .lost }
        let lastLost = try XCTUnwrap(lostFrames.map(\.captureTimeMicros).max(), "no lost frame arrived")
        XCTAssertGreaterThanOrEqual(lastLost - lostAt, 800_000, "lost frames stopped too early")
        XCTAssertLessThan(lastLost - lostAt, 1_100_000, "lost frames went on too long")
        // Then the voice: voice-driven frames from about a second after the loss until the face is back.
        let voice = frames.filter(\.isVoiceDriven)
        let firstVoice = try XCTUnwrap(voice.map(\.captureTimeMicros).min(), "no voice-driven frame arrived")
        let lastVoice = try XCTUnwrap(voice.map(\.captureTimeMicros).max())
        print("face lost at 1.5 s: lost frames for \((lastLost - lostAt) / 1000) ms, voice-driven frames \((firstVoice - lostAt) / 1000)…\((lastVoice - lostAt) / 1000) ms, face back at \((backAt - lostAt) / 1000) ms; \(voice.count) voice frames, jaw max \(voice.map { $0.expression[.jawOpen] }.max() ?? 0)")
        // Voice frames carry their audio's capture time, which trails the moment of the handover by
        // the capture buffer and the hop to the sender (tens of ms; more on a loaded machine).
        XCTAssertGreaterThanOrEqual(firstVoice, lostAt + 850_000)
        XCTAssertLessThan(firstVoice, lostAt + 1_300_000)
        XCTAssertGreaterThan(voice.count, 30)
        XCTAssertGreaterThan(voice.map { $0.expression[.jawOpen] }.max() ?? 0, 0.2, "alice spoke, the voice-driven mouth stayed shut")
        XCTAssertTrue(voice.allSatisfy { $0.expression[.mouthSmileLeft] == 0 }, "a voice-driven frame carried the face's smile")
        // The face is back: its frames from its first tracked frame on, and no voice after it.
        XCTAssertLessThan(lastVoice, backAt + 50_000, "voice-driven frames went on after the face returned")
        XCTAssertGreaterThanOrEqual(lastVoice + 400_000, backAt, "the voice stopped long before the face returned")
        let back = frames.filter { $0.captureTimeMicros >= backAt }
        XCTAssertGreaterThan(back.filter(isFace).count, 30)
        XCTAssertEqual(back.filter(isFace).map(\.captureTimeMicros).min(), backAt, "the first frame after the face returned was not sent")
        XCTAssertEqual(Set(frames.map(\.sequence)).count, frames.count, "sequence numbers repeat")
        XCTAssertTrue(sent.filter { $0.time >= backAt || $0.time < lostAt }.allSatisfy(\.out))
        XCTAssertEqual(call.bob.playout(for: "alice", at: call.bob.mediaTimeMicros)?.isVoiceDriven, false)
    }
}

/// Pearson correlation.
private func pearson(_ a: [Double], _ b: [Double]) -> Double {
    let n = Double(min(a.count, b.count))
    guard n > 1 else { return 0 }
    let ma = a.prefix(Int(n)).reduce(0, +) / n, mb = b.prefix(Int(n)).reduce(0, +) / n
    var sab = 0.0, saa = 0.0, sbb = 0.0
    for i in 0..<Int(n) {
        sab += (a[i] - ma) * (b[i] - mb)
        saa += (a[i] - ma) * (a[i] - ma)
        sbb += (b[i] - mb) * (b[i] - mb)
    }
    return saa > 0 && sbb > 0 ? sab / (saa * sbb).squareRoot() : 0
}

/// One spinning thread per core, as a busy machine would have, until `stop()`.
final class BusyCores: Sendable {
    let threads = ProcessInfo.processInfo.activeProcessorCount
    private let running = Mutex(true)

    init() {
        for _ in 0..<threads {
            Thread.detachNewThread { [self] in
                var x = 1.0
                while running.withLock({ $0 }) {
                    for i in 0..<100_000 { x = (x * 1.000001 + Double(i)).truncatingRemainder(dividingBy: 1e9) }
                }
                if x < 0 { print(x) }  // keeps the loop from being optimised away
            }
        }
    }

    func stop() { running.withLock { $0 = false } }
}
