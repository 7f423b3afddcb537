import CGStreamer
import CVeilGLib
import CVeilWebRTC
import Dispatch
import Foundation
import Synchronization
import VeilCore
import VeilGLib

/// A WebRTC connection to one remote participant, on GStreamer's webrtcbin: Opus voice both ways
/// and the "expressions" data channel (unordered, no retransmissions) carrying `ExpressionFrame`s.
/// Nothing else can travel: no API here accepts an image, and every session description is checked
/// by `SessionDescriptionPolicy` (no `m=video`) before it is sent or applied.
///
/// Signaling is the caller's: read `signaling` and deliver each item to the remote peer, and hand
/// what the remote sends to `setRemoteDescription(type:sdp:)` / `addRemoteCandidate(mline:candidate:)`
/// (or `receive(_:)`). The `.offerer` starts negotiation by itself; the `.answerer` waits for the offer.
///
/// Times: `mediaTimeMicros` is the device's media clock (the system's monotonic clock,
/// CLOCK_MONOTONIC in µs, shared by every `PeerConnection` in the process and by any GStreamer
/// pipeline on the default system clock: a camera buffer's running time plus its pipeline's base
/// time, in µs, is on this clock). Stamp `ExpressionFrame.captureTimeMicros` with it. The peer never
/// sees it: each connection moves what it sends (frame times and sequence numbers, RTCP sender
/// reports) to a clock of its own with a random origin (`clock`, `ConnectionClock`), and the
/// receiving side maps that to its audio playout time with `playoutMapping`.
///
/// ICE restart is not offered: GStreamer 1.22's webrtcbin has no way to restart ICE. A connection
/// that reaches `failed` is replaced by a new pair of `PeerConnection`s negotiated over signaling.
///
/// `@unchecked Sendable`: the GStreamer objects live in `graph` and are created, changed and
/// released only on `loop`'s thread; what GStreamer's streaming threads touch is either immutable
/// after `init` or inside the one mutex `shared`; the stream continuations are thread-safe.
public final class PeerConnection: @unchecked Sendable {
    /// Who sends the offer.
    public enum Role: Sendable, Equatable {
        /// Creates the data channel and sends the offer as soon as it starts.
        case offerer
        /// Waits for the remote offer and answers it.
        case answerer
    }

    /// The connection state, as in the W3C `RTCPeerConnectionState` (webrtcbin's `connection-state`).
    public enum State: String, Sendable, Equatable {
        /// Created; negotiation or ICE has not started.
        case new
        /// ICE checks or the DTLS handshake are under way.
        case connecting
        /// Media and the data channel can flow.
        case connected
        /// Connectivity was lost; ICE may still recover it.
        case disconnected
        /// ICE or DTLS failed, negotiation was refused, or the pipeline failed. Recover by closing
        /// this connection and negotiating a new one (webrtcbin 1.22 cannot restart ICE).
        case failed
        /// `close()` was called.
        case closed
    }

    /// Who sends the offer.
    public let role: Role
    /// The settings the connection was created with.
    public let configuration: PeerConfiguration
    /// The clock the remote peer sees: the device's media clock moved to a random origin, and
    /// expression sequence numbers moved by a random amount, drawn for this connection alone.
    /// Known only here; translate what the peer reports back with it (e.g. in a measurement).
    public var clock: ConnectionClock { graph.clock }
    /// What the signaling channel must deliver to the remote peer, in order: the local description,
    /// then ICE candidates as they are gathered. Unbounded: nothing may be lost.
    public let signaling: AsyncStream<PeerSignal>
    /// State changes, data-channel open/close, failures. Unbounded (a few per call).
    public let events: AsyncStream<PeerEvent>
    /// Expression frames from the remote peer, decoded; invalid payloads are counted and dropped.
    /// Keeps the newest 64 when the consumer lags (real-time data: old frames are worthless).
    public let expressionFrames: AsyncStream<ReceivedExpressionFrame>
    /// The speech level of the voice being sent, per captured buffer (10–20 ms), after mute: what
    /// a voice-driven avatar is made from, timed on the media clock like the audio itself.
    /// Keeps the newest 256 (about 3 s) when the consumer lags.
    public let outgoingLevels: AsyncStream<AudioLevel>

