import Foundation
import Synchronization
@testable import VeilCall
import VeilCore
import VeilServer
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Real PulseAudio capture, playback and output switching, against a private PulseAudio server
/// with two null sinks, "speaker" (the default) and "headset" (see `PrivatePulseServer`). What
/// plays on a sink is heard on its ".monitor" source. Skipped when pulseaudio is not installed.
final class PulseAudioTests: XCTestCase {
    /// A tone's presence, loudness and frequency in some audio, for assertions that say what was heard.
    ///
    /// `coverage` is the fraction of 10 ms blocks that are loud, and the frequency is measured on
    /// those: pulsesink resyncs once, 1-2 s into a call ("Unexpected discontinuity in audio
    /// timestamps of ±70-160 ms, resyncing"), which can leave one short gap of silence.
    struct Heard: CustomStringConvertible {
        var seconds: Double
        var rms: Float
        var coverage: Double
        var frequency: Double
        init(_ samples: [Float]) {
            seconds = Double(samples.count) / 48_000
            rms = VeilCallTests.rms(samples)
            let blocks = stride(from: 0, to: samples.count - 479, by: 480).map { samples[$0..<$0 + 480] }
            let loud = blocks.filter { VeilCallTests.rms(Array($0)) > 0.05 }
            coverage = blocks.isEmpty ? 0 : Double(loud.count) / Double(blocks.count)
            frequency = zeroCrossingFrequency(loud.flatMap { $0 })
        }
        var description: String {
            String(format: "%.2f s, rms %.3f, %.0f %% loud at %.0f Hz", seconds, rms, coverage * 100, frequency)
        }
        /// At least a third of a second, three quarters of it a sine within 5 % of `expected` Hz.
        func isTone(_ expected: Double) -> Bool { seconds > 0.3 && coverage >= 0.75 && abs(frequency - expected) < expected * 0.05 }
        /// At least a third of a second of (near) digital silence.
        var isSilent: Bool { seconds > 0.3 && rms < 0.01 }
    }

    /// What a recording holds for the last half second.
    static func lastHalfSecond(of recording: PulseRecording) -> Heard {
        Heard(recording.samples(from: PeerConnection.mediaTimeMicros - 500_000))
    }

    /// (a) Capture: a tone played into the "speaker" sink, captured from "speaker.monitor" by the
    /// sender's pulsesrc, arrives at the receiver as that tone.
    func testPulseCaptureFromAMonitorSourceReachesThePeer() async throws {
        let server = try PrivatePulseServer()
        defer { server.stop() }
        try server.playTone(frequency: 523, into: "speaker")

        let pair = try PeerPair(offererInput: .pulse(device: "speaker.monitor"), answererInput: .silence)
        try await pair.waitUntilConnected()
        let connected = PeerConnection.mediaTimeMicros
        try await Task.sleep(nanoseconds: 2_500_000_000)
        let heard = Heard(pair.answererSaw.samples(after: connected + 700_000))
        print("pulse capture: the receiver heard \(heard) (sent: 523 Hz from speaker.monitor)")
        XCTAssertGreaterThan(heard.seconds, 1.2)
        XCTAssertTrue(heard.isTone(523), "\(heard)")
        XCTAssertTrue(pair.offererSaw.failures.isEmpty, "\(pair.offererSaw.failures)")
        await pair.assertPrivacyInvariants()
        try await pair.close()
    }

    /// (b) Playback: the receiver's `.pulse(device: "headset")` output plays the sender's tone on
    /// "headset", and nothing on "speaker".
    func testPulseOutputPlaysOnTheChosenSink() async throws {
        let server = try PrivatePulseServer()
        defer { server.stop() }
        let headset = try server.record("headset.monitor"), speaker = try server.record("speaker.monitor")

        let pair = try PeerPair(offererInput: .testTone(frequency: 440), answererInput: .silence,
                                answererOutput: .pulse(device: "headset"))
        try await pair.waitUntilConnected()
        let connected = PeerConnection.mediaTimeMicros
        try await Task.sleep(nanoseconds: 2_500_000_000)
        let onHeadset = Heard(headset.samples(from: connected + 1_000_000)), onSpeaker = Heard(speaker.samples(from: connected + 1_000_000))
        print("pulse output: headset.monitor \(onHeadset); speaker.monitor \(onSpeaker) (sent: 440 Hz)")
        // The sound server takes each block some tens of ms before it is heard; the playout's
        // target includes that lead, so the clean call plays through without gaps to conceal.
        let playout = pair.answerer.playoutStatistics
        let concealed = Double(playout.concealedSamples) / Double(max(playout.playedSamples, 1))
        print("pulse output: target delay \(playout.targetDelayMicros / 1000) ms (of which the sound server's \(playout.outputLeadMicros / 1000) ms), concealed \(String(format: "%.1f", concealed * 100)) %, late chunks \(playout.lateChunks) of \(playout.chunks)")
        XCTAssertLessThan(concealed, 0.02, "a clean call conceals nothing once the playout knows the output's lead: \(playout)")
        XCTAssertTrue(onHeadset.isTone(440), "the tone plays on the chosen sink: \(onHeadset)")
        XCTAssertTrue(onSpeaker.isSilent, "and not on the other: \(onSpeaker)")
        XCTAssertEqual(pair.answerer.audioOutputDevice, "headset")
        XCTAssertTrue(pair.answererSaw.failures.isEmpty, "\(pair.answererSaw.failures)")
        try await pair.close()
    }

