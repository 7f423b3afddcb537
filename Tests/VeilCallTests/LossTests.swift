import Foundation
import Synchronization
@testable import VeilCall
import VeilCore
import XCTest

/// The avatar and the voice on a lossy network, on a real call: packets are dropped inside each
/// peer's webrtcbin, between libnice and DTLS (`PeerConnection.impairNetwork`), so RTP, RTCP and
/// the SCTP data channel all lose the same share. One peer (bob) sends a known smooth expression
/// signal at 30 frames/s; the other (alice) draws it at 60 pictures/s through an
/// `ExpressionJitterBuffer` aligned to bob's voice, as `CallSession.playout(for:at:)` does, and
/// compares every picture with the signal. Both send a tone; alice decodes bob's voice with
/// packet-loss concealment only (the default), bob decodes alice's with in-band FEC as well.
/// docs/reliability.md ("Loss") has the figures of the last run.
final class LossTests: XCTestCase {
    /// The sender's expression signal, `t` seconds into the call: the jaw opens and closes at 0.7 Hz,
    /// the head turns ±20° at 0.4 Hz.
    enum Signal {
        static func jawOpen(_ t: Double) -> Double { 0.5 + 0.4 * sin(2 * .pi * 0.7 * t) }
        static func yaw(_ t: Double) -> Double { 20 * sin(2 * .pi * 0.4 * t) }
        /// The most the signal changes between two frames 1/30 s apart.
        static let jawPerFrame = 0.4 * 2 * .pi * 0.7 / 30
        static let yawPerFrame = 20 * 2 * .pi * 0.4 / 30
    }

    /// One picture alice drew.
    typealias Picture = TestScreen.Picture

    /// What one call at one loss rate showed.
    struct Measurement {
        var loss: Double
        /// Packets alice's (incoming) impairment saw and dropped.
        var packetsSeen = 0, packetsDropped = 0
        var framesSent = 0, framesReceived = 0
        var pictures = 0
        /// Share of pictures by how they were made.
        var exact = 0.0, interpolated = 0.0, held = 0.0, easing = 0.0, neutral = 0.0
        /// Mean absolute error against the signal at the picture's source time.
        var jawError = 0.0, yawError = 0.0
        /// Mean absolute error against the signal at the moment the picture stands for (the
        /// audio being heard): includes what holding a frame costs.
        var jawErrorAtPlayout = 0.0, yawErrorAtPlayout = 0.0
        /// The largest change between two pictures, in multiples of the signal's own largest change
        /// over the same media time (at least one frame interval).
        var largestJump = 0.0
        var largestBuffer = 0
        /// Median of (local time − source time) of the pictures, first and second half of the run.
        var delayFirstHalfMillis = 0.0, delaySecondHalfMillis = 0.0
        /// Gaps in the frame sequence the jitter buffer bridged by interpolation; frames it dropped as late.
        var gapsInterpolated = 0, lateDropped = 0
        /// The received tone in 20 ms windows: concealment only (alice) and with FEC (bob).
        var voicePLC = VoiceLevels(), voiceFEC = VoiceLevels()
        /// The receive pipelines' reported latency: alice (concealment only), bob (with FEC).
        var latencyPLCMillis = 0.0, latencyFECMillis = 0.0
        /// Mouth to ear, p50: local playout time minus the sender's capture time of the audio.
        var mouthToEarPLCMillis = 0.0, mouthToEarFECMillis = 0.0
        /// Measured lip-sync offset proxy: how far the picture's source time is from the audio time
        /// it was drawn for (data pictures only), p95 of |difference| in ms.
        var syncErrorP95Millis = 0.0

        var framesReceivedShare: Double { framesSent == 0 ? 0 : Double(framesReceived) / Double(framesSent) }
        var packetsDroppedShare: Double { packetsSeen == 0 ? 0 : Double(packetsDropped) / Double(packetsSeen) }
    }

    /// How the received tone (amplitude 0.2, RMS 0.141) sounds, in 20 ms windows.
    struct VoiceLevels {
        /// Windows more than 6 dB below the tone's level (RMS < 0.071): an audible dip.
        var dips = 0.0
        /// Windows more than 20 dB below it (RMS < 0.014) or without samples: a dropout.
        var dropouts = 0.0
    }

