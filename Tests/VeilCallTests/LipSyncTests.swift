import Foundation
import Synchronization
import VeilBench
@testable import VeilCall
import VeilCore
import VeilMedia
import VeilServer
import XCTest

/// Lip-sync measured end to end, without trusting the playout mapping it tests: alice's voice is a
/// file of tone bursts and her avatar's mouth opens exactly while a burst sounds (stamped on the
/// clock the file is sent on, as a camera frame would be). Bob hears the voice through a sink that
/// plays in real time, and draws alice's avatar at its own pace; the test then finds the delay
/// between the bursts he heard and the mouth he drew.
final class LipSyncTests: XCTestCase {
    /// On/off intervals (s) of the burst pattern, alternating on, off, on, ...; irregular so that
    /// only one alignment matches.
    static func pattern(seconds: Double) -> [Double] {
        var random = SplitMix64(seed: 0x1195_5EED)
        var intervals: [Double] = [0.4]  // starts silent
        var total = 0.4
        while total < seconds {
            let length = 0.15 + Double(random.next() % 300) / 1000
            intervals.append(length)
            total += length
        }
        return intervals
    }

    /// Whether a burst sounds `t` seconds into the pattern.
    static func sounding(_ t: Double, _ intervals: [Double]) -> Bool {
        guard t >= 0 else { return false }
        var edge = 0.0
        for (i, length) in intervals.enumerated() {
            edge += length
            if t < edge { return i % 2 == 1 }
        }
        return false
    }

    /// The pattern as 48 kHz audio: a 440 Hz tone at amplitude 0.5 with 3 ms ramps.
    static func voice(_ intervals: [Double], seconds: Double) -> WAVAudio {
        let rate = 48_000
        var samples = [Int16](repeating: 0, count: Int(seconds * Double(rate)))
        var start = 0.0
        for (i, length) in intervals.enumerated() {
            defer { start += length }
            guard i % 2 == 1 else { continue }
            let first = Int(start * Double(rate)), count = Int(length * Double(rate)), ramp = rate * 3 / 1000
            for n in 0..<count where first + n < samples.count {
                let envelope = min(1, Double(min(n, count - 1 - n)) / Double(ramp))
                samples[first + n] = Int16(0.5 * envelope * sin(2 * .pi * 440 * Double(n) / Double(rate)) * 32767)
            }
        }
        return WAVAudio(samples: samples, sampleRate: rate)
    }

    /// The audio lead (ms, mouth time − voice time) at which the heard bursts and the drawn mouth
    /// agree best within ±300 ms, and that agreement: both on/off signals on the receiver's clock,
    /// on a 5 ms grid over `from..<to`.
    static func bestLead(sound: [(time: UInt64, rms: Float)], mouth: [(time: UInt64, jaw: Float)],
                         from: UInt64, to: UInt64) -> (lead: Int, agreement: Double) {
        let step: UInt64 = 5_000
        guard to > from + step else { return (0, 0) }
        func grid(_ samples: [(UInt64, Bool)]) -> [Bool?] {
            var cells = [Bool?](repeating: nil, count: Int((to - from) / step))
            for (time, on) in samples where time >= from && time < to { cells[Int((time - from) / step)] = on }
            // Fill the gaps between samples with the previous value (the screen holds its picture).
            var last: Bool?
            for i in cells.indices { if let v = cells[i] { last = v } else { cells[i] = last } }
            return cells
        }
        let audio = grid(sound.map { ($0.time, $0.rms > 0.15) })
        let lips = grid(mouth.map { ($0.time, $0.jaw > 0.5) })
        var best = (lead: 0, agreement: 0.0)
        for shift in -60...60 {
            var same = 0, compared = 0
            for i in audio.indices {
                let j = i + shift
                guard j >= 0, j < lips.count, let a = audio[i], let m = lips[j] else { continue }
                compared += 1
                if a == m { same += 1 }
            }
            let agreement = compared == 0 ? 0 : Double(same) / Double(compared)
            if agreement > best.agreement { best = (shift * Int(step) / 1000, agreement) }
        }
        return best
    }

    /// What a receiver heard, in 5 ms slices stamped when the sink played them.
    static func slices(_ audio: ReceivedAudio, heardAt now: UInt64) -> [(time: UInt64, rms: Float)] {
        let slice = audio.sampleRate / 200
        var slices: [(time: UInt64, rms: Float)] = []
        var start = 0
        while start + slice <= audio.samples.count {
            let part = audio.samples[start..<start + slice]
            slices.append((now + UInt64(start * 1_000_000 / audio.sampleRate), (part.reduce(0) { $0 + $1 * $1 } / Float(slice)).squareRoot()))
            start += slice
        }
        return slices
    }

