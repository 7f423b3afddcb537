import Foundation
import Synchronization
import VeilBench
@testable import VeilCall
import VeilCore
import XCTest

/// The avatar and the voice on a slow, jittery network, on a real call: all traffic between the
/// two peers (ICE, DTLS, SRTP, SCTP) goes through a `UDPRelay` that delays each datagram by the
/// one-way delay ± uniform jitter (order-preserving) and may drop it. As in `LossTests`, bob sends
/// a known smooth expression signal at 30 frames/s and a tone; alice draws the signal at 60
/// pictures/s through an `ExpressionJitterBuffer` at the playout time of bob's voice. The test
/// checks that the call connects, that frames and voice arrive, that the avatar stays in lip-sync
/// with the voice as actually played, that no backlog builds, and that the capture → picture delay
/// grows by about the delay added. docs/reliability.md ("Delay") has the figures of the last run.
final class DelayTests: XCTestCase {
    /// One network setting.
    struct Setting {
        var delayMillis: Double
        var jitterMillis: Double
        var loss: Double
        var title: String {
            (delayMillis == 0 ? "0 ms" : String(format: "%.0f ± %.0f ms", delayMillis, jitterMillis))
                + (loss > 0 ? String(format: ", %.0f %% loss", loss * 100) : "")
        }
    }

    /// What one call showed.
    struct Measurement {
        var setting: Setting
        /// How long from creating the peers to both connected with the data channel open.
        var connectMillis = 0.0
        /// Whether the selected candidate pair's remote end is the relay, on both sides.
        var throughRelay = false
        /// Relay figures, bob → alice.
        var relayed = UDPRelay.Counts()
        /// Round-trip time the peers' RTCP reports (alice).
        var roundTripMillis = Double.nan
        /// Everything `LossTests` measures on the pictures and the voice.
        var pictures = LossTests.Measurement(loss: 0)
        /// Audio lead per picture (audio sender time playing when the picture is drawn − the
        /// picture's source time), from the audio buffers as played (their sender times come
        /// from the same RTCP mapping): p5, p50, p95, in ms. Positive: the voice is ahead of the mouth.
        var leadP5Millis = Double.nan, leadP50Millis = Double.nan, leadP95Millis = Double.nan
        /// How much later than the fastest packets the RTP jitter buffer stamps its packets at the
        /// end (alice, ms).
        var jitterBufferLagMillis = Double.nan
        /// What alice's playout did over the whole call, and its target at the end.
        var playout = AdaptivePlayout.Statistics()
    }

    func testTheAvatarStaysInSyncWithTheVoiceUnderDelayAndJitter() async throws {
        let host = try XCTUnwrap(TURNRelayTests.hostAddress(), "this machine has no IPv4 address besides loopback")
        let settings = [Setting(delayMillis: 0, jitterMillis: 0, loss: 0),
                        Setting(delayMillis: 80, jitterMillis: 20, loss: 0),
                        Setting(delayMillis: 200, jitterMillis: 50, loss: 0),
                        Setting(delayMillis: 200, jitterMillis: 50, loss: 0.1)]
        var results: [Measurement] = []
        for (index, setting) in settings.enumerated() {
            let base = results.first
            results.append(try await RealTimeBounds.measuredOnce("at \(setting.title)") { attempt in
                try await measure(setting, host: host, seed: 0xDE1A_0000 + UInt64(index) + UInt64(attempt - 1) << 8, seconds: 4)
            } bounds: { Self.bounds(of: $0, base: base ?? $0) })
        }
        print(Self.table(results))
    }