    func testTheAvatarStaysSmoothAndTheVoiceConcealsUnderPacketLoss() async throws {
        var results: [Measurement] = []
        for (index, loss) in [0.0, 0.05, 0.2, 0.4].enumerated() {
            results.append(try await RealTimeBounds.measuredOnce("at \(Int(loss * 100)) % loss") { attempt in
                try await measure(loss: loss, seed: 0x1055_0000 + UInt64(index) + UInt64(attempt - 1) << 8, seconds: 4)
            } bounds: { Self.bounds(of: $0) })
        }
        print(Self.table(results))

        // The measurement can tell loss from no loss: interpolating across lost frames costs accuracy.
        let clean = results[0], worst = results[results.count - 1]
        XCTAssertLessThan(clean.jawError + clean.yawError / 40, worst.jawError + worst.yawError / 40,
                          "the error at 40 % loss is not above the error without loss")
    }

    /// What a call at one loss rate must show.
    static func bounds(of result: Measurement) -> RealTimeBounds {
        var bounds = RealTimeBounds()
        // The impairment did what it says, and the frames that got through match it.
        bounds.near(result.packetsDroppedShare, result.loss, within: 0.05, "share of packets dropped")
        bounds.greater(Double(result.framesSent), 90, "frames sent")
        bounds.near(result.framesReceivedShare, 1 - result.loss, within: 0.1, "share of frames received")
        bounds.greater(Double(result.pictures), 150, "pictures drawn")
        // Smooth: no picture moves much more than the signal itself could in that time.
        bounds.less(result.largestJump, 4, "largest jump of the avatar (× signal step)")
        // Faithful: interpolated pictures stay close to what the sender's face did.
        bounds.less(result.jawError, 0.02, "jawOpen error")
        bounds.less(result.yawError, 0.6, "yaw error (°)")
        // Mostly data, little concealment, and no backlog: a handful of frames buffered and a
        // delay that does not grow over the run.
        // The voice waits for the frame after each moment (AdaptivePlayout's synced stream), so a
        // lost frame is bridged by the next instead of held.
        bounds.less(result.held + result.easing + result.neutral, 0.1, "share of concealed pictures")
        bounds.atMost(Double(result.largestBuffer), 16, "frames buffered")
        bounds.less(result.delaySecondHalfMillis - result.delayFirstHalfMillis, 25, "growth of the delay over the run (ms)")
        bounds.less(result.syncErrorP95Millis, 45, "pictures off their audio time, p95 (ms)")
        // The voice: clean without loss; with loss, concealment fills the lost packets so that
        // fewer windows fall silent (below −20 dB) than packets are lost.
        if result.loss == 0 {
            bounds.less(result.voicePLC.dips, 0.02, "share of voice windows below −6 dB without loss")
            bounds.atMost(Double(result.gapsInterpolated), 0, "gaps bridged without loss")
            // FEC decoding makes opusdec report 120 ms more latency, which a sink synchronised to the
            // pipeline's latency would add to every sample. Veil's playout follows the packets instead,
            // so without loss FEC costs no delay (docs/reliability.md, "Loss").
            bounds.less(result.mouthToEarFECMillis, result.mouthToEarPLCMillis + 30, "mouth-to-ear with FEC decoding (ms)")
        } else {
            bounds.less(result.voicePLC.dropouts, result.loss, "share of voice windows below −20 dB")
        }
        if result.loss >= 0.4 { bounds.greater(Double(result.gapsInterpolated), 20, "gaps bridged at 40 % loss") }
        return bounds
    }

    /// Loss on what leaves a peer (after SRTP/DTLS, before libnice) reaches the other side as loss.
    func testOutgoingLossIsSeenByTheReceiver() async throws {
        let pair = try PeerPair()
        try await pair.waitUntilConnected()
        let impairment = try XCTUnwrap(pair.offerer.impairNetwork(loss: 0.3, seed: 0x0075, direction: .outgoing))
        let before = pair.answererSaw.frames.withLock { $0.count }
        let start = pair.offerer.mediaTimeMicros
        for index in 0..<90 {
            pair.offerer.send(ExpressionFrame(sequence: UInt32(index), captureTimeMicros: start + UInt64(index) * 33_333,
                                              state: .tracked, expression: testExpression(index)))
            try await Task.sleep(nanoseconds: 33_333_333)
        }
        try await Task.sleep(nanoseconds: 300_000_000)
        let received = pair.answererSaw.frames.withLock { $0.count } - before
        let counts = impairment.counts
        try await pair.close()
        XCTAssertEqual(counts.incomingSeen, 0, "an outgoing impairment saw incoming packets")
        XCTAssertGreaterThan(counts.outgoingSeen, 150, "too few packets left")
        XCTAssertEqual(Double(counts.outgoingDropped) / Double(counts.outgoingSeen), 0.3, accuracy: 0.08)
        XCTAssertEqual(Double(received) / 90, 0.7, accuracy: 0.15, "share of frames the receiver got")
    }

