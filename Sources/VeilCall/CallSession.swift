import CGStreamer
import Foundation
import Synchronization
import VeilCore
import VeilGLib

/// One participant's side of a Veil call: the room server connection, a WebRTC peer per remote
/// participant (Opus voice + the expression data channel), jitter buffers that align each remote
/// avatar with its voice, reconnection, statistics and events.
///
/// Nothing here accepts an image: the caller sends `ExpressionFrame`s, which it makes on the
/// device from the camera (`ExpressionCapture`).
///
/// `@unchecked Sendable`: mutable state sits behind one `Mutex`; GLib and libsoup objects are only
/// touched on `loop`'s thread.
public final class CallSession: @unchecked Sendable {
    /// How to join and what to send.
    public struct Configuration: Sendable {
        /// The room server's WebSocket URL, e.g. ws://127.0.0.1:7878/ws or wss://veil.example.org/ws.
        public var server: URL
        /// Whom a `wss://` server's certificate must be vouched for by (default: the system's
        /// trust store). A refused certificate ends the call: retrying cannot help.
        public var serverTrust: ServerTrust = .system
        public var room: String
        public var user: String
        /// A token from the server's operator (`veil token`), bound to room and user.
        public var token: String
        /// Where the voice comes from.
        public var audioInput: AudioInput
        /// Where each remote participant's voice goes.
        public var audioOutput: @Sendable (_ user: String) -> AudioOutput
        public var peer: PeerConfiguration
        public var reconnection: ReconnectionPolicy.Configuration
        /// How often statistics are reported.
        public var statisticsInterval: TimeInterval
        /// How a peer connection that failed, stayed disconnected or went silent is recovered.
        /// webrtcbin (GStreamer 1.22) cannot restart ICE, so the default goes straight to
        /// renegotiating a fresh connection, up to 3 times, 10 s each.
        public var peerRecovery: PeerRecoveryPolicy.Configuration
        /// A connected peer from which nothing (voice RTP, which flows even when muted, or
        /// expression frames) has arrived for this long is treated as failed.
        public var mediaSilenceTimeout: TimeInterval
        /// A peer connected this long without an open expression channel is treated as failed:
        /// under loss the channel's opening message can be lost for good (seen at 10 % loss on a
        /// 400 ms round trip), and the voice alone would keep the connection looking alive.
        public var expressionChannelTimeout: TimeInterval = 10

        public init(server: URL, room: String, user: String, token: String, audioInput: AudioInput = .silence,
                    audioOutput: @escaping @Sendable (String) -> AudioOutput = { _ in .discard },
                    peer: PeerConfiguration = PeerConfiguration(),
                    reconnection: ReconnectionPolicy.Configuration = .init(), statisticsInterval: TimeInterval = 2,
                    peerRecovery: PeerRecoveryPolicy.Configuration = .init(iceRestartAttempts: 0, renegotiationAttempts: 3),
                    mediaSilenceTimeout: TimeInterval = 3) {
            self.server = server; self.room = room; self.user = user; self.token = token
            self.audioInput = audioInput; self.audioOutput = audioOutput; self.peer = peer
            self.reconnection = reconnection; self.statisticsInterval = statisticsInterval
            self.peerRecovery = peerRecovery; self.mediaSilenceTimeout = mediaSilenceTimeout
        }
    }

    /// The connection to the room as the user would see it.
    public enum ConnectionState: String, Sendable, Equatable {
        case connecting, connected, reconnecting, failed, left
    }

    /// What happens in the call.
    public enum Event: Sendable {
        case connection(ConnectionState)
        /// Joined (or rejoined) the room; the others already there.
        case joined(participants: [ParticipantInfo], resumed: Bool)
        case participantJoined(user: String)
        case participantLeft(user: String, reason: LeaveReason)
        case muteChanged(user: String, muted: Bool)
        case peerState(user: String, state: PeerConnection.State)
        /// The connection to `user` failed, stayed disconnected or went silent: a fresh one is
        /// being negotiated (attempt 1, 2, ...).
        case peerRecovering(user: String, attempt: Int)
        /// The connection to `user` carries media again after `peerRecovering`.
        case peerRecovered(user: String)
        /// The server refused something (bad token, room full, ...).
        case error(code: String, message: String)
        case statistics(CallStatistics)
    }