    /// What a call at one setting must show; `base` is the call without delay.
    static func bounds(of result: Measurement, base: Measurement) -> RealTimeBounds {
        var bounds = RealTimeBounds()
        let setting = result.setting, pictures = result.pictures
        // The path really went through the relay, and the relay did what it says.
        bounds.check(result.throughRelay, "the selected candidate pair does not go through the relay")
        bounds.greater(Double(result.relayed.forwarded), 150, "datagrams relayed bob → alice")
        // Order-preserving: a datagram waits for the one before it, so the delay applied lies in
        // delay ± jitter but its mean sits above the delay drawn.
        bounds.atLeast(result.relayed.smallestDelayMillis, setting.delayMillis - setting.jitterMillis - 1, "smallest delay applied")
        bounds.atMost(result.relayed.largestDelayMillis, setting.delayMillis + setting.jitterMillis + 1, "largest delay applied")
        bounds.atLeast(result.relayed.meanDelayMillis, setting.delayMillis - max(2, setting.jitterMillis / 2), "mean delay applied")
        bounds.atMost(result.relayed.meanDelayMillis, setting.delayMillis + max(2, setting.jitterMillis), "mean delay applied")
        let dropped = Double(result.relayed.dropped) / Double(max(result.relayed.received, 1))
        bounds.near(dropped, setting.loss, within: 0.05, "share of datagrams dropped")
        // Frames arrive.
        bounds.greater(Double(pictures.framesSent), 90, "frames sent")
        bounds.near(pictures.framesReceivedShare, 1 - setting.loss, within: 0.1, "share of frames received")
        bounds.greater(Double(pictures.pictures), 150, "pictures drawn")
        // The voice arrives: few dips without loss; with loss fewer dropouts than datagrams lost.
        bounds.less(pictures.voicePLC.dips, setting.loss > 0 ? 0.5 : 0.05, "share of voice windows below −6 dB")
        // The playout learns the jitter from the packets (its first second excluded), so on a
        // path with ±50 ms of jitter the first seconds measured here conceal a little more.
        bounds.less(pictures.voicePLC.dropouts, max(setting.loss, setting.jitterMillis >= 50 ? 0.05 : 0.02), "share of voice windows below −20 dB")
        // Smooth and faithful, mostly data.
        bounds.less(pictures.largestJump, 4, "largest jump of the avatar (× signal step)")
        bounds.less(pictures.jawError, 0.02, "jawOpen error")
        bounds.less(pictures.held + pictures.easing + pictures.neutral, 0.1, "share of concealed pictures")
        // In sync with the voice: by the playout mapping, and by the audio actually played.
        bounds.less(pictures.syncErrorP95Millis, 45, "pictures off their audio time, p95 (ms)")
        for lead in [result.leadP5Millis, result.leadP50Millis, result.leadP95Millis] {
            bounds.check(lead.isFinite && LipSync.isAcceptable(audioLeadMicros: Int64((lead * 1000).rounded())),
                         "audio lead \(lead) ms outside +45/−125 ms")
        }
        // No backlog: a handful of frames buffered, none dropped as late, and a delay that does not grow.
        bounds.atMost(Double(pictures.largestBuffer), 16, "frames buffered")
        bounds.atMost(Double(pictures.lateDropped), 0, "frames dropped as late")
        // The delay may rise once while the playout learns the path's jitter; it must not run away.
        bounds.less(pictures.delaySecondHalfMillis - pictures.delayFirstHalfMillis, 40, "growth of the delay over the run (ms)")
        // The capture → picture delay grows by about the delay added: the audio jitter buffer
        // anchors to the fastest packets (delay − jitter) and absorbs the rest in its latency.
        // After a lossy, slow handshake it may start anchored to a later packet and move back
        // within seconds: more room above then.
        // Against a clean path that shows what a clean path should: the picture 60–80 ms after
        // capture when the machine is idle (the voice's playout, and the frame after each moment).
        if setting.delayMillis == 0 { bounds.less(pictures.delaySecondHalfMillis, 100, "picture delay without delay (ms)") }
        let grown = pictures.delaySecondHalfMillis - base.pictures.delaySecondHalfMillis
        bounds.greater(grown, setting.delayMillis - setting.jitterMillis - 15, "picture delay added against 0 ms (ms)")
        bounds.less(grown, setting.delayMillis + setting.jitterMillis + (setting.loss > 0 ? 100 : 30), "picture delay added against 0 ms (ms)")
        return bounds
    }