    /// One call with `loss` on both one-way paths for `seconds` of measurement.
    func measure(loss: Double, seed: UInt64, seconds: Double) async throws -> Measurement {
        var configuration = PeerConfiguration()
        configuration.rtcpIntervalMillis = 250  // the playout mapping needs a sender report
        var withFEC = configuration
        withFEC.decodesInbandFEC = true
        let pair = try PeerPair(offererInput: .testTone(frequency: 440), answererInput: .testTone(frequency: 660),
                                configuration: configuration, answererConfiguration: withFEC)
        let alice = pair.offerer, bob = pair.answerer
        do {
            try await pair.waitUntilConnected()
        } catch {
            try? await pair.close()
            throw error
        }
        let aliceLoss = alice.impairNetwork(loss: loss, seed: seed)
        let bobLoss = bob.impairNetwork(loss: loss, seed: seed ^ 0xB0B)
        XCTAssertNotNil(aliceLoss, "no transport to impair")
        XCTAssertNotNil(bobLoss, "no transport to impair")
        let framesBefore = pair.offererSaw.frames.withLock { $0.count }

        let filmed = try await Self.film(pair, seconds: seconds, skipping: framesBefore)
        var result = Self.measurement(loss: loss, of: filmed, pair: pair)
        if let counts = aliceLoss?.counts {
            result.packetsSeen = counts.incomingSeen
            result.packetsDropped = counts.incomingDropped
        }
        result.latencyFECMillis = Double(bob.playoutMapping?.latencyMicros ?? 0) / 1000
        let heardByBob = pair.answererSaw.audio.withLock { $0 }
        result.voiceFEC = Self.levels(heardByBob, from: filmed.from, to: filmed.to)
        result.mouthToEarFECMillis = Self.mouthToEarMillis(heardByBob, sentOn: alice.clock, from: filmed.from, to: filmed.to)
        try await pair.close()
        return result
    }

    /// What one filmed stretch of a call gave: the window measured (alice's clock) and what alice
    /// drew and heard.
    struct Filmed {
        var start: UInt64, framesBefore: Int, framesSent: Int
        var from: UInt64, to: UInt64
        var statistics: ExpressionJitterBuffer.Statistics?
        var pictures: [Picture]
        var heard: [ReceivedAudio]
    }

    /// Bob films `Signal` at 30 frames/s while alice draws 60 pictures/s at the playout time of his
    /// voice; measured for `seconds` from `settleMicros` after alice's playout mapping (bob's first
    /// sender report) plus half a second for the first frames to fill the buffer. Waits
    /// `drainSeconds` for the frames in flight before returning.
    static func film(_ pair: PeerPair, seconds: Double, skipping framesBefore: Int,
                     settleMicros: UInt64 = 0, drainSeconds: Double = 0.3) async throws -> Filmed {
        let alice = pair.offerer, bob = pair.answerer
        let start = bob.mediaTimeMicros
        let camera = TestCamera(bob) { now in
            let t = Double(now - start) / 1e6
            var expression = VeilCore.Expression(headPose: HeadPose(yaw: Float(Signal.yaw(t))))
            expression[.jawOpen] = Float(Signal.jawOpen(t))
            return expression
        }
        let screen = TestScreen(alice, frames: pair.offererSaw, skipping: framesBefore, picturesPerSecond: 60)
        var from: UInt64 = 0
        do {
            try await eventually("alice's playout mapping", within: 10) { alice.playoutMapping != nil }
            from = alice.mediaTimeMicros + 500_000 + settleMicros
            try await Task.sleep(nanoseconds: UInt64((seconds + 0.5) * 1e9) + settleMicros * 1000)
        } catch {
            camera.stop(); screen.stop()
            try? await pair.close()
            throw error
        }
        let to = alice.mediaTimeMicros
        camera.stop(); screen.stop()
        try await Task.sleep(nanoseconds: UInt64(drainSeconds * 1e9))
        return Filmed(start: start, framesBefore: framesBefore, framesSent: camera.framesSent, from: from, to: to,
                      statistics: screen.statistics,
                      pictures: screen.pictures.filter { $0.localMicros >= from && $0.localMicros < to },
                      heard: pair.offererSaw.audio.withLock { $0 })
    }