    let loop: GLibLoop
    let input: AudioInput
    let output: AudioOutput
    let graph: PeerGraph
    /// The received voice between the jitter buffer and the output (`AudioPlayoutStage`).
    let playout: AudioPlayoutStage
    let shared: Mutex<Shared>
    let signalingSink: AsyncStream<PeerSignal>.Continuation
    let eventSink: AsyncStream<PeerEvent>.Continuation
    let frameSink: AsyncStream<ReceivedExpressionFrame>.Continuation
    let levelSink: AsyncStream<AudioLevel>.Continuation

    /// State touched from GStreamer's threads and from callers.
    struct Shared: ~Copyable {
        var state = State.new
        var createdMicros: UInt64
        var connectedMicros: UInt64?
        /// When the input file's first sample enters the call (`.file` input, once connected).
        var fileStartMicros: UInt64?
        /// When the last RTP packet or data-channel message arrived from the remote peer.
        var lastMediaMicros: UInt64?
        var counters = PeerCounters()
        var channelOpen = false
        var muted = false
        /// What the mute element was last set to, by the outgoing audio's own thread.
        var appliedMute = false
        var closing = false
        var audioLinked = false
        var receiveBin: ElementRef?
        /// The appsrc the playout thread feeds (sound server and file outputs).
        var playoutSource: ElementRef?
        /// The PulseAudio sink the received voice plays on (nil: the server's default).
        var outputDevice: String?
        /// The pipeline's latency: what its output sink adds to each block's timestamp.
        var latencyNanos: UInt64 = 0
        var lastSample: StatsSample?
        /// The last description the remote peer sent (what this side learns of it; tests read it).
        var remoteDescription: String?
        /// Set while `close()` waits for the data channel to close.
        var onChannelClosed: (@Sendable () -> Void)?
    }

    /// Takes GStreamer's per-process DTLS certificate generation (RSA, 0.1–1 s) up front, so that
    /// the first connection does not wait for it. Idempotent and thread-safe; it blocks, so call it
    /// from a background thread (`Task.detached`, a `Thread`) while the app starts.
    public static func prepare() throws {
        try CallGStreamer.certificate.get()
    }

    /// The media clock in microseconds: the system's monotonic clock, which every `PeerConnection`
    /// pipeline uses and on which the audio is captured and RTCP sender reports are stamped.
    public static var mediaTimeMicros: UInt64 { UInt64(g_get_monotonic_time()) }

    /// The media clock now (µs); the same for every connection in the process. Stamp
    /// `ExpressionFrame.captureTimeMicros` with it at the moment the camera frame was captured.
    public var mediaTimeMicros: UInt64 { Self.mediaTimeMicros }