    /// One call through a relay with `setting` for `seconds` of measurement.
    func measure(_ setting: Setting, host: String, seed: UInt64, seconds: Double) async throws -> Measurement {
        // A fresh relay for each attempt: a relay learns each side's address from its first
        // datagram, so the peers of a second attempt would otherwise be sent to the first's.
        let makeRelay = { (attempt: Int) in
            try UDPRelay(host: host, impairment: .init(delayMillis: setting.delayMillis, jitterMillis: setting.jitterMillis,
                                                       loss: setting.loss),
                         seed: seed &+ UInt64(attempt - 1) << 32)
        }
        var relay = try makeRelay(1)
        defer { relay.close() }
        var configuration = PeerConfiguration()
        configuration.rtcpIntervalMillis = 250  // the playout mapping needs a sender report
        var pair: PeerPair
        var attempt = 1
        while true {
            // The last attempt connects over the path without its loss, and the loss starts once the
            // call is up: what is measured here is the call under loss, and twice the handshake has
            // been tried under it (GStreamer's DTLS handshake can fail under loss and a 400 ms round
            // trip: "runtime check failed: (!priv->bio_buffer)", seen three times in a row once).
            let lossDeferred = setting.loss > 0 && attempt == 3
            if lossDeferred { relay.impairment.loss = 0 }
            pair = try PeerPair(offererInput: .testTone(frequency: 440), answererInput: .testTone(frequency: 660),
                                configuration: configuration, relay: relay)
            let alice = pair.offerer, bob = pair.answerer
            do {
                // Longer than `PeerPair.waitUntilConnected`: with 10 % loss on a 400 ms round trip, the
                // DTLS and SCTP handshakes wait for their retransmission timers (seen: 6.6 and 9.6 s).
                try await eventually("both peers connected with the data channel open", within: 20) {
                    alice.state == .connected && bob.state == .connected && alice.isDataChannelOpen && bob.isDataChannelOpen
                }
                if lossDeferred {
                    relay.impairment.loss = setting.loss
                    print("\(setting.title): connected with the loss held off; the loss applies from now on")
                }
                break
            } catch {
                let diagnostics = pair.diagnostics
                let connectedWithoutChannel = alice.state == .connected && bob.state == .connected
                let failed = alice.state == .failed || bob.state == .failed
                try? await pair.close()
                // Under loss the channel's opening message can be lost for good, leaving one side
                // connected without the channel, and on a busy machine the handshake's
                // retransmissions can run out, failing the connection. A call renegotiates in both
                // cases (`CallSessionTests.testAConnectionWithoutAnExpressionChannelIsRenegotiated`,
                // `PeerRecoveryPolicy`); this test, below the session, places the call again, up to
                // twice (the last time as above), and says so.
                if setting.loss > 0, connectedWithoutChannel || failed, attempt < 3 {
                    print("\(setting.title): " + (failed ? "the connection failed" : "connected without the expression channel on one side")
                          + "; calling again")
                    attempt += 1
                    relay.close()
                    relay = try makeRelay(attempt)
                    continue
                }
                throw DeadlineExceeded(description: "\(error); \(diagnostics)")
            }
        }
        let alice = pair.offerer, bob = pair.answerer
        var result = Measurement(setting: setting)
        result.connectMillis = Double(PeerConnection.mediaTimeMicros - pair.startMicros) / 1000
        let framesBefore = pair.offererSaw.frames.withLock { $0.count }

        let filmed = try await LossTests.film(pair, seconds: seconds, skipping: framesBefore,
                                              settleMicros: UInt64(setting.delayMillis * 1000),
                                              drainSeconds: 0.3 + setting.delayMillis / 1000)
        let statistics = await alice.statistics(), bobStatistics = await bob.statistics()
        result.roundTripMillis = statistics.roundTripTimeMillis ?? .nan
        let relayEnd = { (pair: CandidatePair?) in pair.map { $0.remote.address == relay.host && [Int(relay.portFacingA), Int(relay.portFacingB)].contains($0.remote.port) } ?? false }
        result.throughRelay = relayEnd(statistics.candidatePair) && relayEnd(bobStatistics.candidatePair)
        result.relayed = relay.counts.bToA  // the whole call, handshakes included

        result.pictures = LossTests.measurement(loss: setting.loss, of: filmed, pair: pair)
        result.jitterBufferLagMillis = Double(alice.playout.jitterBufferLagMicros ?? 0) / 1000
        result.playout = alice.playoutStatistics
        let leads = Self.audioLeads(filmed.pictures, heard: filmed.heard)
        result.leadP5Millis = percentile(leads, 0.05)
        result.leadP50Millis = percentile(leads, 0.5)
        result.leadP95Millis = percentile(leads, 0.95)
        try await pair.close()
        return result
    }

    /// For each data picture: the sender time of the audio playing when it was drawn (from the
    /// buffer played last before that moment) minus the picture's source time, in ms.
    static func audioLeads(_ pictures: [LossTests.Picture], heard: [ReceivedAudio]) -> [Double] {
        let played = heard.compactMap { buffer in buffer.senderMediaTimeMicros.map { (playout: buffer.playoutTimeMicros, sender: $0) } }
            .sorted { $0.playout < $1.playout }
        guard !played.isEmpty else { return [] }
        var leads: [Double] = []
        var index = 0
        for picture in pictures.sorted(by: { $0.localMicros < $1.localMicros }) {
            guard picture.playout.source == .frame || picture.playout.source == .interpolated,
                  let source = picture.playout.sourceTimeMicros else { continue }
            while index + 1 < played.count, played[index + 1].playout <= picture.localMicros { index += 1 }
            let buffer = played[index]
            guard buffer.playout <= picture.localMicros, picture.localMicros - buffer.playout < 100_000 else { continue }
            let audioTime = buffer.sender &+ (picture.localMicros - buffer.playout)
            leads.append(Double(LipSync.audioLeadMicros(audioMediaTimeMicros: audioTime, sourceTimeMicros: source)) / 1000)
        }
        return leads
    }