    /// Statistics for the whole call, every `statisticsInterval`.
    public struct CallStatistics: Sendable {
        public var peers: [String: PeerStatistics]
        /// Jitter-buffer figures per remote participant.
        public var expressionBuffers: [String: ExpressionJitterBuffer.Statistics]
        /// The worst network quality over all peers (`down` with nobody else in the room).
        public var quality: NetworkQuality
    }

    public let configuration: Configuration
    public let events: AsyncStream<Event>
    /// Every ExpressionFrame received, with its sender (newest kept when the consumer lags).
    public let expressionFrames: AsyncStream<(user: String, frame: ReceivedExpressionFrame)>
    /// The speech level of the voice sent to each remote participant (each connection captures
    /// and sends its own copy; a file input starts anew on each): what that participant's
    /// voice-driven frames are made from (see `ExpressionSender`). Keeps the newest 1024.
    public let outgoingAudioLevels: AsyncStream<(user: String, level: AudioLevel)>

    private let loop: GLibLoop
    private let ownsLoop: Bool
    private let eventSink: AsyncStream<Event>.Continuation
    private let frameSink: AsyncStream<(user: String, frame: ReceivedExpressionFrame)>.Continuation
    private let levelSink: AsyncStream<(user: String, level: AudioLevel)>.Continuation
    private let state: Mutex<State>

    private struct Remote {
        var peer: PeerConnection?
        var buffer = ExpressionJitterBuffer()
        var muted = false
        /// Recovery of the connection to this participant (nil until a peer exists).
        var recovery: PeerRecoveryPolicy?
        /// Whether the current `peer`'s failure was already handed to `recovery`.
        var failureNoted = false
        /// Since when the current `peer` has been connected without an open expression channel.
        var withoutChannelSinceMicros: UInt64?
    }

    private struct State {
        var connection: SignalingConnection?
        var remotes: [String: Remote] = [:]
        var muted = false
        /// The sink chosen with `setAudioOutputDevice(_:)`, for every PulseAudio output from then on.
        var outputDevice: String?
        /// STUN/TURN servers the room server handed out in `joined`, for peers from then on.
        var iceServers: [ICEServer] = []
        var leaving = false
        var joined = false
        var policy: ReconnectionPolicy
        var timers: [GLibTimer] = []
        var reconnectTimer: GLibTimer?
    }