    /// Creates the connection's pipeline on `loop` (which must be running; one loop can serve
    /// many connections) and starts it: audio capture and encoding run, ICE gathering and (for the
    /// offerer) the offer begin at once. Blocks for the few milliseconds the pipeline takes to
    /// build (plus the certificate generation, once per process, unless `prepare()` ran). Throws
    /// when GStreamer or one of its WebRTC plugins is missing, when an input file is not readable,
    /// or when the audio input cannot start (e.g. no PulseAudio server).
    public init(loop: GLibLoop, role: Role, audioSource: AudioInput, audioOutput: AudioOutput = .discard,
                configuration: PeerConfiguration = PeerConfiguration()) throws {
        try CallGStreamer.initialize()
        if case .file(let url) = audioSource, !FileManager.default.isReadableFile(atPath: url.path) {
            throw PeerError(.invalidArgument, "audio input file \(url.path) is not readable; check the path")
        }
        if case .file(let url) = audioOutput {
            let directory = url.deletingLastPathComponent().path
            guard FileManager.default.isWritableFile(atPath: directory.isEmpty ? "." : directory) else {
                throw PeerError(.invalidArgument, "audio output directory \(directory) is not writable; choose another path")
            }
        }
        self.loop = loop
        self.role = role
        self.configuration = configuration
        self.input = audioSource
        self.output = audioOutput
        var initial = Shared(createdMicros: UInt64(g_get_monotonic_time()))
        if case .pulse(let device) = audioOutput { initial.outputDevice = device }
        shared = Mutex(initial)
        (signaling, signalingSink) = AsyncStream.makeStream(of: PeerSignal.self, bufferingPolicy: .unbounded)
        (events, eventSink) = AsyncStream.makeStream(of: PeerEvent.self, bufferingPolicy: .unbounded)
        (expressionFrames, frameSink) = AsyncStream.makeStream(of: ReceivedExpressionFrame.self, bufferingPolicy: .bufferingNewest(64))
        (outgoingLevels, levelSink) = AsyncStream.makeStream(of: AudioLevel.self, bufferingPolicy: .bufferingNewest(256))
        let clock = ConnectionClock.random(at: UInt64(g_get_monotonic_time()))
        playout = AudioPlayoutStage(configuration: AdaptivePlayout.Configuration(fixedDelayMicros: configuration.playoutDelayMillis.map { UInt64($0) * 1000 }),
                                    jitterBufferWaitMicros: UInt64(configuration.jitterBufferMillis) * 1000)
        graph = try loop.sync { [configuration] in try PeerGraph(input: audioSource, configuration: configuration, clock: clock) }
        playout.connect(playoutOutput())
        do {
            try loop.sync { try self.start() }
        } catch {
            let graph = self.graph
            loop.perform { graph.teardown() }
            throw error
        }
    }

    deinit {
        playout.stop()
        let graph = self.graph
        loop.perform { graph.teardown() }
        signalingSink.finish()
        eventSink.finish()
        frameSink.finish()
        levelSink.finish()
    }

    // MARK: - Public API

    /// The current connection state.
    public var state: State { shared.withLock { $0.state } }

    /// When (media clock, µs) the remote peer was last heard from: its last RTP packet (its voice
    /// flows continuously, muted or not) or data-channel message, or the moment the connection was
    /// established if nothing has come since; nil before it was. A connected peer not heard from
    /// for seconds has lost its network path, even while webrtcbin still reports `connected`
    /// (GStreamer 1.22 does not check consent).
    public var lastHeardMicros: UInt64? {
        shared.withLock { s in s.connectedMicros.map { max($0, s.lastMediaMicros ?? 0) } }
    }

    /// For a `.file` audio input: the media time (µs) at which the file's first sample is sent,
    /// i.e. its capture time on the clock `ExpressionFrame.captureTimeMicros` uses; sample `n`
    /// follows at `n / 48 000` s after it. Nil before the connection is first established (the
    /// file starts then) and for other inputs. Stamp frames of a video recorded with the file
    /// with it to keep them in sync.
    public var audioFileStartMicros: UInt64? { shared.withLock { $0.fileStartMicros } }

    /// Whether the expression data channel is open.
    public var isDataChannelOpen: Bool { shared.withLock { $0.channelOpen } }

    /// Whether the microphone is muted (the track stays up and carries silence).
    public var isMuted: Bool { shared.withLock { $0.muted } }

    /// How the remote sender's media time maps to local playout time, once the first RTCP sender
    /// report has arrived (about a second after audio starts); nil before. Its latency is the
    /// playout's delay now, which adapts to the network: ask again for each picture.
    public var playoutMapping: PlayoutMapping? {
        guard var mapping = playout.mapping else { return nil }
        if mapping.latencyMicros == 0 { mapping.latencyMicros = shared.withLock { $0.latencyNanos / 1000 } }
        return mapping
    }

    /// What the received voice's playout did so far: its target and current delay, and how much
    /// audio it stretched, shrank or made up (`AdaptivePlayout`).
    public var playoutStatistics: AdaptivePlayout.Statistics { playout.statistics }

    /// The local media time (µs) at which audio the remote captured at `senderMicros` (e.g. a
    /// received frame's `captureTimeMicros`) is played; nil until the mapping is known.
    public func playoutTimeMicros(forSenderMediaTimeMicros senderMicros: UInt64) -> UInt64? {
        playoutMapping?.playoutTimeMicros(forSenderMediaTimeMicros: senderMicros)
    }