    /// The figures as docs/reliability.md shows them.
    static func table(_ results: [Measurement]) -> String {
        func percent(_ value: Double) -> String { String(format: "%.1f %%", value * 100) }
        func number(_ value: Double, _ digits: Int = 0) -> String { String(format: "%.\(digits)f", value) }
        let base = results.first?.pictures.delaySecondHalfMillis ?? .nan
        let rows: [(String, (Measurement) -> String)] = [
            ("connected after", { "\(number($0.connectMillis)) ms" }),
            ("selected pair through the relay", { $0.throughRelay ? "yes" : "no" }),
            ("relay bob → alice: forwarded / dropped", { "\($0.relayed.forwarded) / \($0.relayed.dropped) (\(percent(Double($0.relayed.dropped) / Double(max($0.relayed.received, 1)))))" }),
            ("relay delay applied min / mean / max", { "\(number($0.relayed.smallestDelayMillis)) / \(number($0.relayed.meanDelayMillis, 1)) / \(number($0.relayed.largestDelayMillis)) ms" }),
            ("RTT (RTCP, alice)", { "\(number($0.roundTripMillis)) ms" }),
            ("expression frames received/sent", { "\($0.pictures.framesReceived)/\($0.pictures.framesSent) (\(percent($0.pictures.framesReceivedShare)))" }),
            ("pictures drawn (60/s)", { "\($0.pictures.pictures)" }),
            ("held / easing / neutral", { "\(percent($0.pictures.held)) / \(percent($0.pictures.easing)) / \(percent($0.pictures.neutral))" }),
            ("jawOpen / yaw error (source time)", { "\(number($0.pictures.jawError, 4)) / \(number($0.pictures.yawError, 3))°" }),
            ("largest jump (× signal step)", { number($0.pictures.largestJump, 2) }),
            ("most frames buffered / late frames", { "\($0.pictures.largestBuffer) / \($0.pictures.lateDropped)" }),
            ("picture delay p50 1st/2nd half", { "\(number($0.pictures.delayFirstHalfMillis))/\(number($0.pictures.delaySecondHalfMillis)) ms" }),
            ("picture delay added vs 0 ms", { "+\(number($0.pictures.delaySecondHalfMillis - base)) ms" }),
            ("mouth-to-ear p50", { "\(number($0.pictures.mouthToEarPLCMillis)) ms" }),
            ("voice delay after the fastest packets / target", { "\(number($0.pictures.latencyPLCMillis)) / \(number(Double($0.playout.targetDelayMicros) / 1000)) ms" }),
            ("RTP jitter buffer's timestamps after the fastest packets", { "\(number($0.jitterBufferLagMillis)) ms" }),
            ("playout: late chunks / concealed / stretched (whole call)", {
                let p = $0.playout, seconds = { (samples: Int) in number(Double(samples) / 48_000, 2) }
                return "\(p.lateChunks)/\(p.chunks) / \(seconds(p.concealedSamples)) s / \(seconds(p.acceleratedSamples + p.expandedSamples)) s"
            }),
            ("\\|picture − audio time\\| p95 (mapping)", { "\(number($0.pictures.syncErrorP95Millis, 1)) ms" }),
            ("audio lead p5 / p50 / p95 (played audio)", { "\(number($0.leadP5Millis)) / \(number($0.leadP50Millis)) / \(number($0.leadP95Millis)) ms" }),
            ("voice < −6 dB / < −20 dB", { "\(percent($0.pictures.voicePLC.dips)) / \(percent($0.pictures.voicePLC.dropouts))" }),
        ]
        var lines = ["| | " + results.map(\.setting.title).joined(separator: " | ") + " |",
                     "|---|" + String(repeating: "---|", count: results.count)]
        for (name, value) in rows { lines.append("| \(name) | " + results.map(value).joined(separator: " | ") + " |") }
        return lines.joined(separator: "\n")
    }
}
