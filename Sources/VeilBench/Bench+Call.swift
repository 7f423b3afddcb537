import Foundation
import Synchronization
import VeilCairo
import VeilCall
import VeilCore
import VeilVision
import VeilRender
import VeilServer
import VeilTracking
import VeilConsole
import VeilMedia

/// The call part of `veil bench`: a real two-person call inside this process. An embedded room
/// server listens on a free port on 127.0.0.1; alice waits in the room and bob joins it several times
/// (join time), the last time to stay for the call. Each "films" a synthetic talking clip held in
/// memory, tracked in real time at 30 fps and sent as `ExpressionFrame`s, speaks with espeak-ng
/// speech (a test tone without it), and draws the other's avatar at 30 fps picture-in-picture.
///
/// Both participants read one monotonic media clock (`PeerConnection.mediaTimeMicros`), so every
/// one-way time — capture to arrival, arrival to the picture that shows the frame, voice capture
/// to playout — is a plain difference, once what a receiver got is moved back from the clock the
/// sender's connection showed it (`ConnectionClock`, which the benchmark reads from the sender).
struct CallBenchmark {
    /// How often bob joins the room where alice waits; the last join stays for the call.
    var joins = 5
    /// Seconds of call measured after the warm-up.
    var measuredSeconds = 20.0
    /// Seconds skipped once both voices' timing is known (the first RTCP sender report): the
    /// expression buffers move from their own adaptive delay to the voice's and settle.
    var warmUpSeconds = 1.5
    var framesPerSecond = 30.0
    var size = (width: 640, height: 480)
    var quiet = false

    /// What each person says: long enough to keep talking through the measured seconds.
    static let lines: [(user: String, voice: String, text: String)] = [
        ("alice", "en+f3", """
        Hello, this is alice, calling from the benchmark. You can hear my voice and see my avatar talk and smile, \
        but my face never leaves my computer. Only a small stream of expressions travels beside my voice: how wide \
        my mouth opens, where my eyes look, how my head turns. Each of those frames is smaller than a text message, \
        and the picture you see waits for my voice, so that the lips and the sound arrive together. Let us keep \
        talking for a while, so that the numbers have time to settle.
        """),
        ("bob", "en+m3", """
        Hi alice, this is bob. I hear you well. My camera stays on my own machine as well; what you see is a \
        canonical face moved by my expressions, thirty times a second. The voice goes out as Opus, twenty \
        milliseconds at a time, and the expressions go out on a data channel that never waits for a lost packet. \
        When the network stutters the picture holds for a moment and then catches up with the voice again. \
        That is all there is to it, and it costs less than a single photograph per minute.
        """),
    ]