    func testTheMouthMovesWithTheVoiceWithinTheLipSyncWindow() throws {
        try PeerConnection.prepare()
        let seconds = 11.0
        let intervals = Self.pattern(seconds: seconds)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("veil-lipsync-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let voiceFile = directory.appendingPathComponent("bursts.wav")
        try Self.voice(intervals, seconds: seconds).write(to: voiceFile)

        let secret = ServerSecret.random()
        let server = RoomServer(configuration: .init(secret: secret, port: 0))
        let url = try server.start()
        defer { server.stop() }
        let authority = TokenAuthority(secret: secret)

        var aliceConfiguration = CallSession.Configuration(server: url, room: "sync", user: "alice",
                                                           token: try authority.issue(room: "sync", user: "alice", lifetime: 600),
                                                           audioInput: .file(voiceFile))
        aliceConfiguration.statisticsInterval = 60
        // What bob hears: 5 ms slices of each buffer, stamped when the sink played it.
        let heard = Mutex<[(time: UInt64, rms: Float)]>([])
        var bobConfiguration = CallSession.Configuration(server: url, room: "sync", user: "bob",
                                                         token: try authority.issue(room: "sync", user: "bob", lifetime: 600),
                                                         audioInput: .silence)
        bobConfiguration.statisticsInterval = 60
        bobConfiguration.audioOutput = { _ in
            .callback { audio in
                let slices = LipSyncTests.slices(audio, heardAt: PeerConnection.mediaTimeMicros)
                heard.withLock { $0.append(contentsOf: slices) }
            }
        }
        let alice = CallSession(configuration: aliceConfiguration)
        let bob = CallSession(configuration: bobConfiguration)
        alice.start()
        bob.start()

        // Alice's "camera": 30 frames/s, the mouth open exactly while her voice sounds.
        let running = Mutex(true)
        let camera = Thread {
            var sequence: UInt32 = 0
            while running.withLock({ $0 }) {
                let now = alice.mediaTimeMicros
                if let start = alice.audioFileStartMicros(for: "bob") {
                    var expression = VeilCore.Expression()
                    let t = Double(Int64(bitPattern: now &- start)) / 1e6
                    expression[.jawOpen] = Self.sounding(t, intervals) ? 1 : 0
                    alice.send(ExpressionFrame(sequence: sequence, captureTimeMicros: now, state: .tracked, expression: expression))
                    sequence &+= 1
                }
                Thread.sleep(forTimeInterval: 1.0 / 30)
            }
        }
        // Bob's screen: draws alice every 10 ms.
        let drawn = Mutex<[(time: UInt64, jaw: Float)]>([])
        let screen = Thread {
            while running.withLock({ $0 }) {
                let now = bob.mediaTimeMicros
                if let playout = bob.playout(for: "alice", at: now), playout.source != .neutral {
                    drawn.withLock { $0.append((now, playout.expression[.jawOpen])) }
                }
                Thread.sleep(forTimeInterval: 0.01)
            }
        }
        camera.start(); screen.start()
        defer { running.withLock { $0 = false } }

        let deadline = Date().addingTimeInterval(10)
        while alice.audioFileStartMicros(for: "bob") == nil, Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        let fileStart = try XCTUnwrap(alice.audioFileStartMicros(for: "bob"), "the call did not connect within 10 s")
        Thread.sleep(forTimeInterval: seconds - 0.5)
        running.withLock { $0 = false }
        Thread.sleep(forTimeInterval: 0.1)
        let done = DispatchSemaphore(value: 0)
        Task { await alice.leave(); await bob.leave(); done.signal() }
        _ = done.wait(timeout: .now() + 10)

        let sound = heard.withLock { $0 }, mouth = drawn.withLock { $0 }
        XCTAssertFalse(sound.isEmpty, "bob heard nothing")
        XCTAssertFalse(mouth.isEmpty, "bob drew nothing")
        let from = fileStart + 2_500_000, to = fileStart + UInt64((seconds - 1) * 1e6)
        XCTAssertGreaterThan(sound.filter { $0.time >= from && $0.time < to && $0.rms > 0.15 }.count, 200, "too few bursts heard to measure")
        let best = Self.bestLead(sound: sound, mouth: mouth, from: from, to: to)
        print("lip-sync end to end: the mouth moves \(best.lead) ms after the voice (agreement \(String(format: "%.3f", best.agreement)))")
        XCTAssertGreaterThan(best.agreement, 0.9, "the drawn mouth does not follow the heard voice")
        XCTAssertTrue(LipSync.isAcceptable(audioLeadMicros: Int64(best.lead) * 1000),
                      "audio leads the mouth by \(best.lead) ms; allowed: +45 / −125 ms")
    }

    /// The same measurement through a network that delays every packet by 200 ± 50 ms (the
    /// in-process relay of `DelayTests`): the avatar must still move with the voice as heard.
    func testTheMouthMovesWithTheVoiceThroughADelayingNetwork() async throws {
        guard let host = TURNRelayTests.hostAddress() else { throw XCTSkip("no IPv4 address besides loopback for the relay") }
        let seconds = 11.0
        let intervals = Self.pattern(seconds: seconds)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("veil-lipsync-relay-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let voiceFile = directory.appendingPathComponent("bursts.wav")
        try Self.voice(intervals, seconds: seconds).write(to: voiceFile)

        let relay = try UDPRelay(host: host, impairment: .init(delayMillis: 200, jitterMillis: 50), seed: 0x11_95)
        defer { relay.close() }
        var configuration = PeerConfiguration()
        configuration.rtcpIntervalMillis = 250
        // bob (the answerer) speaks the bursts and sends the mouth; alice hears and draws.
        let pair = try PeerPair(offererInput: .silence, answererInput: .file(voiceFile), configuration: configuration, relay: relay)
        let alice = pair.offerer, bob = pair.answerer
        try await eventually("both peers connected through the relay", within: 20) {
            alice.state == .connected && bob.state == .connected && alice.isDataChannelOpen && bob.isDataChannelOpen
        }
        try await eventually("bob's voice file started", within: 5) { bob.audioFileStartMicros != nil }
        let fileStart = try XCTUnwrap(bob.audioFileStartMicros)

        let camera = TestCamera(bob) { now in
            var expression = VeilCore.Expression()
            expression[.jawOpen] = Self.sounding(Double(Int64(bitPattern: now &- fileStart)) / 1e6, intervals) ? 1 : 0
            return expression
        }
        // Alice's screen, as `CallSession.playout(for:at:)` draws: the jitter buffer at the playout
        // of bob's voice.
        let screen = TestScreen(alice, frames: pair.offererSaw, picturesPerSecond: 100)
        try await Task.sleep(nanoseconds: UInt64((seconds - 0.5) * 1e9))
        camera.stop(); screen.stop()
        try await Task.sleep(nanoseconds: 100_000_000)

        // What alice heard, sliced, on her clock: the times her sink played each buffer.
        let saw = pair.offererSaw
        let heard = zip(saw.audio.withLock { $0 }, saw.heardMicros.withLock { $0 }).flatMap { Self.slices($0, heardAt: $1) }
        let mouth = screen.pictures.filter { $0.playout.source != .neutral }.map { (time: $0.localMicros, jaw: $0.playout.expression[.jawOpen]) }
        // bob's file time 2.5 s ... 10 s, as heard by alice (about 200 ms later plus her playout).
        let lag = UInt64(alice.playoutMapping.map { max(0, $0.offsetMicros) } ?? 0) + UInt64(alice.playoutMapping?.latencyMicros ?? 0)
        let from = fileStart + 2_500_000 + lag, to = fileStart + UInt64((seconds - 1) * 1e6) + lag
        XCTAssertGreaterThan(heard.filter { $0.time >= from && $0.time < to && $0.rms > 0.15 }.count, 200, "too few bursts heard to measure")
        let best = Self.bestLead(sound: heard, mouth: mouth, from: from, to: to)
        let rtt = await alice.statistics().roundTripTimeMillis ?? 0
        print("lip-sync through 200 ± 50 ms of delay (RTT \(Int(rtt)) ms): the mouth moves \(best.lead) ms after the voice (agreement \(String(format: "%.3f", best.agreement)))")
        XCTAssertGreaterThan(rtt, 300, "the relay did not delay the call")
        XCTAssertGreaterThan(best.agreement, 0.9, "the drawn mouth does not follow the heard voice")
        XCTAssertTrue(LipSync.isAcceptable(audioLeadMicros: Int64(best.lead) * 1000),
                      "audio leads the mouth by \(best.lead) ms; allowed: +45 / −125 ms")
        try await pair.close()
    }
}