    /// Applies the remote peer's offer (answerer) or answer (offerer). The answerer then creates its
    /// answer and emits it on `signaling`. Throws at once for a description that fails
    /// `SessionDescriptionPolicy` or does not parse, or that does not fit the role; webrtcbin's own
    /// refusal arrives later as a `.failure` event.
    public func setRemoteDescription(type: SessionDescription.Kind, sdp: String) throws {
        try SessionDescriptionPolicy.validate(sdp)
        switch (role, type) {
        case (.offerer, .offer):
            throw PeerError(.wrongState, "the offerer received an offer; only the answerer accepts offers (check the roles both sides were given)")
        case (.answerer, .answer):
            throw PeerError(.wrongState, "the answerer received an answer; only the offerer expects one (check the roles both sides were given)")
        default:
            break
        }
        guard !shared.withLock({ $0.closing }) else { throw PeerError(.closed, "the connection is closed") }
        var message: UnsafeMutablePointer<GstSDPMessage>?
        guard gst_sdp_message_new_from_text(sdp, &message) == GST_SDP_OK, let message else {
            throw PeerError(.invalidDescription, "the remote \(type.rawValue) is not valid SDP")
        }
        guard let description = gst_webrtc_session_description_new(type == .offer ? GST_WEBRTC_SDP_TYPE_OFFER : GST_WEBRTC_SDP_TYPE_ANSWER, message) else {
            gst_sdp_message_free(message)
            throw PeerError(.invalidDescription, "the remote \(type.rawValue) could not be wrapped")
        }
        let owned = OwnedDescription(description)
        shared.withLock { $0.remoteDescription = sdp }
        onLoop { $0.applyRemoteDescription(owned, type: type) }
    }