    /// Runs the call and returns what it measured.
    func run(aliceClip: Benchmark.Clip, bobClip: Benchmark.Clip, tracker: MediaPipeFaceTracker) throws -> BenchReport.Call {
        let began = PeerConnection.mediaTimeMicros
        try PeerConnection.prepare()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("veil-bench-call-\(getpid())", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        var voices: [String: AudioInput] = [:]
        var spoken: [String] = []
        for (user, voice, text) in Self.lines {
            if let path = try speak(text, voice: voice, to: directory.appendingPathComponent("\(user).wav").path) {
                voices[user] = .file(URL(fileURLWithPath: path))
                spoken.append("\(user) \(voice)")
            } else {
                voices[user] = .testTone(frequency: user == "alice" ? 440 : 660)
            }
        }
        let voiceDescription = spoken.count == Self.lines.count
            ? "espeak-ng speech (\(spoken.joined(separator: ", ")))" : "test tones (440 and 660 Hz; espeak-ng not found)"

        let secret = ServerSecret.random()
        let server = RoomServer(configuration: .init(secret: secret, port: 0))
        let url = try server.start()
        defer { server.stop() }
        let authority = TokenAuthority(secret: secret)
        var everyone: [CallParticipant] = []
        defer { for person in everyone { person.leave() } }
        func participant(_ user: String, remote: String, clip: Benchmark.Clip, tracker: MediaPipeFaceTracker) throws -> CallParticipant {
            let configuration = CallSession.Configuration(
                server: url, room: "bench", user: user, token: try authority.issue(room: "bench", user: user, lifetime: 600),
                audioInput: voices[user] ?? .silence, statisticsInterval: 1)
            let person = CallParticipant(configuration: configuration, remote: remote, clip: clip.frames,
                                         capture: ExpressionCapture(tracker: tracker), framesPerSecond: framesPerSecond, size: size)
            everyone.append(person)
            return person
        }
        func ms(_ from: UInt64, _ to: UInt64) -> Double { BenchReport.rounded(Double(Int64(bitPattern: to &- from)) / 1000) }

        // Alice joins an empty room, then films and draws for the whole run.
        let alice = try participant("alice", remote: "bob", clip: aliceClip, tracker: tracker)
        let aliceStarted = alice.start()
        guard let aliceJoined = alice.recorder.wait(timeout: 10, for: { alice.recorder.firstEvent(after: aliceStarted, matching: \.isJoined) }) else {
            throw VeilError.io("bench call: alice did not join the embedded room server within 10 s (\(alice.recorder.describeEvents()))")
        }
        alice.startCapture()
        alice.startRendering()

        // Bob joins where alice waits: signalling, then ICE + DTLS, then the first expression and voice.
        let bobTracker = try MediaPipeFaceTracker()
        var joinSamples: [BenchReport.Call.Join] = []
        let joinCount = max(joins, 1)
        var bob: CallParticipant?
        for attempt in 1...joinCount {
            let person = try participant("bob", remote: "alice", clip: bobClip, tracker: bobTracker)
            alice.recorder.readSenderClock { person.session.clock(for: "alice") }
            person.recorder.readSenderClock { [session = alice.session] in session.clock(for: "bob") }
            let r = person.recorder
            let started = person.start()
            guard let joined = r.wait(timeout: 10, for: { r.firstEvent(after: started, matching: \.isJoined) }) else {
                throw VeilError.io("bench call: bob did not join within 10 s (join \(attempt); \(r.describeEvents()))")
            }
            guard let connected = r.wait(timeout: 15, for: { r.firstEvent(after: started, matching: { $0.isPeerConnected(to: "alice") }) }) else {
                throw VeilError.io("bench call: bob's connection to alice did not come up within 15 s (join \(attempt); \(r.describeEvents()))")
            }
            guard let firstFrame = r.wait(timeout: 10, for: { r.firstArrival }) else {
                throw VeilError.io("bench call: no expression frame from alice reached bob within 10 s of connecting (join \(attempt))")
            }
            let firstVoice = r.wait(timeout: 5, for: { r.firstVoiceHeard })
            joinSamples.append(BenchReport.Call.Join(joinedMilliseconds: ms(started, joined), connectedMilliseconds: ms(started, connected),
                                                     firstExpressionMilliseconds: ms(started, firstFrame),
                                                     firstVoiceMilliseconds: firstVoice.map { ms(started, $0) }))
            if !quiet {
                Terminal.note(String(format: "call: bob joined (%d/%d): in the room %.0f ms, connected %.0f ms, first expression %.0f ms",
                                     attempt, joinCount, ms(started, joined), ms(started, connected), ms(started, firstFrame)))
            }
            if attempt == joinCount { bob = person; break }
            person.leave()
            guard alice.recorder.wait(timeout: 5, for: {
                alice.recorder.firstEvent(after: started, matching: { $0.isParticipantLeft("bob") })
            }) != nil else {
                throw VeilError.io("bench call: alice was not told that bob left within 5 s (join \(attempt))")
            }
        }
        guard let bob else { throw VeilError.io("bench call: bob never stayed in the call") }
        bob.startCapture()
        bob.startRendering()

        // Lip-sync needs the voices' timing: the first RTCP sender report each way (≈ 1 s).
        let timed = [alice, bob].allSatisfy { person in person.recorder.wait(timeout: 10, for: { person.recorder.voiceTimingKnownAt }) != nil }
        if !timed, !quiet { Terminal.note("call: a voice's timing (RTCP sender report) did not arrive; avatars follow their own delay") }
        let windowStart = PeerConnection.mediaTimeMicros + UInt64(warmUpSeconds * 1e6)
        let windowEnd = windowStart + UInt64(measuredSeconds * 1e6)
        // Frames captured near the end need up to the longest playout delay to be drawn.
        let stop = windowEnd + 600_000
        if !quiet {
            Terminal.note(String(format: "call: alice and bob talking; measuring %g s after %g s to settle", measuredSeconds, warmUpSeconds))
        }
        while PeerConnection.mediaTimeMicros < stop {
            Thread.sleep(forTimeInterval: min(0.25, Double(stop - min(stop, PeerConnection.mediaTimeMicros)) / 1e6))
            if let failure = alice.recorder.failure ?? bob.recorder.failure { throw VeilError.io("bench call: \(failure)") }
        }
        alice.stopThreads()
        bob.stopThreads()
        alice.leave()
        bob.leave()

        let window = windowStart...windowEnd
        let directions = [(alice, bob), (bob, alice)].map { sender, receiver in
            (sender: sender, receiver: receiver, frames: Self.frameTimings(from: sender.recorder, to: receiver.recorder, capturedIn: window))
        }
        let frames = directions.flatMap(\.frames)
        let shown = frames.compactMap(\.shown)
        let ticks = [alice, bob].flatMap { $0.recorder.ticks(in: window) }
        let leads = ticks.compactMap(\.audioLeadMicros).map { Double($0) / 1000 }
        var sources: [String: Int] = [:]
        for tick in ticks { sources[tick.source ?? "none", default: 0] += 1 }
        let voiceTimes = [alice, bob].map { $0.recorder.voiceTimes(playedIn: window) }

        var call = BenchReport.Call(
            voice: voiceDescription, framesPerSecond: framesPerSecond, warmUpSeconds: warmUpSeconds, measuredSeconds: measuredSeconds,
            aliceJoinedMilliseconds: ms(aliceStarted, aliceJoined), joinSamples: joinSamples)
        call.framesCaptured = frames.count
        call.framesArrived = frames.filter { $0.arrival != nil }.count
        call.framesShown = shown.count
        call.endToEnd = Stats(shown.map(\.endToEnd))
        call.tracking = Stats(shown.map(\.tracking))
        call.encoding = Stats(shown.map(\.encoding))
        call.network = Stats(frames.compactMap(\.network))
        call.jitterBuffer = Stats(shown.map(\.jitterBuffer))
        call.render = Stats(shown.map(\.render))
        call.renderTick = Stats(ticks.map { Double($0.drawnMicros - $0.time) / 1000 })
        call.voiceMouthToEar = Stats(voiceTimes.flatMap(\.sinceCapture).map { Double($0) / 1000 })
        call.voicePlayedAfterAnnounced = Stats(voiceTimes.flatMap(\.afterPlayout).map { Double($0) / 1000 })
        call.lipSyncAudioLead = Stats(leads)
        call.lipSyncAudioLeadP5 = BenchReport.rounded(Stats.percentile(5, ofSorted: leads.sorted()))
        call.lipSyncInside = leads.isEmpty ? 0 : BenchReport.rounded(Double(leads.filter {
            LipSync.isAcceptable(audioLeadMicros: Int64(($0 * 1000).rounded()))
        }.count) / Double(leads.count))
        call.playoutSources = sources
        call.directions = directions.map { direction in
            Self.traffic(sender: direction.sender, receiver: direction.receiver, frames: direction.frames, window: window)
        }
        call.candidatePair = alice.recorder.lastSnapshot(for: "bob")?.peer.candidatePair.map { "\($0.local) ↔ \($0.remote)" }
        call.wallSeconds = BenchReport.rounded(Double(PeerConnection.mediaTimeMicros - began) / 1e6)
        return call
    }

    /// Every frame `sender` captured in `window`, with when `receiver` got it and first drew it.
    static func frameTimings(from sender: CallRecorder, to receiver: CallRecorder, capturedIn window: ClosedRange<UInt64>) -> [FrameTiming] {
        let sent = sender.sentFrames(capturedIn: window)
        let (arrivals, shown) = receiver.arrivalsAndShown()
        return sent.map { sequence, frame in
            FrameTiming(sent: frame, arrival: arrivals[sequence], shownAt: shown[sequence])
        }
    }

    /// What one direction put on the wire per second over `window`, from the sender's statistics.
    static func traffic(sender: CallParticipant, receiver: CallParticipant, frames: [FrameTiming],
                        window: ClosedRange<UInt64>) -> BenchReport.Call.Direction {
        let snapshots = sender.recorder.snapshots(for: receiver.user, in: window.lowerBound...(window.upperBound + 1_000_000))
        var direction = BenchReport.Call.Direction(from: sender.user, to: receiver.user)
        if let first = snapshots.first, let last = snapshots.last, snapshots.count >= 2 {
            let seconds = snapshots.dropFirst().reduce(0) { $0 + $1.peer.intervalSeconds }
            if seconds > 0 {
                direction.statisticsSeconds = BenchReport.rounded(seconds)
                direction.expressionBytesPerSecond = BenchReport.rounded(Double(last.peer.expression.bytesSent - first.peer.expression.bytesSent) / seconds)
                direction.expressionFramesPerSecond = BenchReport.rounded(Double(last.peer.expression.framesSent - first.peer.expression.framesSent) / seconds)
                direction.audioBytesPerSecond = BenchReport.rounded(Double(last.peer.audioBytesSent - first.peer.audioBytesSent) / seconds)
                direction.framesDropped = last.peer.expression.framesDropped - first.peer.expression.framesDropped
            }
            direction.roundTripMilliseconds = last.peer.roundTripTimeMillis.map(BenchReport.rounded)
        }
        let received = receiver.recorder.snapshots(for: sender.user, in: window.lowerBound...(window.upperBound + 1_000_000))
        if let first = received.first?.buffer, let last = received.last?.buffer {
            direction.lateDropped = last.lateDropped - first.lateDropped
            direction.bufferTargetDelayMilliseconds = BenchReport.rounded(Double(last.targetDelayMicros) / 1000)
        }
        direction.endToEnd = Stats(frames.compactMap(\.shown).map(\.endToEnd))
        return direction
    }
}

/// One frame's way from capture to the other side's screen; every time on the shared media clock.
struct FrameTiming {
    var sent: CallRecorder.Sent
    var arrival: CallRecorder.Arrival?
    var shownAt: CallRecorder.Shown?