    /// The figures of `filmed` that both the loss and the delay tests report.
    static func measurement(loss: Double, of filmed: Filmed, pair: PeerPair) -> Measurement {
        var result = Measurement(loss: loss)
        if let statistics = filmed.statistics {
            result.gapsInterpolated = statistics.gapsInterpolated
            result.lateDropped = statistics.lateDropped
        }
        result.framesSent = filmed.framesSent
        result.framesReceived = pair.offererSaw.frames.withLock { $0.count } - filmed.framesBefore
        result.latencyPLCMillis = Double(pair.offerer.playoutMapping?.latencyMicros ?? 0) / 1000
        analyse(filmed.pictures, start: filmed.start, sentOn: pair.answerer.clock, into: &result)
        result.voicePLC = levels(filmed.heard, from: filmed.from, to: filmed.to)
        result.mouthToEarPLCMillis = mouthToEarMillis(filmed.heard, sentOn: pair.answerer.clock, from: filmed.from, to: filmed.to)
        return result
    }

    /// Errors, smoothness, concealment and delay of the pictures drawn.
    /// `clock`: the sender's connection clock, on which the pictures' source and media times are.
    static func analyse(_ pictures: [Picture], start: UInt64, sentOn clock: ConnectionClock, into result: inout Measurement) {
        func seconds(_ micros: UInt64) -> Double { Double(Int64(bitPattern: clock.localMicros(ofConnectionMicros: micros) &- start)) / 1e6 }
        result.pictures = pictures.count
        guard !pictures.isEmpty else { return }
        let share = { (source: ExpressionJitterBuffer.Playout.Source) in
            Double(pictures.filter { $0.playout.source == source }.count) / Double(pictures.count)
        }
        result.exact = share(.frame)
        result.interpolated = share(.interpolated)
        result.held = share(.held)
        result.easing = share(.easing)
        result.neutral = share(.neutral)
        result.largestBuffer = pictures.map(\.bufferedFrames).max() ?? 0

        var jaw: [Double] = [], yaw: [Double] = [], jawNow: [Double] = [], yawNow: [Double] = []
        var delays: [Double] = [], syncErrors: [Double] = []
        for picture in pictures {
            let drawnJaw = Double(picture.playout.expression[.jawOpen]), drawnYaw = Double(picture.playout.expression.headPose.yaw)
            let now = seconds(picture.playout.mediaTimeMicros)
            jawNow.append(abs(drawnJaw - Signal.jawOpen(now)))
            yawNow.append(abs(drawnYaw - Signal.yaw(now)))
            guard let source = picture.playout.sourceTimeMicros else { continue }
            jaw.append(abs(drawnJaw - Signal.jawOpen(seconds(source))))
            yaw.append(abs(drawnYaw - Signal.yaw(seconds(source))))
            delays.append(Double(Int64(bitPattern: picture.localMicros &- clock.localMicros(ofConnectionMicros: source))) / 1000)
            if picture.playout.source == .frame || picture.playout.source == .interpolated {
                syncErrors.append(abs(Double(Int64(bitPattern: picture.playout.mediaTimeMicros &- source))) / 1000)
            }
        }
        func mean(_ values: [Double]) -> Double { values.isEmpty ? .nan : values.reduce(0, +) / Double(values.count) }
        result.jawError = mean(jaw)
        result.yawError = mean(yaw)
        result.jawErrorAtPlayout = mean(jawNow)
        result.yawErrorAtPlayout = mean(yawNow)
        result.delayFirstHalfMillis = percentile(Array(delays.prefix(delays.count / 2)), 0.5)
        result.delaySecondHalfMillis = percentile(Array(delays.suffix(delays.count - delays.count / 2)), 0.5)
        result.syncErrorP95Millis = syncErrors.isEmpty ? .nan : percentile(syncErrors, 0.95)

        for (previous, next) in zip(pictures, pictures.dropFirst()) where previous.playout.source != .neutral {
            // The signal's own largest change over the media time between the two pictures (at
            // least one frame interval, the sender's resolution).
            let elapsed = max(Double(Int64(bitPattern: next.playout.mediaTimeMicros &- previous.playout.mediaTimeMicros)) / 1e6, 1.0 / 30)
            let jawStep = abs(Double(next.playout.expression[.jawOpen] - previous.playout.expression[.jawOpen]))
            let yawStep = abs(Double(next.playout.expression.headPose.yaw - previous.playout.expression.headPose.yaw))
            let frames = elapsed * 30
            result.largestJump = max(result.largestJump, jawStep / (Signal.jawPerFrame * frames), yawStep / (Signal.yawPerFrame * frames))
        }
    }