    /// Adds an ICE candidate from the remote peer (trickle ICE). Candidates that arrive before the
    /// remote description are held and added after it. An empty candidate (end of candidates) is
    /// ignored. Throws for a candidate that cannot be one (too long, control characters).
    public func addRemoteCandidate(mline: UInt32, candidate: String) throws {
        let text = (candidate.hasPrefix("a=") ? String(candidate.dropFirst(2)) : candidate)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        guard !text.isEmpty else { return }
        guard text.utf8.count <= 1024, mline < 64, text.hasPrefix("candidate:"),
              !text.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
            throw PeerError(.invalidDescription, "remote ICE candidate for m-line \(mline) is malformed; ignored")
        }
        // Browsers hide their host addresses behind random mDNS names (`<uuid>.local`) until the
        // page may use the microphone. libnice cannot reach them (it would try to resolve them,
        // in vain without an mDNS resolver), but nothing is lost: the browser's connectivity checks
        // reach this side's own candidates, and ICE pairs them as peer-reflexive.
        if ICECandidate.hasMulticastDNSAddress(text) { return }
        onLoop { $0.applyRemoteCandidate(ICECandidate(mline: mline, candidate: text)) }
    }

    /// Applies one signaling item from the remote peer (description or candidate).
    public func receive(_ signal: PeerSignal) throws {
        switch signal {
        case .description(let description): try setRemoteDescription(type: description.type, sdp: description.sdp)
        case .candidate(let candidate): try addRemoteCandidate(mline: candidate.mline, candidate: candidate.candidate)
        }
    }

    /// Sends an expression frame, stamped on the device's media clock, on the data channel (moved
    /// to the connection's clock, encoded, ≤ 128 bytes). Never queues stale
    /// data: when the frame would take the channel's unsent bytes beyond
    /// `configuration.maximumBufferedExpressionBytes`, or the channel is not open, the frame is
    /// dropped and counted (`PeerStatistics.expression.framesDropped`). Returns at once; the frame
    /// leaves from the loop's thread.
    public func send(_ frame: ExpressionFrame) {
        let payload = graph.clock.outgoing(frame).encoded()
        guard payload.count <= ExpressionFrame.maximumEncodedSize else {
            shared.withLock { $0.counters.framesDropped += 1 }
            return
        }
        onLoop { $0.transmit(payload) }
    }

    /// Mutes or unmutes the outgoing voice. The audio track stays negotiated and carries silence,
    /// so unmuting needs no renegotiation.
    public func setMuted(_ muted: Bool) {
        // Applied by the outgoing audio's thread to the next buffer it sends (`measureOutgoingLevel`),
        // so the voice and the levels that drive a voice-driven mouth change at the same sample.
        shared.withLock { $0.muted = muted }
    }

    /// Current figures: candidate pair, RTT, loss, jitter, audio bit rates, expression traffic and
    /// network quality. Rates cover the time since the previous call. Returns within about 3 s
    /// even if webrtcbin does not answer (then without the network figures).
    public func statistics() async -> PeerStatistics {
        let entries = await statsReport()
        let now = UInt64(g_get_monotonic_time())
        let playout = playout.statistics
        var statistics = shared.withLock { shared in
            let current = StatsSample(timeMicros: now, entries: entries, counters: shared.counters)
            let previous = shared.lastSample ?? StatsSample(timeMicros: shared.createdMicros, entries: [], counters: PeerCounters())
            // Rates over a few milliseconds say nothing: calls closer than half a second apart
            // measure from the same earlier snapshot.
            if now &- previous.timeMicros >= 500_000 || shared.lastSample == nil { shared.lastSample = current }
            let created = shared.createdMicros
            let connectMillis = shared.connectedMicros.map { Double($0 &- created) / 1000 }
            return PeerStatistics(current: current, previous: previous, state: shared.state, connectMillis: connectMillis)
        }
        statistics.playout = playout
        return statistics
    }

    /// webrtcbin's get-stats reply as entries; empty when closed or when it does not answer in 3 s.
    func statsReport() async -> [StatsEntry] {
        await withCheckedContinuation { continuation in
            let once = ResumeOnce(continuation)
            DispatchQueue.global().asyncAfter(deadline: .now() + 3) { once.resume([]) }
            loop.perform { [weak self] in
                guard let self, let webrtcbin = self.graph.liveWebrtcbin else { return once.resume([]) }
                let promise = makePromise { promise in once.resume(reply(of: promise).map(statsEntries) ?? []) }
                veil_webrtc_get_stats(webrtcbin, nil, promise)
                gst_promise_unref(promise)
            }
        }
    }

    /// Closes the data channel (the remote sees `.dataChannelClosed` at once: a hint that this side
    /// left), finalises an output file, stops the pipeline and ends the streams (state `closed`).
    /// Safe to call more than once; returns within about 3 s at worst, usually in milliseconds.
    public func close() async {
        let first = shared.withLock { shared -> Bool in
            defer { shared.closing = true }
            return !shared.closing
        }
        guard first else { return }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let once = ResumeOnce(continuation)
            DispatchQueue.global().asyncAfter(deadline: .now() + 5) { once.resume(()) }
            loop.perform { self.beginClosing { once.resume(()) } }
        }
    }

    // MARK: - Start (loop)

    func start() throws {
        let webrtcbin = graph.webrtcbin
        let object = gpointerOf(webrtcbin)

        GSignal.connect(object, "on-ice-candidate") { [weak self] (mline: UInt32, candidate: String) in
            guard let self, !candidate.isEmpty, !self.shared.withLock({ $0.closing }) else { return }
            self.signalingSink.yield(.candidate(ICECandidate(mline: mline, candidate: candidate)))
        }
        GSignal.connect(object, "notify::connection-state") { [weak self] (_: gpointer?) in
            guard let self else { return }
            self.update(State(webrtc: veil_object_get_int(gpointerOf(webrtcbin), "connection-state")))
        }
        GSignal.connect(object, "pad-added") { [weak self] (pad: gpointer?) in
            guard let self, let pad else { return }
            self.incomingPad(pad.assumingMemoryBound(to: GstPad.self))
        }
        GSignal.connect(object, "on-data-channel") { [weak self] (channel: gpointer?) in
            guard let self, let channel else { return }
            self.remoteOpenedChannel(OpaquePointer(channel))
        }
        if role == .offerer {
            GSignal.connect(object, "on-negotiation-needed") { [weak self] in
                self?.onLoop { $0.createOffer() }
            }
        }
        addBusWatch(graph.bus) { [weak self] message in self?.busMessage(message) }
        onDeepElementAdded(graph.pipeline) { [weak self] element in
            if factoryName(element) == "rtpjitterbuffer" { self?.watchArrivals(of: element) }
        }
        measureOutgoingLevel()

        guard gst_element_set_state(graph.pipeline, GST_STATE_READY) != GST_STATE_CHANGE_FAILURE else {
            throw startFailure()
        }
        if role == .offerer {
            // Before PLAYING, so that the first offer already has its m=application section.
            let label = configuration.expressionChannelLabel
            let options = gst_structure_new_empty("application/data-channel")
            defer { if let options { gst_structure_free(options) } }
            if let options {
                var ordered = GValue(), retransmits = GValue()
                g_value_init(&ordered, g_type_from_name("gboolean"))
                g_value_set_boolean(&ordered, 0)
                g_value_init(&retransmits, g_type_from_name("gint"))
                g_value_set_int(&retransmits, 0)
                gst_structure_take_value(options, "ordered", &ordered)
                gst_structure_take_value(options, "max-retransmits", &retransmits)
            }
            guard let channel = veil_webrtc_create_data_channel(webrtcbin, label, options) else {
                throw PeerError(.gstreamerUnavailable, "webrtcbin could not create the expression data channel; check gstreamer1.0-plugins-bad (sctp)")
            }
            attach(channel)
            graph.channel = channel
        }
        guard gst_element_set_state(graph.pipeline, GST_STATE_PLAYING) != GST_STATE_CHANGE_FAILURE else {
            throw startFailure()
        }
    }

    func startFailure() -> PeerError {
        let reason = graph.takePendingError() ?? "no reason given"
        if case .pulse = input {
            return PeerError(.mediaFailed, "the call could not start: \(reason); is PulseAudio (or PipeWire's pulse server) running, and does the input device exist (pactl list short sources)?")
        }
        return PeerError(.gstreamerUnavailable, "the call could not start: \(reason); check the GStreamer WebRTC plugins (gstreamer1.0-plugins-bad, gstreamer1.0-nice)")
    }

    // MARK: - Helpers

    /// Runs `body` on the loop with this connection, unless it has gone away.
    func onLoop(_ body: @escaping @Sendable (PeerConnection) -> Void) {
        loop.perform { [weak self] in
            if let self { body(self) }
        }
    }
}