    /// Send → arrival, milliseconds (nil when the frame never arrived).
    var network: Double? { arrival.map { Double(Int64(bitPattern: $0.time &- sent.encoded)) / 1000 } }

    /// The stages of a frame that was drawn, milliseconds; they add up to `endToEnd`.
    struct Stages {
        var tracking: Double
        var encoding: Double
        var network: Double
        var jitterBuffer: Double
        var render: Double
        var endToEnd: Double
    }

    var shown: Stages? {
        guard let arrival, let shownAt else { return nil }
        func ms(_ from: UInt64, _ to: UInt64) -> Double { Double(Int64(bitPattern: to &- from)) / 1000 }
        return Stages(tracking: ms(sent.captured, sent.tracked), encoding: ms(sent.tracked, sent.encoded),
                      network: ms(sent.encoded, arrival.time), jitterBuffer: ms(arrival.time, shownAt.tick),
                      render: ms(shownAt.tick, shownAt.drawn), endToEnd: ms(sent.captured, shownAt.drawn))
    }
}

/// What one participant of the benchmark call saw, written from the capture and render threads,
/// GStreamer's streaming threads and the session's streams, read by the benchmark. Every record
/// sits behind a `Mutex`; `changed` is signalled after each write a waiter may be waiting for, so
/// `wait(timeout:for:)` wakes up instead of polling.
final class CallRecorder: Sendable {
    /// A frame this participant captured and sent (media clock, µs).
    struct Sent: Sendable {
        /// Captured: the frame handed to tracking.
        var captured: UInt64
        /// `ExpressionCapture.process` returned.
        var tracked: UInt64
        /// `encoded()` returned; `CallSession.send` is called right after.
        var encoded: UInt64
    }