    /// (c) Output switching during a call: the tone moves from "speaker" to "headset" (present
    /// there, gone from "speaker"), and back to the default sink with nil.
    func testSwitchingTheOutputMovesTheVoiceToAnotherSink() async throws {
        let server = try PrivatePulseServer()
        defer { server.stop() }
        let headset = try server.record("headset.monitor"), speaker = try server.record("speaker.monitor")

        let pair = try PeerPair(offererInput: .testTone(frequency: 440), answererInput: .silence,
                                answererOutput: .pulse(device: "speaker"))
        try await pair.waitUntilConnected()
        try await eventually("the tone playing on speaker") { Self.lastHalfSecond(of: speaker).isTone(440) }
        try await Task.sleep(nanoseconds: 1_000_000_000)
        let switched = PeerConnection.mediaTimeMicros
        let before = (speaker: Heard(speaker.samples(from: switched - 1_000_000, to: switched)),
                      headset: Heard(headset.samples(from: switched - 1_000_000, to: switched)))
        XCTAssertTrue(before.speaker.isTone(440), "before the switch, on speaker: \(before.speaker)")
        XCTAssertTrue(before.headset.isSilent, "before the switch, on headset: \(before.headset)")

        try pair.answerer.setAudioOutputDevice("headset")
        XCTAssertEqual(pair.answerer.audioOutputDevice, "headset")
        try await Task.sleep(nanoseconds: 1_500_000_000)
        let movedBack = PeerConnection.mediaTimeMicros
        let after = (speaker: Heard(speaker.samples(from: switched + 400_000, to: movedBack)),
                     headset: Heard(headset.samples(from: switched + 400_000, to: movedBack)))
        print("switch: before speaker \(before.speaker), headset \(before.headset); after speaker \(after.speaker), headset \(after.headset)")
        XCTAssertTrue(after.headset.isTone(440), "after the switch, on headset: \(after.headset)")
        XCTAssertTrue(after.speaker.isSilent, "after the switch, on speaker: \(after.speaker)")
        let streams = try server.pactl(["list", "short", "sink-inputs"]).split(separator: "\n").map { $0.split(separator: "\t").map(String.init) }
        XCTAssertEqual(streams.map { $0.dropFirst().first }, ["1"], "the sound server has the one stream on sink 1 (headset): \(streams)")

        // nil: the server's default sink, "speaker".
        try pair.answerer.setAudioOutputDevice(nil)
        XCTAssertEqual(pair.answerer.audioOutputDevice, "speaker")
        try await Task.sleep(nanoseconds: 1_500_000_000)
        let back = (speaker: Heard(speaker.samples(from: movedBack + 400_000)), headset: Heard(headset.samples(from: movedBack + 400_000)))
        print("switch back to the default: speaker \(back.speaker), headset \(back.headset)")
        XCTAssertTrue(back.speaker.isTone(440), "\(back.speaker)")
        XCTAssertTrue(back.headset.isSilent, "\(back.headset)")

        // Refusals: an unknown sink; an output that is not PulseAudio.
        XCTAssertThrowsError(try pair.answerer.setAudioOutputDevice("nonexistent")) {
            XCTAssertEqual(($0 as? PeerError)?.code, .invalidArgument)
            XCTAssertTrue("\($0)".contains("headset"), "the message lists the sinks: \($0)")
        }
        XCTAssertThrowsError(try pair.offerer.setAudioOutputDevice("headset")) {
            XCTAssertEqual(($0 as? PeerError)?.code, .invalidArgument, "the offerer's output is a callback")
        }
        XCTAssertTrue(pair.answererSaw.failures.isEmpty, "\(pair.answererSaw.failures)")
        try await pair.close()
        XCTAssertThrowsError(try pair.answerer.setAudioOutputDevice("headset")) {
            XCTAssertEqual(($0 as? PeerError)?.code, .closed)
        }
    }