    /// Dips and dropouts of the received tone in the 20 ms windows between `from` and `to`
    /// (presentation time).
    static func levels(_ audio: [ReceivedAudio], from: UInt64, to: UInt64) -> VoiceLevels {
        let window: UInt64 = 20_000
        let count = Int((to - from) / window)
        guard count > 0 else { return VoiceLevels(dips: .nan, dropouts: .nan) }
        var energy = [Double](repeating: 0, count: count), samples = [Int](repeating: 0, count: count)
        for buffer in audio where buffer.sampleRate > 0 {
            for (index, sample) in buffer.samples.enumerated() {
                let time = buffer.presentationTimeMicros + UInt64(index) * 1_000_000 / UInt64(buffer.sampleRate)
                guard time >= from, time < from + UInt64(count) * window else { continue }
                let slot = Int((time - from) / window)
                energy[slot] += Double(sample * sample)
                samples[slot] += 1
            }
        }
        let perWindow = 48_000 / 50
        let level = (0..<count).map { samples[$0] < perWindow / 2 ? 0 : (energy[$0] / Double(samples[$0])).squareRoot() }
        return VoiceLevels(dips: Double(level.filter { $0 < 0.071 }.count) / Double(count),
                           dropouts: Double(level.filter { $0 < 0.014 }.count) / Double(count))
    }

    /// Median of (playout time − sender capture time) of the audio buffers played between `from`
    /// and `to`: the voice's mouth-to-ear delay (without a sound card's own latency). `clock`: the
    /// sender's connection clock, on which the buffers' sender times are.
    static func mouthToEarMillis(_ audio: [ReceivedAudio], sentOn clock: ConnectionClock, from: UInt64, to: UInt64) -> Double {
        let delays = audio.compactMap { buffer -> Double? in
            guard buffer.presentationTimeMicros >= from, buffer.presentationTimeMicros < to, let sender = buffer.senderMediaTimeMicros else { return nil }
            return Double(Int64(bitPattern: buffer.playoutTimeMicros &- clock.localMicros(ofConnectionMicros: sender))) / 1000
        }
        return percentile(delays, 0.5)
    }

    /// The figures as the table docs/reliability.md shows.
    static func table(_ results: [Measurement]) -> String {
        func percent(_ value: Double) -> String { String(format: "%.1f %%", value * 100) }
        func number(_ value: Double, _ digits: Int = 3) -> String { String(format: "%.\(digits)f", value) }
        let rows: [(String, (Measurement) -> String)] = [
            ("packets dropped (alice's side)", { "\($0.packetsDropped)/\($0.packetsSeen) (\(percent($0.packetsDroppedShare)))" }),
            ("expression frames received/sent", { "\($0.framesReceived)/\($0.framesSent) (\(percent($0.framesReceivedShare)))" }),
            ("pictures drawn (60/s)", { "\($0.pictures)" }),
            ("exact / interpolated", { "\(percent($0.exact)) / \(percent($0.interpolated))" }),
            ("held / easing / neutral", { "\(percent($0.held)) / \(percent($0.easing)) / \(percent($0.neutral))" }),
            ("jawOpen error (source time)", { number($0.jawError, 4) }),
            ("yaw error (source time, °)", { number($0.yawError, 3) }),
            ("jawOpen error (playout time)", { number($0.jawErrorAtPlayout, 4) }),
            ("yaw error (playout time, °)", { number($0.yawErrorAtPlayout, 3) }),
            ("largest jump (× signal step)", { number($0.largestJump, 2) }),
            ("most frames buffered", { "\($0.largestBuffer)" }),
            ("picture delay p50 1st/2nd half", { "\(number($0.delayFirstHalfMillis, 0))/\(number($0.delaySecondHalfMillis, 0)) ms" }),
            ("|picture − audio time| p95", { "\(number($0.syncErrorP95Millis, 1)) ms" }),
            ("gaps bridged / late frames", { "\($0.gapsInterpolated) / \($0.lateDropped)" }),
            ("voice < −6 dB: PLC / PLC+FEC", { "\(percent($0.voicePLC.dips)) / \(percent($0.voiceFEC.dips))" }),
            ("voice < −20 dB: PLC / PLC+FEC", { "\(percent($0.voicePLC.dropouts)) / \(percent($0.voiceFEC.dropouts))" }),
            ("receive latency PLC / FEC", { "\(number($0.latencyPLCMillis, 0)) / \(number($0.latencyFECMillis, 0)) ms" }),
            ("mouth-to-ear p50 PLC / FEC", { "\(number($0.mouthToEarPLCMillis, 0)) / \(number($0.mouthToEarFECMillis, 0)) ms" }),
        ]
        func title(_ result: Measurement) -> String { "\(Int(result.loss * 100)) % loss" }
        var lines = ["| | " + results.map(title).joined(separator: " | ") + " |",
                     "|---|" + String(repeating: "---|", count: results.count)]
        for (name, value) in rows { lines.append("| \(name) | " + results.map(value).joined(separator: " | ") + " |") }
        return lines.joined(separator: "\n")
    }
}