    /// A frame of the other participant's as it arrived here.
    struct Arrival: Sendable {
        var time: UInt64
        var bytes: Int
    }

    /// The first picture in which a received frame carried the most weight.
    struct Shown: Sendable {
        /// The render tick: the time passed to `CallSession.playout(for:at:)`.
        var tick: UInt64
        /// The picture drawn and copied out.
        var drawn: UInt64
    }

    /// One picture drawn.
    struct Tick: Sendable {
        var time: UInt64
        var drawnMicros: UInt64
        var source: String?
        var audioLeadMicros: Int64?
    }

    /// One statistics report about one peer.
    struct Snapshot: Sendable {
        var time: UInt64
        var peer: PeerStatistics
        var buffer: ExpressionJitterBuffer.Statistics?
    }

    /// The other's voice as it reached the sink. The sink syncs to the clock, so the callback
    /// comes when the buffer is played.
    private struct Voice: Sendable {
        var firstHeard: UInt64?
        var timingKnownAt: UInt64?
        /// Per buffer once its sender time is known: when it was played, how long after its
        /// capture, and how long after the playout time the session announced for it (µs).
        var heard: [(time: UInt64, sinceCapture: Int64, afterPlayout: Int64)] = []
    }

    private let events = Mutex<[(time: UInt64, event: CallSession.Event)]>([])
    private let sent = Mutex<[UInt32: Sent]>([:])
    private let arrivals = Mutex<(first: UInt64?, all: [UInt32: Arrival])>((nil, [:]))
    private let shown = Mutex<(ticks: [Tick], first: [UInt32: Shown])>(([], [:]))
    private let snapshots = Mutex<[String: [Snapshot]]>([:])
    private let voice = Mutex(Voice())
    private let failed = Mutex<String?>(nil)
    private let changed = DispatchSemaphore(value: 0)
    /// Reads the clock the other participant's connection shows this one (nil before it connects).
    private let senderClockLookup = Mutex<(@Sendable () -> ConnectionClock?)?>(nil)

