import Foundation
import Synchronization
import VeilCall
import VeilCore
import VeilGLib
import VeilMedia
import VeilTracking
import VeilVision

/// The latency part of `veil bench`: Veil's mouth-to-ear delay, and the age of the picture beside
/// it, through the same relay and schedule as the Chromium anchor (`ChromiumAnchor`).
///
/// Two `PeerConnection`s in this process call each other through a `UDPRelay`. Alice's voice is a
/// file of tone bursts (80 ms at 1 kHz every 500 ms); bob's output is the playout's callback, which
/// hands each block over at its playout time: the moment a sound server would get it. A burst's
/// onset in what bob plays, minus the time alice's file put it into the call, both on this
/// machine's one media clock, is its mouth-to-ear delay. Alice also sends expression frames at
/// 30 frames/s: with a `camera`, each is a frame of a clip tracked as `veil call` tracks it, stamped
/// at the moment the frame is taken and sent once tracked; bob draws at 30 pictures/s as
/// `CallSession` does (the expression at the playout time of the voice heard): a picture's age is
/// how long ago the moment it shows was captured, tracking included.
struct LatencyBenchmark {
    /// Alice's camera: frames in, tracked as in a call. Used from the camera thread only.
    final class Camera: @unchecked Sendable {
        private let frames: [RGBImage]
        private let capture: ExpressionCapture
        init(frames: [RGBImage], tracker: FaceTracking) {
            self.frames = frames
            capture = ExpressionCapture(tracker: tracker)
        }
        /// Frame `index` (the clip loops), tracked, stamped `captureMicros`.
        func frame(_ index: Int, capturedAt captureMicros: UInt64) -> ExpressionFrame? {
            guard !frames.isEmpty else { return nil }
            return try? capture.process(frames[index % frames.count], captureTimeMicros: captureMicros).frame
        }
    }

    var schedule = LatencyCondition.standardSchedule
    /// Nil: frames made without tracking (a moving jaw).
    var camera: Camera?
    var periodMillis = 500.0
    var burstMillis = 80.0
    var quiet = false

    /// What one condition measured of Veil.
    struct Result: Codable {
        var condition: LatencyCondition
        var burstsSent = 0, burstsDetected = 0
        var mouthToEarMillis: [Double] = []
        /// Age of each data picture drawn (capture of the moment shown → shown), ms.
        var captureToAvatarMillis: [Double] = []
        /// Audio lead of each data picture (ms): + the voice comes first.
        var audioLeadMillis: [Double] = []
        /// The playout's own figures over the condition.
        var chunks = 0, lateChunks = 0
        /// The same after the condition's first second: a step in the path's delay makes the first
        /// packets after it late for any receiver, since nothing can be buffered ahead of a path
        /// that suddenly got slower (nil in runs saved before this was counted).
        var chunksSettled: Int?, lateChunksSettled: Int?
        /// Runs of made-up audio (the playout's own concealments and audio made up upstream for
        /// lost packets), as WebRTC's `concealmentEvents` counts them (nil in older runs).
        var concealmentEvents: Int?
        var concealedSeconds = 0.0, stretchedSeconds = 0.0
        var targetDelayMillis: Double?
        /// With a camera: the frames of the condition that tracking failed on (not sent; nil in
        /// runs saved before this was counted).
        var framesUntracked: Int?
        /// With a camera: the frames of the condition tracked and sent.
        var framesTracked: Int?

        /// The `p`th percentile (0…100) of the mouth-to-ear delays, interpolated; nil when none was heard.
        func mouthToEarPercentile(_ p: Double) -> Double? {
            mouthToEarMillis.isEmpty ? nil : Stats.percentile(p, ofSorted: mouthToEarMillis.sorted())
        }
        var latePacketShare: Double { chunks == 0 ? 0 : Double(lateChunks) / Double(chunks) }
        var settledLatePacketShare: Double? {
            guard let chunksSettled, let lateChunksSettled else { return nil }
            return chunksSettled == 0 ? 0 : Double(lateChunksSettled) / Double(chunksSettled)
        }
        var concealmentEventsPerMinute: Double? {
            guard let concealmentEvents, condition.seconds > 0 else { return nil }
            return Double(concealmentEvents) * 60 / condition.seconds
        }
        var concealedSecondsPerMinute: Double { condition.seconds > 0 ? concealedSeconds * 60 / condition.seconds : 0 }
        var stretchedSecondsPerMinute: Double { condition.seconds > 0 ? stretchedSeconds * 60 / condition.seconds : 0 }
        var lipSyncInWindowShare: Double {
            audioLeadMillis.isEmpty ? 0 : Double(audioLeadMillis.filter { $0 <= 45 && $0 >= -125 }.count) / Double(audioLeadMillis.count)
        }
    }