    /// The sinks are listed from GStreamer's device monitor, with the default and form factor.
    func testAudioOutputDevicesListsTheServersSinks() throws {
        let server = try PrivatePulseServer()
        defer { server.stop() }
        let devices = try PeerConnection.audioOutputDevices()
        print("sinks: \(devices)")
        XCTAssertEqual(devices.map(\.name), ["headset", "speaker"])
        XCTAssertEqual(devices.filter(\.isDefault).map(\.name), ["speaker"], "the first null sink is the default")
        XCTAssertEqual(devices.map(\.formFactor), ["headset", "speaker"])
        XCTAssertFalse(devices.contains { $0.description.isEmpty })
    }

    /// Without a sound server there is nothing to list or switch to, and the error says why.
    func testNoSoundServerMeansNoDevices() throws {
        let saved = ProcessInfo.processInfo.environment["PULSE_SERVER"]
        setenv("PULSE_SERVER", "unix:/nonexistent/veil-test/native", 1)
        defer { if let saved { setenv("PULSE_SERVER", saved, 1) } else { unsetenv("PULSE_SERVER") } }
        XCTAssertEqual(try PeerConnection.audioOutputDevices(), [])
        XCTAssertThrowsError(try PeerConnection.resolveSink(nil, among: [])) {
            XCTAssertEqual(($0 as? PeerError)?.code, .mediaFailed)
        }
    }

    /// `CallSession.setAudioOutputDevice` moves every remote voice, in a real call through the
    /// room server: alice's tone plays on bob's default sink ("speaker"), then on "headset".
    func testCallSessionSwitchesTheOutputOfTheCall() async throws {
        let server = try PrivatePulseServer()
        defer { server.stop() }
        let headset = try server.record("headset.monitor"), speaker = try server.record("speaker.monitor")
        try PeerConnection.prepare()
        let secret = ServerSecret.random()
        let room = RoomServer(configuration: .init(secret: secret, port: 0))
        let url = try room.start()
        defer { room.stop() }
        let authority = TokenAuthority(secret: secret)
        func configuration(_ user: String, input: AudioInput, output: AudioOutput) throws -> CallSession.Configuration {
            CallSession.Configuration(server: url, room: "lobby", user: user, token: try authority.issue(room: "lobby", user: user, lifetime: 600),
                                      audioInput: input, audioOutput: { _ in output })
        }
        let alice = CallSession(configuration: try configuration("alice", input: .testTone(frequency: 440), output: .discard))
        let bob = CallSession(configuration: try configuration("bob", input: .silence, output: .pulse(device: nil)))
        let bobSaw = Mutex<[CallSession.Event]>([])
        Task { for await event in bob.events { bobSaw.withLock { $0.append(event) } } }
        alice.start()
        bob.start()
        try await eventually("bob connected to alice", within: 15) {
            bobSaw.withLock { $0.contains { if case .peerState("alice", .connected) = $0 { true } else { false } } }
        }
        XCTAssertEqual(try bob.audioOutputDevices().map(\.name), ["headset", "speaker"])
        XCTAssertNil(bob.audioOutputDevice)
        try await eventually("alice's tone on bob's default sink") { Self.lastHalfSecond(of: speaker).isTone(440) }
        try await Task.sleep(nanoseconds: 1_000_000_000)
        let switched = PeerConnection.mediaTimeMicros
        let before = Heard(speaker.samples(from: switched - 1_000_000, to: switched))
        XCTAssertTrue(before.isTone(440), "alice's tone on bob's default sink: \(before)")
        XCTAssertTrue(Heard(headset.samples(from: switched - 1_000_000, to: switched)).isSilent)

        try bob.setAudioOutputDevice("headset")
        XCTAssertEqual(bob.audioOutputDevice, "headset")
        XCTAssertThrowsError(try bob.setAudioOutputDevice("nonexistent")) { XCTAssertEqual(($0 as? PeerError)?.code, .invalidArgument) }
        XCTAssertEqual(bob.audioOutputDevice, "headset", "a refused switch changes nothing")
        try await Task.sleep(nanoseconds: 1_500_000_000)
        let onHeadset = Heard(headset.samples(from: switched + 400_000)), onSpeaker = Heard(speaker.samples(from: switched + 400_000))
        print("session switch: before speaker \(before); after headset \(onHeadset), speaker \(onSpeaker)")
        XCTAssertTrue(onHeadset.isTone(440), "\(onHeadset)")
        XCTAssertTrue(onSpeaker.isSilent, "\(onSpeaker)")
        let errors = bobSaw.withLock { $0.compactMap { if case .error(let code, let message) = $0 { "\(code): \(message)" } else { nil } } }
        XCTAssertTrue(errors.isEmpty, "\(errors)")
        try await withDeadline("leaving", seconds: 10) {
            await bob.leave()
            await alice.leave()
        }
    }
}