    /// Where to read the sender's connection clock, to move received frame sequences and times back
    /// to the sender's own (the shared media clock); what arrives before it is known is not timed.
    func readSenderClock(_ lookup: @escaping @Sendable () -> ConnectionClock?) {
        senderClockLookup.withLock { $0 = lookup }
    }

    private var senderClock: ConnectionClock? { senderClockLookup.withLock { $0 }?() }

    // MARK: Writing

    func record(_ event: CallSession.Event, at time: UInt64) {
        events.withLock { $0.append((time, event)) }
        if case .statistics(let statistics) = event {
            snapshots.withLock { all in
                for (user, peer) in statistics.peers {
                    all[user, default: []].append(Snapshot(time: time, peer: peer, buffer: statistics.expressionBuffers[user]))
                }
            }
        }
        changed.signal()
    }

    func sent(_ sequence: UInt32, _ frame: Sent) { sent.withLock { $0[sequence] = frame } }

    func arrived(_ received: ReceivedExpressionFrame) {
        let sequence = senderClock.map { $0.localSequence(ofSent: received.frame.sequence) }
        arrivals.withLock { a in
            if a.first == nil { a.first = received.arrivalMediaTimeMicros }
            if let sequence { a.all[sequence] = Arrival(time: received.arrivalMediaTimeMicros, bytes: received.byteCount) }
        }
        changed.signal()
    }

    /// `dominant`: the sequence number, as received, of the frame that weighs most in the picture.
    func drew(_ tick: Tick, dominant received: UInt32?) {
        let clock = received == nil ? nil : senderClock
        let dominant = received.flatMap { sequence in clock.map { $0.localSequence(ofSent: sequence) } }
        shown.withLock { s in
            s.ticks.append(tick)
            if let dominant, s.first[dominant] == nil { s.first[dominant] = Shown(tick: tick.time, drawn: tick.drawnMicros) }
        }
    }

    func heard(_ audio: ReceivedAudio) {
        let now = PeerConnection.mediaTimeMicros
        let clock = audio.senderMediaTimeMicros == nil ? nil : senderClock
        voice.withLock { v in
            if v.firstHeard == nil { v.firstHeard = now }
            if let wire = audio.senderMediaTimeMicros, let sender = clock?.localMicros(ofConnectionMicros: wire) {
                if v.timingKnownAt == nil { v.timingKnownAt = now }
                v.heard.append((time: now, sinceCapture: Int64(bitPattern: now &- sender),
                                afterPlayout: Int64(bitPattern: now &- audio.playoutTimeMicros)))
            }
        }
        changed.signal()
    }

    func fail(_ message: String) {
        failed.withLock { $0 = $0 ?? message }
        changed.signal()
    }

    // MARK: Reading

    /// Blocks until `condition` gives a value or `timeout` seconds pass.
    func wait<T>(timeout: TimeInterval, for condition: () -> T?) -> T? {
        let deadline = DispatchTime.now() + timeout
        while true {
            if let value = condition() { return value }
            if changed.wait(timeout: deadline) == .timedOut { return condition() }
        }
    }