    private final class Recorder: Sendable {
        let heard = Mutex<[ReceivedAudio]>([])
        let frames = Mutex<[ReceivedExpressionFrame]>([])
        /// (shown at, source time on the sender's connection clock) of each data picture.
        let pictures = Mutex<[(shown: UInt64, source: UInt64)]>([])
        /// (taken at, tracked) of each camera frame.
        let filmed = Mutex<[(taken: UInt64, tracked: Bool)]>([])
        let running = Mutex(true)
    }

    func run(progress: (String) -> Void = { _ in }) throws -> [Result] {
        try PeerConnection.prepare()
        guard let host = UDPRelay.hostAddress() else {
            throw VeilError.io("bench latency: this machine has no non-loopback IPv4 address for the relay")
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("veil-bench-latency-\(getpid())", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let total = schedule.reduce(0) { $0 + $1.seconds }
        let wav = directory.appendingPathComponent("bursts.wav")
        try WAVAudio(samples: bursts(seconds: total + 10), sampleRate: 48_000).write(to: wav)

        let relay = try UDPRelay(host: host, impairment: schedule.first?.impairment ?? .init(), seed: 0x1A7E)
        defer { relay.close() }
        var configuration = PeerConfiguration()
        configuration.rtcpIntervalMillis = 250
        let recorder = Recorder()
        let loop = GLibLoop(name: "veil-bench-latency")
        defer { loop.stop() }
        let alice = try PeerConnection(loop: loop, role: .offerer, audioSource: .file(wav), audioOutput: .discard, configuration: configuration)
        let bob = try PeerConnection(loop: loop, role: .answerer, audioSource: .silence,
                                     audioOutput: .callback { audio in recorder.heard.withLock { $0.append(audio) } },
                                     configuration: configuration)
        var tasks: [Task<Void, Never>] = []
        defer { tasks.forEach { $0.cancel() } }
        for (from, to, side) in [(alice, bob, UDPRelay.Side.a), (bob, alice, UDPRelay.Side.b)] {
            tasks.append(Task { await Self.forwardSignaling(from: from, to: to, side: side, relay: relay) })
        }
        tasks.append(Task { for await frame in bob.expressionFrames { recorder.frames.withLock { $0.append(frame) } } })
        let deadline = Date().addingTimeInterval(20)
        while !(alice.state == .connected && bob.state == .connected && alice.isDataChannelOpen && bob.isDataChannelOpen) {
            guard Date() < deadline else { throw VeilError.io("bench latency: the call through the relay did not connect within 20 s") }
            Thread.sleep(forTimeInterval: 0.05)
        }
        let filming = Thread { [camera] in Self.film(alice, camera: camera, recorder: recorder) }
        filming.start()
        let screen = Thread { Self.draw(bob, sender: alice, recorder: recorder) }
        screen.start()
        // The file starts once connected; wait for it and for the playout mapping.
        while alice.audioFileStartMicros == nil || bob.playoutMapping == nil {
            guard Date() < deadline.addingTimeInterval(10) else { throw VeilError.io("bench latency: the voice did not start") }
            Thread.sleep(forTimeInterval: 0.05)
        }
        Thread.sleep(forTimeInterval: 2)  // the playout's first second is not measured either

        var windows: [(condition: LatencyCondition, from: UInt64, to: UInt64,
                       before: AdaptivePlayout.Statistics, settled: AdaptivePlayout.Statistics, after: AdaptivePlayout.Statistics)] = []
        for condition in schedule {
            relay.impairment = condition.impairment
            progress("Veil: \(condition.name), \(Int(condition.seconds)) s")
            let from = PeerConnection.mediaTimeMicros, before = bob.playoutStatistics
            let settling = min(1, condition.seconds)
            Thread.sleep(forTimeInterval: settling)
            let settled = bob.playoutStatistics
            Thread.sleep(forTimeInterval: condition.seconds - settling)
            windows.append((condition, from, PeerConnection.mediaTimeMicros, before, settled, bob.playoutStatistics))
        }
        Thread.sleep(forTimeInterval: 1)  // the last bursts in flight
        recorder.running.withLock { $0 = false }
        let fileStart = alice.audioFileStartMicros ?? 0
        let onsets = Self.onsets(in: recorder.heard.withLock { $0 })
        let heard = recorder.heard.withLock { $0 }
        let pictures = recorder.pictures.withLock { $0 }
        let filmed = recorder.filmed.withLock { $0 }

        var results: [Result] = []
        for window in windows {
            var result = Result(condition: window.condition)
            // Bursts put into the call during the condition, each matched with the first onset
            // heard after it and before the next burst would be.
            let period = UInt64(periodMillis * 1000)
            var k = (window.from > fileStart ? (window.from - fileStart) / period : 0) + 1
            while fileStart + k * period < window.to {
                let sent = fileStart + k * period
                result.burstsSent += 1
                if let onset = onsets.first(where: { $0 > sent + 5_000 && $0 < sent + period - 10_000 }) {
                    result.burstsDetected += 1
                    result.mouthToEarMillis.append(Double(onset - sent) / 1000)
                }
                k += 1
            }
            for picture in pictures where picture.shown >= window.from && picture.shown < window.to {
                // Source times travel modulo 2^48 µs on the sender's connection clock.
                let age = (alice.clock.connectionMicros(ofLocalMicros: picture.shown) &- picture.source) & ((1 << 48) - 1)
                result.captureToAvatarMillis.append(Double(age) / 1000)
                // The voice heard at that moment: the last block played before it.
                if let block = heard.last(where: { $0.playoutTimeMicros <= picture.shown }), let sender = block.senderMediaTimeMicros,
                   picture.shown - block.playoutTimeMicros < 100_000 {
                    let audio = sender &+ (picture.shown - block.playoutTimeMicros)
                    result.audioLeadMillis.append(Double(LipSync.audioLeadMicros(audioMediaTimeMicros: audio, sourceTimeMicros: picture.source)) / 1000)
                }
            }
            result.chunks = window.after.chunks - window.before.chunks
            result.lateChunks = window.after.lateChunks - window.before.lateChunks
            result.chunksSettled = window.after.chunks - window.settled.chunks
            result.lateChunksSettled = window.after.lateChunks - window.settled.lateChunks
            result.concealmentEvents = window.after.concealmentEvents - window.before.concealmentEvents
            result.concealedSeconds = Double(window.after.concealedSamples - window.before.concealedSamples) / 48_000
            result.stretchedSeconds = Double(window.after.acceleratedSamples - window.before.acceleratedSamples
                                             + window.after.expandedSamples - window.before.expandedSamples) / 48_000
            result.targetDelayMillis = Double(window.after.targetDelayMicros) / 1000
            if camera != nil {
                let frames = filmed.filter { $0.taken >= window.from && $0.taken < window.to }
                let tracked = frames.filter(\.tracked).count
                result.framesTracked = tracked
                result.framesUntracked = frames.count - tracked
            }
            results.append(result)
        }
        _ = loop
        return results
    }

    /// The burst file: `burstMillis` of a 1 kHz tone with 5 ms ramps every `periodMillis`, from
    /// one period in.
    func bursts(seconds: Double) -> [Int16] {
        let count = Int(seconds * 48_000), period = Int(periodMillis * 48), length = Int(burstMillis * 48), ramp = 240
        var samples = [Int16](repeating: 0, count: count)
        var start = period
        while start + length < count {
            for i in 0..<length {
                let gain = min(1, Double(min(i, length - 1 - i)) / Double(ramp))
                samples[start + i] = Int16(16_000 * gain * sin(2 * Double.pi * 1000 * Double(i) / 48_000))
            }
            start += period
        }
        return samples
    }

    /// Playout times of the onsets in what was played: the first sample above 0.05 after at least
    /// 100 ms below 0.02.
    static func onsets(in heard: [ReceivedAudio]) -> [UInt64] {
        var onsets: [UInt64] = []
        var quietSince: UInt64?
        for block in heard.sorted(by: { $0.playoutTimeMicros < $1.playoutTimeMicros }) {
            for (index, sample) in block.samples.enumerated() {
                let time = block.playoutTimeMicros + UInt64(index) * 1_000_000 / 48_000
                let level = abs(sample)
                if level < 0.02 {
                    if quietSince == nil { quietSince = time }
                } else {
                    if level > 0.05, let since = quietSince, time - since >= 100_000 { onsets.append(time) }
                    if level > 0.05 { quietSince = nil }
                }
            }
        }
        return onsets
    }

    private static func forwardSignaling(from: PeerConnection, to: PeerConnection, side: UDPRelay.Side, relay: UDPRelay) async {
        var relayCandidateGiven = false
        for await signal in from.signaling {
            var signal = signal
            switch signal {
            case .candidate(let candidate):
                // The real candidate only tells the relay where `from` is; `to` learns of the relay.
                _ = relay.expect(side, fromCandidate: candidate.candidate)
                guard !relayCandidateGiven else { continue }
                relayCandidateGiven = true
                signal = .candidate(ICECandidate(mline: candidate.mline, candidate: relay.candidate(facing: side.other)))
            case .description(var description):
                description.sdp = description.sdp.components(separatedBy: "\r\n")
                    .filter { !$0.hasPrefix("a=candidate:") && !$0.hasPrefix("a=end-of-candidates") }
                    .joined(separator: "\r\n")
                signal = .description(description)
            }
            try? to.receive(signal)
        }
    }

    /// Alice's camera: 30 frames/s, stamped when taken, tracked (or a moving jaw without a camera).
    /// A frame tracking fails on is counted and not sent, as a call would not send it.
    private static func film(_ alice: PeerConnection, camera: Camera?, recorder: Recorder) {
        var sequence: UInt32 = 0
        var next = alice.mediaTimeMicros
        while recorder.running.withLock({ $0 }) {
            let now = alice.mediaTimeMicros
            if let camera {
                let frame = camera.frame(Int(sequence), capturedAt: now)
                if let frame { alice.send(frame) }
                recorder.filmed.withLock { $0.append((now, frame != nil)) }
            } else {
                var expression = VeilCore.Expression()
                expression[.jawOpen] = Float(0.5 + 0.5 * sin(Double(now) / 150_000))
                alice.send(ExpressionFrame(sequence: sequence, captureTimeMicros: now, state: .tracked, expression: expression))
            }
            sequence &+= 1
            next += 33_333
            let after = alice.mediaTimeMicros
            if next > after { Thread.sleep(forTimeInterval: Double(next - after) / 1e6) } else { next = after }
        }
    }

    /// Bob's screen: 30 pictures/s, each the expression at the playout time of the voice heard
    /// half a picture later (what `CallSession` asks for).
    private static func draw(_ bob: PeerConnection, sender: PeerConnection, recorder: Recorder) {
        var buffer = ExpressionJitterBuffer()
        var taken = 0
        while recorder.running.withLock({ $0 }) {
            let arrived = recorder.frames.withLock { frames -> ArraySlice<ReceivedExpressionFrame> in
                defer { taken = frames.count }
                return frames[min(taken, frames.count)...]
            }
            for received in arrived { _ = buffer.insert(received.frame, arrivalTimeMicros: received.arrivalMediaTimeMicros) }
            let now = bob.mediaTimeMicros
            if let mapping = bob.playoutMapping {
                let playout = buffer.expression(atPlayoutOf: mapping.senderMediaTimeMicros(playingAt: now + 16_667))
                if playout.source == .frame || playout.source == .interpolated, let source = playout.sourceTimeMicros {
                    recorder.pictures.withLock { $0.append((now, source)) }
                }
            }
            Thread.sleep(forTimeInterval: 1.0 / 30)
        }
    }
}