extension PeerConnection.State {
    /// Maps webrtcbin's `GstWebRTCPeerConnectionState`.
    init(webrtc value: Int32) {
        switch UInt32(bitPattern: value) {
        case GST_WEBRTC_PEER_CONNECTION_STATE_CONNECTING.rawValue: self = .connecting
        case GST_WEBRTC_PEER_CONNECTION_STATE_CONNECTED.rawValue: self = .connected
        case GST_WEBRTC_PEER_CONNECTION_STATE_DISCONNECTED.rawValue: self = .disconnected
        case GST_WEBRTC_PEER_CONNECTION_STATE_FAILED.rawValue: self = .failed
        case GST_WEBRTC_PEER_CONNECTION_STATE_CLOSED.rawValue: self = .closed
        default: self = .new
        }
    }
}

// MARK: - Fault drills

extension PeerConnection {
    /// Makes the network path to the remote peer dead from now on: every packet in or out is
    /// dropped (an impairment with loss 1) while webrtcbin keeps running and reporting `connected`.
    /// For fault drills and tests of recovery; returns how many transport elements were cut (0
    /// when none exist yet).
    func cutNetworkPath() -> Int {
        let dead = NetworkImpairment(loss: 1, seed: 0)
        return (try? loop.sync { [graph] in graph.liveWebrtcbin == nil ? 0 : graph.impair(with: dead, direction: .both) }) ?? 0
    }

    /// Fault drill: closes the expression data channel while the connection stays up, as when
    /// the channel's opening message was lost for good. Returns whether there was one to close.
    func closeExpressionChannel() -> Bool {
        (try? loop.sync { [graph] in
            guard graph.liveWebrtcbin != nil, let channel = graph.channel else { return false }
            gst_webrtc_data_channel_close(channel)
            return true
        }) ?? false
    }
}