    /// When the first event after `time` that matches arrived.
    func firstEvent(after time: UInt64, matching predicate: (CallSession.Event) -> Bool) -> UInt64? {
        events.withLock { $0.first { $0.time >= time && predicate($0.event) }?.time }
    }

    /// The events so far in a few words, for error messages.
    func describeEvents() -> String {
        let names = events.withLock { $0.map { "\($0.event)".prefix(60) } }
        return names.isEmpty ? "no events" : "events: " + names.suffix(6).joined(separator: "; ")
    }

    var firstArrival: UInt64? { arrivals.withLock { $0.first } }
    var firstVoiceHeard: UInt64? { voice.withLock { $0.firstHeard } }
    var voiceTimingKnownAt: UInt64? { voice.withLock { $0.timingKnownAt } }
    var failure: String? { failed.withLock { $0 } }

    func sentFrames(capturedIn window: ClosedRange<UInt64>) -> [(UInt32, Sent)] {
        sent.withLock { $0.filter { window.contains($0.value.captured) }.map { ($0.key, $0.value) } }
    }

    func arrivalsAndShown() -> ([UInt32: Arrival], [UInt32: Shown]) {
        (arrivals.withLock { $0.all }, shown.withLock { $0.first })
    }

    func ticks(in window: ClosedRange<UInt64>) -> [Tick] { shown.withLock { $0.ticks.filter { window.contains($0.time) } } }

    /// The voice's capture → playout time and its playout minus the announced playout time, µs,
    /// of the buffers played in `window`.
    func voiceTimes(playedIn window: ClosedRange<UInt64>) -> (sinceCapture: [Int64], afterPlayout: [Int64]) {
        voice.withLock { v in
            let heard = v.heard.filter { window.contains($0.time) }
            return (heard.map(\.sinceCapture), heard.map(\.afterPlayout))
        }
    }

    func snapshots(for user: String, in window: ClosedRange<UInt64>) -> [Snapshot] {
        snapshots.withLock { ($0[user] ?? []).filter { window.contains($0.time) } }
    }

    func lastSnapshot(for user: String) -> Snapshot? { snapshots.withLock { $0[user]?.last } }
}

/// One person in the benchmark call: a `CallSession`, a clip "filmed" and tracked at 30 fps on a
/// capture thread, and the other person's avatar drawn at 30 fps on a render thread, every time
/// that matters going to `recorder`.
///
/// `@unchecked Sendable`: the capture (tracker and estimator) is used only by the capture thread
/// and the canvas only by the render thread; what they share is in `recorder`, `own` and
/// `running`, each behind a `Mutex`, and the session is itself thread-safe.
final class CallParticipant: @unchecked Sendable {
    var user: String { session.configuration.user }
    /// Whose avatar this participant draws.
    let remote: String
    let session: CallSession
    let recorder = CallRecorder()
    private let clip: [RGBImage]
    private let capture: ExpressionCapture
    private let interval: Double
    private let size: (width: Int, height: Int)
    private let running = Mutex(true)
    private let own = Mutex(VeilCore.Expression.neutral)
    private let threads = DispatchGroup()
    private let hasLeft = Mutex(false)

    init(configuration: CallSession.Configuration, remote: String, clip: [RGBImage], capture: ExpressionCapture,
         framesPerSecond: Double, size: (width: Int, height: Int)) {
        var configuration = configuration
        let recorder = self.recorder
        // Decoded voices come back with their capture and playout times.
        configuration.audioOutput = { _ in .callback { recorder.heard($0) } }
        session = CallSession(configuration: configuration)
        self.remote = remote
        self.clip = clip
        self.capture = capture
        interval = 1e6 / framesPerSecond
        self.size = size
        // The streams, not the session, are captured: the tasks end when the session goes away.
        let events = session.events, frames = session.expressionFrames
        Task {
            for await event in events { recorder.record(event, at: PeerConnection.mediaTimeMicros) }
        }
        Task {
            for await received in frames { recorder.arrived(received.frame) }
        }
    }

    /// Joins the room; returns the media time just before.
    func start() -> UInt64 {
        let time = session.mediaTimeMicros
        session.start()
        return time
    }