    /// Prepares a session; nothing connects before `start()`.
    public init(configuration: Configuration, loop: GLibLoop? = nil) {
        self.configuration = configuration
        self.loop = loop ?? GLibLoop(name: "veil-call")
        ownsLoop = loop == nil
        (events, eventSink) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .bufferingNewest(256))
        (expressionFrames, frameSink) = AsyncStream.makeStream(of: (user: String, frame: ReceivedExpressionFrame).self,
                                                               bufferingPolicy: .bufferingNewest(64))
        (outgoingAudioLevels, levelSink) = AsyncStream.makeStream(of: (user: String, level: AudioLevel).self,
                                                                  bufferingPolicy: .bufferingNewest(1024))
        state = Mutex(State(policy: ReconnectionPolicy(configuration: configuration.reconnection)))
    }

    deinit {
        eventSink.finish(); frameSink.finish(); levelSink.finish()
        if ownsLoop { loop.stop() }
    }

    /// The media clock to stamp `ExpressionFrame.captureTimeMicros` with (the audio's clock).
    public var mediaTimeMicros: UInt64 { PeerConnection.mediaTimeMicros }

    /// Connects to the server and joins the room; reconnects by itself when the connection drops.
    public func start() {
        eventSink.yield(.connection(.connecting))
        let now = mediaTimeMicros
        _ = state.withLock { $0.policy.start(at: now) }
        loop.perform { [self] in connect() }
    }

    /// The remote participants currently known.
    public var participants: [String] { state.withLock { Array($0.remotes.keys).sorted() } }

    /// For a `.file` audio input: when the file started playing into the connection to `user`
    /// (see `PeerConnection.audioFileStartMicros`); each connection plays the file from its own start.
    public func audioFileStartMicros(for user: String) -> UInt64? {
        state.withLock { $0.remotes[user]?.peer }?.audioFileStartMicros
    }

    /// The clock the connection to `user` shows them (see `PeerConnection.clock`); nil while there
    /// is no connection to them.
    public func clock(for user: String) -> ConnectionClock? { peer(for: user)?.clock }

    /// The connection to `user` (tests).
    func peer(for user: String) -> PeerConnection? { state.withLock { $0.remotes[user]?.peer } }

    /// Whether `user` is muted (as they announced).
    public func isMuted(_ user: String) -> Bool { state.withLock { $0.remotes[user]?.muted ?? false } }

    /// Sends an expression to everyone (dropped for peers whose channel is congested or closed).
    public func send(_ frame: ExpressionFrame) {
        let peers = state.withLock { $0.remotes.values.compactMap(\.peer) }
        for peer in peers where peer.isDataChannelOpen { peer.send(frame) }
    }

    /// Sends an expression to `user` only (dropped when their channel is congested or closed): for
    /// streams made per connection, such as voice-driven frames timed on that connection's audio.
    public func send(_ frame: ExpressionFrame, to user: String) {
        guard let peer = state.withLock({ $0.remotes[user]?.peer }), peer.isDataChannelOpen else { return }
        peer.send(frame)
    }

    /// What to draw for `user` at local media time `renderTimeMicros`: aligned with their voice
    /// when it is playing, otherwise with an adaptive delay.
    public func playout(for user: String, at renderTimeMicros: UInt64) -> ExpressionJitterBuffer.Playout? {
        state.withLock { s in
            // Mutated in place: copying the remote out and back would copy its buffer every frame.
            guard let muted = s.remotes[user]?.muted else { return nil }
            if !muted, let mapping = s.remotes[user]?.peer?.playoutMapping {
                return s.remotes[user]?.buffer.expression(atPlayoutOf: mapping.senderMediaTimeMicros(playingAt: renderTimeMicros))
            }
            return s.remotes[user]?.buffer.expression(atLocalTime: renderTimeMicros)
        }
    }

    /// Mutes or unmutes the voice; the others are told.
    public func setMuted(_ muted: Bool) {
        let (peers, connection) = state.withLock { s -> ([PeerConnection], SignalingConnection?) in
            s.muted = muted
            return (s.remotes.values.compactMap(\.peer), s.connection)
        }
        for peer in peers { peer.setMuted(muted) }
        connection?.send(SignalingMessage.encode(ClientMessage.mute(muted: muted)))
    }

    /// Whether this side is muted.
    public var isMuted: Bool { state.withLock { $0.muted } }

    /// The sound server's sinks the others' voices can play on, sorted by name; empty when no
    /// sound server runs. Blocks for the few milliseconds it takes to ask the server: call it from a
    /// thread of your own, not from async code on the cooperative pool.
    public func audioOutputDevices() throws -> [AudioDevice] {
        try PeerConnection.audioOutputDevices()
    }

    /// The sink chosen with `setAudioOutputDevice(_:)`; nil until one was chosen (the voices then
    /// play where `Configuration.audioOutput` says).
    public var audioOutputDevice: String? { state.withLock { $0.outputDevice } }

    /// Moves every remote participant's voice to the sink `device` (a `name` from
    /// `audioOutputDevices()`; nil for the server's default sink), now and for participants who
    /// join later: the call's output switch. Only outputs that are `.pulse` move; file and
    /// callback outputs stay as they are. Throws `PeerError` `.invalidArgument` for a sink the
    /// server does not have, `.mediaFailed` when no sound server answers. Blocks like
    /// `audioOutputDevices()`.
    public func setAudioOutputDevice(_ device: String?) throws {
        let sink = try PeerConnection.resolveSink(device, among: PeerConnection.audioOutputDevices())
        let peers = state.withLock { s -> [PeerConnection] in
            s.outputDevice = sink
            return s.remotes.values.compactMap(\.peer)
        }
        for peer in peers { peer.applyAudioOutputDevice(sink) }
    }

    /// Leaves the room: tells the server, closes every peer, stops reconnecting.
    public func leave() async {
        let (peers, connection) = stopEverything()
        connection?.send(SignalingMessage.encode(ClientMessage.leave))
        for peer in peers { await peer.close() }
        // Give the leave message a moment to go out before closing the socket.
        try? await Task.sleep(nanoseconds: 100_000_000)
        connection?.close()
        eventSink.yield(.connection(.left))
    }

    /// Stops reconnecting and every timer and forgets the remote participants; returns their
    /// peers (to close) and the server connection (to say goodbye on, or close).
    private func stopEverything() -> (peers: [PeerConnection], connection: SignalingConnection?) {
        let (peers, connection, timers) = state.withLock { s -> ([PeerConnection], SignalingConnection?, [GLibTimer]) in
            s.leaving = true
            let peers = s.remotes.values.compactMap(\.peer)
            s.remotes.removeAll()
            let timers = s.timers + [s.reconnectTimer].compactMap { $0 }
            s.timers = []; s.reconnectTimer = nil
            return (peers, s.connection, timers)
        }
        timers.forEach { $0.cancel() }
        return (peers, connection)
    }

    // MARK: - Signaling (on the loop's thread)

    private func connect() {
        let connection = SignalingConnection(loop: loop, url: configuration.server, trust: configuration.serverTrust)
        connection.onMessage = { [weak self] text in self?.received(text) }
        connection.onClose = { [weak self] closure in self?.lost(closure) }
        state.withLock { $0.connection = connection }
        connection.connect { [weak self] result in
            guard let self else { return }
            switch result {
            case .success:
                connection.send(SignalingMessage.encode(ClientMessage.join(room: self.configuration.room,
                                                                            user: self.configuration.user,
                                                                            token: self.configuration.token)))
                self.startTimers()
            case .failure(let error as ServerCertificateError):
                // Not a server that is down: reconnecting would meet the same certificate.
                self.state.withLock { $0.leaving = true }
                self.eventSink.yield(.error(code: "certificate", message: "\(error)"))
                self.eventSink.yield(.connection(.failed))
            case .failure(let error):
                self.eventSink.yield(.error(code: "unreachable", message: "\(error)"))
                self.lost(.lost("\(error)"))
            }
        }
    }

    private func startTimers() {
        let ping = loop.every(milliseconds: UInt32(SignalingMessage.pingInterval * 1000)) { [weak self] in
            guard let self else { return false }
            let connection = self.state.withLock { $0.connection }
            connection?.send(SignalingMessage.encode(ClientMessage.ping(t: nil)))
            return true
        }
        let stats = loop.every(milliseconds: UInt32(configuration.statisticsInterval * 1000)) { [weak self] in
            guard let self else { return false }
            Task { await self.reportStatistics() }
            return true
        }
        let watchdog = loop.every(milliseconds: 500) { [weak self] in
            guard let self else { return false }
            self.checkPeers()
            return true
        }
        let old = state.withLock { s -> [GLibTimer] in
            let old = s.timers
            s.timers = [ping, stats, watchdog]
            return old
        }
        old.forEach { $0.cancel() }
    }

    private func lost(_ closure: SignalingConnection.Closure) {
        let now = mediaTimeMicros
        let action = state.withLock { s -> ReconnectionPolicy.Action? in
            s.joined = false
            s.timers.forEach { $0.cancel() }
            s.timers = []
            guard !s.leaving, case .lost = closure else { return nil }
            if case .connected = s.policy.state { return s.policy.connectionLost(at: now) }
            return s.policy.attemptFailed(at: now)
        }
        guard let action else { return }
        handle(action)
    }

    private func handle(_ action: ReconnectionPolicy.Action) {
        switch action {
        case .connect(let at), .abandonAttempt(let at):
            eventSink.yield(.connection(.reconnecting))
            let delay = at > mediaTimeMicros ? (at - mediaTimeMicros) / 1000 : 0
            let timer = loop.after(milliseconds: UInt32(min(delay, 60_000))) { [weak self] in
                guard let self else { return }
                let now = self.mediaTimeMicros
                let next = self.state.withLock { $0.leaving ? nil : $0.policy.timerFired(at: now) }
                if case .startAttempt = next { self.connect() } else if let next { self.handle(next) }
            }
            state.withLock { $0.reconnectTimer = timer }
        case .startAttempt:
            connect()
        case .giveUp:
            eventSink.yield(.connection(.failed))
        case .none:
            break
        }
    }

    private func received(_ text: String) {
        let message: ServerMessage
        do { message = try SignalingMessage.decode(ServerMessage.self, from: text) } catch {
            eventSink.yield(.error(code: "protocol", message: "unreadable message from the server: \(error)"))
            return
        }
        switch message {
        case .joined(let joined):
            let now = mediaTimeMicros
            _ = state.withLock { s in
                s.joined = true
                s.iceServers = joined.iceServers
                return s.policy.connected(at: now)
            }
            eventSink.yield(.connection(.connected))
            eventSink.yield(.joined(participants: joined.participants, resumed: joined.resumed))
            // The newcomer offers to everyone already there; peers that survived a signaling
            // outage (media flows directly) are kept.
            for participant in joined.participants where participant.user != configuration.user {
                let alive = state.withLock { s -> Bool in
                    s.remotes[participant.user, default: Remote()].muted = participant.muted
                    guard let peer = s.remotes[participant.user]?.peer else { return false }
                    return peer.state == .connected || peer.state == .connecting || peer.state == .new
                }
                if !alive { createPeer(for: participant.user, role: .offerer) }
            }
            if isMuted { setMuted(true) }
        case .participantJoined(let user, let muted):
            state.withLock { $0.remotes[user, default: Remote()].muted = muted }
            eventSink.yield(.participantJoined(user: user))
        case .participantLeft(let user, let reason):
            let peer = state.withLock { $0.remotes.removeValue(forKey: user)?.peer }
            if let peer { Task { await peer.close() } }
            eventSink.yield(.participantLeft(user: user, reason: reason))
        case .offer(let from, let sdp):
            // Both sides may renegotiate a broken connection at once. Then the side whose name
            // sorts first keeps its own offer and ignores the other's; the other side answers.
            let ignore = state.withLock { s -> Bool in
                guard let mine = s.remotes[from]?.peer, mine.role == .offerer,
                      mine.state == .new || mine.state == .connecting else { return false }
                return configuration.user < from
            }
            if ignore { return }
            guard let peer = createPeer(for: from, role: .answerer) else { return }
            do { try peer.setRemoteDescription(type: .offer, sdp: sdp) } catch {
                eventSink.yield(.error(code: "negotiation", message: "offer from \(from): \(error)"))
            }
        case .answer(let from, let sdp):
            let peer = state.withLock { $0.remotes[from]?.peer }
            do { try peer?.setRemoteDescription(type: .answer, sdp: sdp) } catch {
                eventSink.yield(.error(code: "negotiation", message: "answer from \(from): \(error)"))
            }
        case .ice(let from, let mline, let candidate):
            let peer = state.withLock { $0.remotes[from]?.peer }
            try? peer?.addRemoteCandidate(mline: UInt32(max(mline, 0)), candidate: candidate)
        case .muteChanged(let user, let muted):
            state.withLock { $0.remotes[user]?.muted = muted }
            eventSink.yield(.muteChanged(user: user, muted: muted))
        case .error(let code, let message):
            eventSink.yield(.error(code: code.rawValue, message: message))
            if code.rawValue.hasPrefix("token_") || code == .roomFull {
                // Retrying cannot help: stop and say so.
                let connection = state.withLock { s -> SignalingConnection? in s.leaving = true; return s.connection }
                connection?.close()
                eventSink.yield(.connection(.failed))
            } else if code == .replaced {
                // The same user joined from elsewhere and took this seat over: reconnecting would
                // evict that session in turn, back and forth. End here, without telling the room.
                let (peers, connection) = stopEverything()
                connection?.close()
                Task { for peer in peers { await peer.close() } }
                eventSink.yield(.connection(.left))
            }
        case .pong:
            break
        }
    }

    /// A new peer for `user` (replacing any old one), wired to signaling and the jitter buffer.
    @discardableResult
    private func createPeer(for user: String, role: PeerConnection.Role) -> PeerConnection? {
        let peer: PeerConnection
        var output = configuration.audioOutput(user)
        let (chosen, iceServers) = state.withLock { ($0.outputDevice, $0.iceServers) }
        if case .pulse = output, let chosen { output = .pulse(device: chosen) }
        // The configuration's own STUN/TURN servers win; the room server's fill the gaps.
        var peerConfiguration = configuration.peer
        peerConfiguration.adopt(iceServers)
        do {
            peer = try PeerConnection(loop: loop, role: role, audioSource: configuration.audioInput,
                                      audioOutput: output, configuration: peerConfiguration)
        } catch {
            eventSink.yield(.error(code: "media", message: "cannot start a connection to \(user): \(error)"))
            return nil
        }
        let (old, muted) = state.withLock { s -> (PeerConnection?, Bool) in
            var remote = s.remotes[user] ?? Remote()
            let old = remote.peer
            remote.peer = peer
            remote.buffer.reset()
            remote.failureNoted = false
            remote.withoutChannelSinceMicros = nil
            if remote.recovery == nil { remote.recovery = PeerRecoveryPolicy(configuration: configuration.peerRecovery) }
            s.remotes[user] = remote
            return (old, s.muted)
        }
        if let old { Task { await old.close() } }
        if muted { peer.setMuted(true) }
        Task { [weak self] in
            for await signal in peer.signaling {
                guard let self else { return }
                let connection = self.state.withLock { $0.connection }
                switch signal {
                case .description(let description):
                    let message: ClientMessage = description.type == .offer
                        ? .offer(to: user, sdp: description.sdp) : .answer(to: user, sdp: description.sdp)
                    connection?.send(SignalingMessage.encode(message))
                case .candidate(let candidate):
                    connection?.send(SignalingMessage.encode(ClientMessage.ice(to: user, mline: Int(candidate.mline),
                                                                                candidate: candidate.candidate)))
                }
            }
        }
        Task { [weak self] in
            for await received in peer.expressionFrames {
                guard let self else { return }
                self.state.withLock { s in
                    guard s.remotes[user]?.peer === peer else { return }
                    s.remotes[user]?.buffer.insert(received.frame, arrivalTimeMicros: received.arrivalMediaTimeMicros)
                }
                self.frameSink.yield((user: user, frame: received))
            }
        }
        Task { [weak self] in
            for await level in peer.outgoingLevels {
                guard let self else { return }
                guard self.state.withLock({ $0.remotes[user]?.peer === peer }) else { continue }
                self.levelSink.yield((user: user, level: level))
            }
        }
        Task { [weak self] in
            for await event in peer.events {
                guard let self else { return }
                // Failures are acted on by `checkPeers()`, which looks at the current peer only.
                if case .connectionState(let state) = event {
                    let current = self.state.withLock { $0.remotes[user]?.peer === peer }
                    if current { self.eventSink.yield(.peerState(user: user, state: state)) }
                }
            }
        }
        return peer
    }

    // MARK: - Peer recovery (on the loop's thread)

    /// Every 500 ms: feeds each peer's state, and whether media still arrives from it, to its
    /// recovery policy and carries out what the policy asks for.
    private func checkPeers() {
        let now = mediaTimeMicros
        let silenceLimit = UInt64(max(0.5, configuration.mediaSilenceTimeout) * 1_000_000)
        let channelLimit = UInt64(max(0.5, configuration.expressionChannelTimeout) * 1_000_000)
        let actions = state.withLock { s -> [(user: String, action: PeerRecoveryPolicy.Action, attempt: Int)] in
            guard !s.leaving, s.joined else { return [] }
            var actions: [(user: String, action: PeerRecoveryPolicy.Action, attempt: Int)] = []
            for user in s.remotes.keys.sorted() {
                guard var remote = s.remotes[user], let peer = remote.peer, var policy = remote.recovery else { continue }
                let peerState = peer.state
                let heard = peer.lastHeardMicros ?? now
                if peerState == .connected && !peer.isDataChannelOpen {
                    if remote.withoutChannelSinceMicros == nil { remote.withoutChannelSinceMicros = now }
                } else {
                    remote.withoutChannelSinceMicros = nil
                }
                let channelMissing = remote.withoutChannelSinceMicros.map { now > $0 && now - $0 > channelLimit } ?? false
                let silent = peerState == .connected && (channelMissing || (now > heard && now - heard > silenceLimit))
                var action: PeerRecoveryPolicy.Action
                if (peerState == .failed || silent) && !remote.failureNoted {
                    remote.failureNoted = true
                    action = policy.failed(at: now)
                } else if peerState == .disconnected {
                    action = policy.disconnected(at: now)
                    if action == .none { action = policy.timerFired(at: now) }
                } else if peerState == .connected && !silent {
                    action = policy.connected(at: now)
                } else {
                    action = policy.timerFired(at: now)
                }
                remote.recovery = policy
                s.remotes[user] = remote
                var attempt = 0
                if case .renegotiating(let n, _) = policy.state { attempt = n }
                if case .restartingICE(let n, _) = policy.state { attempt = n }
                actions.append((user, action, attempt))
            }
            return actions
        }
        for (user, action, attempt) in actions {
            switch action {
            case .renegotiate, .restartICE:
                // webrtcbin cannot restart ICE: a fresh connection is negotiated either way.
                eventSink.yield(.peerRecovering(user: user, attempt: attempt))
                createPeer(for: user, role: .offerer)
            case .reportRecovered:
                eventSink.yield(.peerRecovered(user: user))
            case .reportFailed:
                eventSink.yield(.error(code: "peer_failed",
                                       message: "the connection to \(user) could not be recovered; they stay in the room but cannot be heard or seen"))
            case .none, .wake:
                break
            }
        }
    }

    private func reportStatistics() async {
        let (peers, buffers) = state.withLock { s in
            (s.remotes.compactMapValues(\.peer), s.remotes.mapValues(\.buffer.statistics))
        }
        var results: [String: PeerStatistics] = [:]
        for (user, peer) in peers { results[user] = await peer.statistics() }
        let quality = results.values.map(\.quality).max() ?? .down
        eventSink.yield(.statistics(CallStatistics(peers: results, expressionBuffers: buffers, quality: quality)))
    }
}

// MARK: - Fault drills

extension CallSession {
    /// Makes the network path to `user` dead (see `PeerConnection.cutNetworkPath()`), so that
    /// recovery can be exercised; returns how many transport elements were cut.
    func cutNetworkPath(to user: String) -> Int {
        state.withLock { $0.remotes[user]?.peer }?.cutNetworkPath() ?? 0
    }

    /// Closes the expression channel to `user` while the connection stays up; returns whether
    /// there was one.
    func closeExpressionChannel(to user: String) -> Bool {
        state.withLock { $0.remotes[user]?.peer }?.closeExpressionChannel() ?? false
    }

    /// Offers `user` a fresh connection now, as recovery does (drills of simultaneous offers).
    func renegotiate(with user: String) {
        loop.perform { [self] in createPeer(for: user, role: .offerer) }
    }
}