    /// Feeds the clip (looped) to tracking in real time and sends each frame.
    func startCapture() {
        guard !clip.isEmpty else { return }
        threads.enter()
        let thread = Thread { [self] in
            defer { threads.leave() }
            let start = session.mediaTimeMicros
            var index = 0
            while running.withLock({ $0 }) {
                let due = start + UInt64((Double(index) * interval).rounded())
                let now = session.mediaTimeMicros
                if due > now { Thread.sleep(forTimeInterval: Double(due - now) / 1e6) }
                let image = clip[index % clip.count]
                index += 1
                let captured = session.mediaTimeMicros
                let output: ExpressionCapture.Output
                do { output = try capture.process(image, captureTimeMicros: captured) } catch {
                    recorder.fail("\(user)'s tracking failed: \(error)")
                    return
                }
                let tracked = session.mediaTimeMicros
                _ = output.frame.encoded()
                let encoded = session.mediaTimeMicros
                session.send(output.frame)
                recorder.sent(output.frame.sequence, CallRecorder.Sent(captured: captured, tracked: tracked, encoded: encoded))
                if output.frame.state == .tracked { own.withLock { $0 = output.frame.expression } }
            }
        }
        thread.name = "veil-bench-capture-\(user)"
        thread.start()
    }

    /// Draws the remote avatar full size and this participant's own inset, as `veil call` does.
    func startRendering() {
        threads.enter()
        let thread = Thread { [self] in
            defer { threads.leave() }
            let canvas: CairoCanvas
            do { canvas = try CairoCanvas(width: size.width, height: size.height) } catch {
                recorder.fail("\(user)'s canvas could not be created: \(error)")
                return
            }
            let renderer = AvatarRenderer()
            var image = RGBImage(width: size.width, height: size.height)
            let start = session.mediaTimeMicros
            var index = 0
            while running.withLock({ $0 }) {
                let tick = session.mediaTimeMicros
                var views: [CompositorView] = []
                var dominant: ExpressionJitterBuffer.FrameReference?
                var source: String?
                var lead: Int64?
                if let playout = session.playout(for: remote, at: tick) {
                    source = "\(playout.source)"
                    dominant = [playout.earlier, playout.later].compactMap { $0 }.max { $0.weight < $1.weight }
                    // As `veil call` measures it: the voice heard now against the capture time of
                    // the frame that weighs most in the picture.
                    if playout.source == .frame || playout.source == .interpolated, !session.isMuted(remote), let dominant {
                        lead = LipSync.audioLeadMicros(audioMediaTimeMicros: playout.mediaTimeMicros, sourceTimeMicros: dominant.captureTimeMicros)
                    }
                    views.append(CompositorView(expression: playout.expression, label: remote, style: .mask, background: AvatarBackground.default))
                }
                let me = CompositorView(expression: own.withLock { $0 }, label: "you", style: .mask, background: AvatarBackground.default)
                Compositor(layout: views.isEmpty ? .grid : .pictureInPicture).render(views + [me], with: renderer, into: canvas)
                canvas.copy(into: &image)
                let drawn = session.mediaTimeMicros
                recorder.drew(CallRecorder.Tick(time: tick, drawnMicros: drawn, source: source, audioLeadMicros: lead),
                              dominant: dominant?.sequence)
                index += 1
                let next = start + UInt64((Double(index) * interval).rounded())
                let now = session.mediaTimeMicros
                if next > now { Thread.sleep(forTimeInterval: Double(next - now) / 1e6) }
            }
        }
        thread.name = "veil-bench-render-\(user)"
        thread.start()
    }

    /// Stops capturing and drawing and waits for both threads.
    func stopThreads() {
        running.withLock { $0 = false }
        _ = threads.wait(timeout: .now() + 5)
    }

    /// Stops the threads and leaves the room (once; later calls do nothing).
    func leave() {
        guard !hasLeft.withLock({ left in defer { left = true }; return left }) else { return }
        stopThreads()
        let done = DispatchSemaphore(value: 0)
        Task { [session] in
            await session.leave()
            done.signal()
        }
        _ = done.wait(timeout: .now() + 5)
    }
}

private extension CallSession.Event {
    var isJoined: Bool {
        if case .joined = self { return true }
        return false
    }

    func isPeerConnected(to user: String) -> Bool {
        if case .peerState(user, .connected) = self { return true }
        return false
    }

    func isParticipantLeft(_ user: String) -> Bool {
        if case .participantLeft(user, _) = self { return true }
        return false
    }
}
