internal import CGLib
internal import CSoup
import Foundation
import Synchronization
import VeilCore
import VeilGLib

/// Veil's room server: HTTP + WebSocket signaling (libsoup) on a GLib main loop of its own.
///
/// - `GET /health` answers `{"participants":n,"rooms":n,"status":"ok","uptimeSeconds":n}`.
/// - `GET /metrics` answers what the node counts, in Prometheus' text format (`ServerMetrics`).
/// - `/ws` is the WebSocket of the signaling protocol (docs/protocol.md); `RoomDirectory` decides
///   everything, this class only carries bytes and time to it and its actions back out.
/// - With `Configuration.webRoot`, every other path is a file of that directory (`StaticFiles`):
///   the browser client at `/`.
/// - With `Configuration.tls`, all of it is served over TLS: `https://` and `wss://`.
///
/// ```swift
/// let server = RoomServer(configuration: .init(secret: secret, port: 0))
/// let url = try server.start()            // ws://127.0.0.1:<port>/ws
/// for await event in server.events { print(event) }
/// server.stop()
/// ```
///
/// `@unchecked Sendable`: the mutable state is the `Mutex`-guarded lifecycle below; everything
/// libsoup touches lives in `ServerCore`, confined to the loop's thread.
public final class RoomServer: @unchecked Sendable {
    /// Where to listen and how rooms behave.
    public struct Configuration: Sendable {
        /// IP address to listen on: `127.0.0.1` (default, this machine only), `0.0.0.0` / `::` for
        /// all interfaces, or one address. `localhost` means 127.0.0.1.
        public var host: String
        /// TCP port; 0 picks a free one (read it back from `port` or the URL `start` returns).
        public var port: Int
        /// The secret that signs the tokens this server accepts.
        public var secret: ServerSecret
        /// Room size, timeouts, ICE servers.
        public var rooms: RoomDirectory.Configuration
        /// The clocks (injected for tests).
        public var clock: @Sendable () -> SignalingTime
        /// A TCP connection must have become a WebSocket, or had its HTTP answer, within this long
        /// after it was accepted, or it is shut down (connections that send nothing, or half a
        /// request, would otherwise hold a descriptor for good). Default 10 s.
        public var handshakeTimeout: TimeInterval
        /// A directory served read-only at `/` (the browser client, `web/`; see `StaticFiles`), or
        /// nil to serve only `/health` and `/ws`.
        public var webRoot: URL?
        /// The certificate and key to serve TLS with (`https://`, `wss://`), or nil for plain
        /// `http://` and `ws://`. The TLS handshake counts towards `handshakeTimeout`.
        public var tls: ServerCertificate?
        /// The Redis this node shares its rooms through with other nodes, or nil for a server
        /// that holds its rooms alone.
        public var redis: RedisBrokerConfiguration?

        /// A configuration; by default 127.0.0.1:7878, rooms of 8, no web directory, no TLS.
        public init(secret: ServerSecret, host: String = "127.0.0.1", port: Int = RoomServer.defaultPort,
                    rooms: RoomDirectory.Configuration = .init(), handshakeTimeout: TimeInterval = 10,
                    webRoot: URL? = nil, tls: ServerCertificate? = nil, redis: RedisBrokerConfiguration? = nil,
                    clock: @escaping @Sendable () -> SignalingTime = { SignalingTime.now() }) {
            self.secret = secret; self.host = host; self.port = port; self.rooms = rooms; self.clock = clock
            self.handshakeTimeout = handshakeTimeout; self.webRoot = webRoot; self.tls = tls; self.redis = redis
        }
    }

    /// A snapshot of the server's load.
    public struct Status: Equatable, Sendable {
        /// Rooms with at least one participant.
        public var rooms: Int
        /// Participants in all rooms (including ones held after a drop).
        public var participants: Int
        /// Open WebSocket connections, joined or not.
        public var connections: Int
        /// Seconds since `start`.
        public var uptimeSeconds: Int
        /// Accepted TCP connections the server holds: WebSockets and HTTP requests in progress.
        public var sockets: Int = 0
        /// The most WebSocket connections it takes: the configured number, lowered to fit the
        /// open-file limit if need be.
        public var maximumConnections: Int = 0
    }

    /// TCP connections the server takes beyond `maximumConnections`, so that `/health` and the
    /// `server_full` answers still get through when it is full.
    public static let socketHeadroom = 64
    /// Descriptors kept free for the process itself (log, loop wake-ups, the listening socket).
    static let reservedFiles = 64

    /// The port `veil serve` uses unless told otherwise.
    public static let defaultPort = 7878
    /// The WebSocket path.
    public static let webSocketPath = "/ws"
    /// The health path.
    public static let healthPath = "/health"
    /// The path of the metrics, in Prometheus' text format.
    public static let metricsPath = "/metrics"

    /// The configuration it was made with.
    public let configuration: Configuration
    /// Log events (listening, joins, leaves, drops, refusals, stop) for one consumer. Keeps the
    /// newest 1024 when nobody reads; ends after `stop()`.
    public let events: AsyncStream<RoomServerEvent>
    private let continuation: AsyncStream<RoomServerEvent>.Continuation

    private enum Phase { case idle, running, stopped }
    private struct Lifecycle {
        var phase = Phase.idle
        var loop: GLibLoop?
        var core: ServerCore?
        var port: Int?
        var webSocketURL: URL?
    }
    private let lifecycle = Mutex(Lifecycle())

    /// A server, not yet listening.
    public init(configuration: Configuration) {
        self.configuration = configuration
        (events, continuation) = AsyncStream.makeStream(of: RoomServerEvent.self, bufferingPolicy: .bufferingNewest(1024))
    }

    deinit { stop() }

    /// The port it listens on, once started.
    public var port: Int? { lifecycle.withLock { $0.port } }
    /// `ws://host:port/ws` (`wss://` with TLS), once started (a wildcard host is given as the
    /// loopback address).
    public var webSocketURL: URL? { lifecycle.withLock { $0.webSocketURL } }
    /// `http://host:port/` (`https://` with TLS), once started: the browser client when `webRoot` is set.
    public var pageURL: URL? { httpURL(path: "/") }
    /// `http://host:port/health` (`https://` with TLS), once started.
    public var healthURL: URL? { httpURL(path: Self.healthPath) }
    /// `http://host:port/metrics` (`https://` with TLS), once started.
    public var metricsURL: URL? { httpURL(path: Self.metricsPath) }

    private func httpURL(path: String) -> URL? {
        guard let webSocketURL, var parts = URLComponents(url: webSocketURL, resolvingAgainstBaseURL: false) else { return nil }
        parts.scheme = parts.scheme == "wss" ? "https" : "http"
        parts.path = path
        return parts.url
    }

    /// Starts listening and returns the WebSocket URL clients connect to. A server starts once.
    /// - Throws: `VeilError` when the host is not an IP address or the port cannot be bound.
    @discardableResult
    public func start() throws -> URL {
        try lifecycle.withLock { state in
            guard state.phase == .idle else {
                throw VeilError.invalidInput("this RoomServer was already started; make a new one")
            }
            state.phase = .running
        }
        let loop = GLibLoop(name: "veil-server")
        let continuation = self.continuation
        let configuration = self.configuration
        let core: ServerCore
        do {
            core = try loop.sync {
                try ServerCore(configuration: configuration, loop: loop) { kind, date in
                    continuation.yield(RoomServerEvent(date: date, kind: kind))
                }
            }
        } catch {
            // Dropping the last reference stops the loop (see `stop()` for why not `loop.stop()`).
            lifecycle.withLock { $0.phase = .stopped }
            continuation.finish()
            throw error
        }
        let url = Self.webSocketURL(host: configuration.host, port: core.port, secure: configuration.tls != nil)
        lifecycle.withLock { state in
            state.loop = loop; state.core = core; state.port = core.port; state.webSocketURL = url
        }
        continuation.yield(RoomServerEvent(date: configuration.clock().date, kind: .listening(url)))
        return url
    }

    /// Closes every connection (each client gets `error(server_shutdown)` and close code 1001),
    /// stops listening and ends `events`. Waits up to a second for clients to acknowledge.
    public func stop() {
        let (loop, core) = lifecycle.withLock { state -> (GLibLoop?, ServerCore?) in
            defer { state.phase = .stopped; state.loop = nil; state.core = nil }
            return (state.loop, state.core)
        }
        if let loop, let core {
            let drained = DispatchSemaphore(value: 0)
            try? loop.sync { core.shutdown { drained.signal() } }
            _ = drained.wait(timeout: .now() + 1)
            try? loop.sync { core.tearDown() }
            // The loop stops when its last reference goes, on this thread before we return
            // (ServerCore holds it weakly). Not `GLibLoop.stop()`: its deinit would stop it a
            // second time and wait 5 s for a thread already gone.
        }
        continuation.yield(RoomServerEvent(date: configuration.clock().date, kind: .stopped))
        continuation.finish()
    }

    /// Rooms, participants, connections and uptime (zeros when not running).
    public func status() -> Status {
        let (loop, core) = lifecycle.withLock { ($0.loop, $0.core) }
        guard let loop, let core else { return Status(rooms: 0, participants: 0, connections: 0, uptimeSeconds: 0) }
        return (try? loop.sync { core.status() }) ?? Status(rooms: 0, participants: 0, connections: 0, uptimeSeconds: 0)
    }

    /// Holds the server's loop for `seconds`, as a busy machine or a stop signal would (tests).
    func holdLoop(for seconds: TimeInterval) {
        guard let loop = lifecycle.withLock({ $0.loop }) else { return }
        // A source of the loop's own, so that the loop's thread is the one held (`GLibLoop.sync`
        // may run its body on the calling thread, owning the context meanwhile).
        let held = DispatchSemaphore(value: 0)
        loop.after(milliseconds: 0) {
            Thread.sleep(forTimeInterval: seconds)
            held.signal()
        }
        held.wait()
    }

    static func webSocketURL(host: String, port: Int, secure: Bool) -> URL {
        var shown = host
        if host == "0.0.0.0" || host == "localhost" { shown = "127.0.0.1" }
        if host == "::" { shown = "::1" }
        if shown.contains(":") { shown = "[\(shown)]" }
        return URL(string: "\(secure ? "wss" : "ws")://\(shown):\(port)\(webSocketPath)") ?? URL(fileURLWithPath: "/")
    }
}

// MARK: - The loop side

/// Everything that touches libsoup: the server, the WebSocket connections, the room directory.
///
/// `@unchecked Sendable`: created, used and torn down only on the server's GLib loop thread
/// (`RoomServer` reaches it through `GLibLoop.sync`; libsoup and timer callbacks run there).
final class ServerCore: @unchecked Sendable {
    private weak var loop: GLibLoop?  // owned by RoomServer, which stops it by letting go
    private let clock: @Sendable () -> SignalingTime
    private let emit: @Sendable (RoomServerEvent.Kind, Date) -> Void
    private var server: UnsafeMutablePointer<SoupServer>?
    private var acceptor: ServerAcceptor?
    private var directory: RoomDirectory
    private var broker: RoomBroker?
    private var peers: [ConnectionID: Peer] = [:]
    private var paused: Set<ConnectionID> = []
    private var closing: [ConnectionID: TimeInterval] = [:] // when a closing connection is cut
    private var budget: ReadBudget
    private var logThrottle = LogThrottle()
    private var metrics = ServerMetrics()
    private let node: String?
    private var sockets: [UnsafeMutableRawPointer: TransportSocket] = [:]
    private let socketLimit: Int
    private let handshakeTimeout: TimeInterval
    private let files: StaticFiles?
    private var nextID: UInt64 = 1
    private var pending: [RoomDirectory.Event] = []
    private var processing = false
    private var timer: GLibTimer?
    private var whenDrained: (() -> Void)?
    private let startedAt: TimeInterval
    private(set) var port = 0

    /// How long a connection the server closed has to answer with its close frame before it is cut.
    static let closeTimeout: TimeInterval = 5

    /// What a closing connection may still send and have parsed (its close frame, and whatever was
    /// in flight when the server's close left); beyond it the rest is only drained
    /// (`WebSocketSession.linger`).
    static let readAfterClose: UInt64 = 16 * 1024

    /// How often `tick` runs (silences, join deadlines, grace periods).
    static let tickMilliseconds: UInt32 = 100

    init(configuration: RoomServer.Configuration, loop: GLibLoop,
         emit: @escaping @Sendable (RoomServerEvent.Kind, Date) -> Void) throws {
        self.loop = loop
        self.clock = configuration.clock
        self.emit = emit
        node = configuration.redis?.node
        // Every connection is a descriptor: never promise more than the open-file limit can hold.
        var rooms = configuration.rooms
        if let files = TransportSocket.openFileLimit {
            let fitting = max(1, files - RoomServer.socketHeadroom - RoomServer.reservedFiles)
            if rooms.maximumConnections > fitting {
                rooms.maximumConnections = fitting
                rooms.maximumUnjoinedConnections = min(rooms.maximumUnjoinedConnections, max(1, fitting / 2))
            }
        }
        socketLimit = rooms.maximumConnections + RoomServer.socketHeadroom
        handshakeTimeout = configuration.handshakeTimeout
        do {
            files = try configuration.webRoot.map { try StaticFiles(directory: $0) }
        } catch {
            throw VeilError.invalidInput("cannot serve the web client: \(error)")
        }
        directory = RoomDirectory(configuration: rooms, tokens: TokenAuthority(secret: configuration.secret),
                                  brokered: configuration.redis != nil)
        startedAt = configuration.clock().monotonic
        budget = ReadBudget(rooms, now: startedAt)

        let host = configuration.host == "localhost" ? "127.0.0.1" : configuration.host
        guard (0...65535).contains(configuration.port) else {
            throw VeilError.invalidInput("port \(configuration.port) is out of range 0…65535")
        }
        guard let address = g_inet_socket_address_new_from_string(host, guint(configuration.port)) else {
            throw VeilError.invalidInput("cannot listen on \"\(configuration.host)\": give an IP address such as 127.0.0.1, 0.0.0.0 or ::1")
        }
        defer { g_object_unref(UnsafeMutableRawPointer(address)) }
        // soup_server_new is variadic: make the object through the non-variadic constructor.
        guard let object = g_object_new_with_properties(soup_server_get_type(), 0, nil, nil) else {
            throw VeilError.io("cannot create the HTTP server")
        }
        let server = SOUP_SERVER(object)
        self.server = server

        // One handler for every path; `/ws` upgrades to Veil's own WebSocket framing (see
        // `WebSocketSession`), so libsoup's WebSocket handler, and with it permessage-deflate, is never used.
        let me = Unmanaged.passRetained(self).toOpaque()
        soup_server_add_handler(server, nil, { _, message, path, _, data in
            guard let data, let message else { return }
            Unmanaged<ServerCore>.fromOpaque(data).takeUnretainedValue()
                .serveHTTP(message, path: path.map { String(cString: $0) } ?? "/")
        }, me, { data in if let data { Unmanaged<ServerCore>.fromOpaque(data).release() } })

        // Every request Veil answers is bodiless (GET, HEAD, the WebSocket upgrade). One that
        // announces a body is refused once its headers are in, and its body is discarded as it
        // arrives instead of being collected in memory (one request could otherwise take
        // gigabytes); the answer goes out once the body is read (or `handshakeTimeout` cuts it).
        soup_server_add_early_handler(server, nil, { _, message, _, _, _ in
            guard let message else { return }
            let headers = soup_server_message_get_request_headers(message)
            let encoding = soup_message_headers_get_encoding(headers)
            let body = encoding == SOUP_ENCODING_CONTENT_LENGTH ? soup_message_headers_get_content_length(headers) > 0
                                                                : encoding != SOUP_ENCODING_NONE
            guard body else { return }
            soup_message_body_set_accumulate(soup_server_message_get_request_body(message), 0)
            soup_server_message_set_status(message, 413, nil)
            soup_message_headers_replace(soup_server_message_get_response_headers(message), "Connection", "close")
            let json = #"{"error":"requests to this server carry no body"}"#
            soup_server_message_set_response(message, "application/json", SOUP_MEMORY_COPY, json, gsize(json.utf8.count))
        }, nil, nil)

        // Rooms shared with other nodes: Redis must answer before the server listens.
        if let redis = configuration.redis {
            let clock = configuration.clock
            let broker = RedisRoomBroker(configuration: redis, clock: { clock().monotonic }) { [weak self] note in
                guard let self else { return }
                self.emit(.broker(note), self.clock().date)
            }
            do {
                try broker.start { [weak self] event in self?.feed(.broker(event)) }
            } catch {
                tearDown()
                throw error
            }
            self.broker = broker
        }

        // Veil listens and accepts itself, not through soup_server_listen (see ServerAcceptor).
        do {
            guard let server else { throw VeilError.io("the HTTP server is gone") }
            let acceptor = try ServerAcceptor(address: address, server: server, tls: configuration.tls, admit: { [weak self] socket in
                self?.admit(socket) ?? false
            }) { [weak self] reason in
                guard let self else { return }
                self.emit(.acceptFailed(reason), self.clock().date)
            }
            self.acceptor = acceptor
            port = acceptor.port
        } catch {
            tearDown()
            throw VeilError.io("cannot listen on \(configuration.host):\(configuration.port) (\(error)): is another server using the port? Choose another with --port")
        }
        timer = loop.every(milliseconds: Self.tickMilliseconds) { [weak self] in
            guard let self else { return false }
            self.sweepSockets()
            self.readTransports()
            self.feed(.tick)
            self.cutUnansweredCloses()
            self.resumePaused()
            self.writeLogSummaries()
            return true
        }
    }

    func status() -> RoomServer.Status {
        RoomServer.Status(rooms: directory.roomCount, participants: directory.participantCount,
                          connections: directory.connectionCount,
                          uptimeSeconds: max(0, Int(clock().monotonic - startedAt)),
                          sockets: sockets.count, maximumConnections: directory.configuration.maximumConnections)
    }

    /// Ends every session; `drained` runs once all connections have closed (maybe never: the caller waits with a timeout).
    /// The listening socket closes first, so that a client reconnecting at once (through a
    /// balancer) does not land here again.
    func shutdown(drained: @escaping () -> Void) {
        acceptor?.close()
        acceptor = nil
        timer?.cancel()
        timer = nil
        whenDrained = drained
        writeLogSummaries(flush: true)
        feed(.shutdown)
        checkDrained()
    }

    /// Releases everything libsoup holds: connections still open are cut, the server stops listening.
    func tearDown() {
        timer?.cancel()
        timer = nil
        broker?.stop()
        broker = nil
        acceptor?.close()
        acceptor = nil
        whenDrained = nil
        sockets.removeAll()
        let remaining = peers.values
        peers.removeAll()
        for peer in remaining { peer.session.abort() }
        if let server {
            soup_server_disconnect(server)
            g_object_unref(UnsafeMutableRawPointer(server))  // drops the handlers, which release us
            self.server = nil
        }
    }

    // MARK: Connections

    /// Whether to serve a socket just accepted: not beyond `socketLimit` (the directory answers
    /// `server_full` to WebSockets beyond `maximumConnections`; the headroom lets it, and `/health`).
    private func admit(_ socket: UnsafeMutablePointer<GSocket>) -> Bool {
        if sockets.count >= socketLimit { sweepSockets() }
        // Full, or too many still in their HTTP request: the one that has spent longest in its
        // request makes room (a real request takes a round trip; one that sends nothing, or half a
        // request, is the one to go), so that `/health` and WebSocket upgrades keep getting in.
        if sockets.count >= socketLimit || pendingSocketCount >= pendingSocketLimit {
            guard let (key, oldest) = sockets.lazy.filter({ !$0.value.upgraded }).min(by: { $0.value.acceptedAt < $1.value.acceptedAt }) else {
                return false
            }
            oldest.shutDown()
            sockets[key] = nil
        }
        let transport = TransportSocket(socket, acceptedAt: clock().monotonic)
        sockets[transport.key] = transport
        return true
    }

    /// Sockets accepted and not (yet) a WebSocket.
    private var pendingSocketCount: Int { sockets.values.reduce(0) { $0 + ($1.upgraded ? 0 : 1) } }

    /// The most sockets that may be in their HTTP request at once: the headroom, or a quarter of the
    /// connection cap if that is more.
    private var pendingSocketLimit: Int { max(RoomServer.socketHeadroom, directory.configuration.maximumConnections / 4) }

    /// Forgets sockets libsoup has closed; shuts down those that have been neither a WebSocket nor
    /// answered within `handshakeTimeout` (libsoup 3.2 has no such deadline of its own).
    private func sweepSockets() {
        let now = clock().monotonic
        for (key, socket) in sockets {
            if socket.isClosed {
                sockets[key] = nil
            } else if !socket.upgraded, now - socket.acceptedAt > handshakeTimeout {
                socket.shutDown()
                sockets[key] = nil
            }
        }
    }

    /// Hands the directory each WebSocket's byte counts and backlog (rate and slow-reader limits).
    private func readTransports() {
        for (id, peer) in peers.sorted(by: { $0.key < $1.key }) {
            feed(.transport(id, peer.transportReading()))
        }
    }

    /// Answers a WebSocket upgrade on `/ws` (no extension, no subprotocol) and, once the 101 is
    /// written, takes the connection over from libsoup. False if the request is not a valid upgrade.
    private func upgrade(_ message: OpaquePointer) -> Bool {
        guard soup_websocket_server_check_handshake(message, nil, nil, nil, nil) != 0,
              soup_websocket_server_process_handshake(message, nil, nil, nil, nil) != 0 else { return false }
        let object = UnsafeMutableRawPointer(message)
        _ = GSignal.connect(object, "wrote-informational") { [weak self] in
            g_object_ref(object)
            defer { g_object_unref(object) }
            guard let stream = soup_server_message_steal_connection(message) else { return }
            self?.accept(stream)
        }
        return true
    }

    /// A WebSocket connection from libsoup: `stream` is its new reference to the connection's stream.
    private func accept(_ stream: UnsafeMutablePointer<GIOStream>) {
        let id = ConnectionID(nextID)
        nextID += 1
        let transport = TransportSocket.socket(under: stream).flatMap { sockets[UnsafeMutableRawPointer($0)] }
        transport?.upgraded = true
        guard let session = WebSocketSession(stream: stream, transport: transport,
                                             onReadable: { [weak self] in self?.readable(id) },
                                             onClosed: { [weak self] in self?.closed(id) }) else { return }
        peers[id] = Peer(session: session, reader: WebSocketFrameReader(messageLimit: directory.messageLimit(for: id)),
                         baseline: transport?.counters())
        feed(.connected(id))
    }

    /// Connection `id` has something to read: reads one slice, as much as its budget allows, and
    /// handles the frames in it.
    private func readable(_ id: ConnectionID) {
        guard let peer = peers[id] else { return }
        let now = clock().monotonic
        let joined = directory.isJoined(id)
        let allowance = budget.allowance(joined: joined, now: now)
        guard allowance >= ReadBudget.smallestRead else {
            peer.session.pauseReading()
            paused.insert(id)
            return
        }
        switch peer.session.read(upTo: allowance) {
        case .wouldBlock:
            return
        case .ended:
            peer.session.ended()
            return
        case .bytes(let bytes):
            budget.charge(bytes.count, joined: joined, now: now)
            metrics.recordReceived(bytes: bytes.count)
            // Closing, a client has only its close frame left to send: one that keeps streaming
            // instead is no longer parsed, only drained until it closes (or the close timeout).
            if let closedAt = peer.session.bytesReadAtClose, peer.session.bytesRead - closedAt > Self.readAfterClose {
                return peer.session.linger()
            }
            // The byte rate first, so that a connection over it is closed before its bytes are parsed.
            if peer.session.isOpen { feed(.bytesRead(id, total: peer.session.bytesRead)) }
            peer.reader.append(bytes)
            handleFrames(of: id)
        }
    }

    private func handleFrames(of id: ConnectionID) {
        while let peer = peers[id] {
            let session = peer.session
            peer.reader.messageLimit = directory.messageLimit(for: id)
            let event: WebSocketFrameReader.Event
            do {
                guard let next = try peer.reader.next() else { return }
                event = next
            } catch {
                // Nothing more is read from it: its error and close frame go out, then the connection.
                if session.isOpen {
                    let code: SignalingErrorCode = error.closeCode == 1009 ? .messageTooLarge : .badMessage
                    feed(.invalid(SignalingError(code, error.reason), from: id))
                }
                session.finishAfterFlush(closeCode: error.closeCode)
                startCloseTimeout(id, at: clock().monotonic)
                return
            }
            switch event {
            case .text(let bytes):
                guard session.isOpen else { continue } // closing: only its close frame matters
                metrics.recordReceivedMessage()
                do {
                    feed(.received(try SignalingMessage.decode(ClientMessage.self, from: bytes), from: id))
                } catch {
                    feed(.invalid(error, from: id))
                }
            case .binary:
                guard session.isOpen else { continue }
                feed(.invalid(SignalingError(.badMessage, "binary frames are not accepted: send JSON text"), from: id))
            case .ping(let payload):
                guard session.isOpen else { continue }
                feed(.controlFrame(id))
                if session.isOpen { session.pong(payload) }
            case .pong:
                guard session.isOpen else { continue }
                feed(.controlFrame(id))
            case .close(let code):
                session.closeReceived(code: code)
                return
            }
        }
    }

    private func writeLogSummaries(flush: Bool = false) {
        let time = clock()
        for summary in logThrottle.summaries(now: time.monotonic, flush: flush) {
            emit(.heldBack(kind: summary.kind, lines: summary.lines, codes: summary.codes, seconds: summary.seconds), time.date)
        }
    }

    /// A connection the server closed that never answers (or never stops sending) is cut
    /// `closeTimeout` after the close (checked on the tick: a timer per closing connection would
    /// make a flood of them costly for the loop).
    private func startCloseTimeout(_ id: ConnectionID, at now: TimeInterval) {
        if closing[id] == nil { closing[id] = now + Self.closeTimeout }
    }

    /// Cuts connections that have not answered the server's close within `closeTimeout`.
    private func cutUnansweredCloses() {
        let now = clock().monotonic
        for (id, deadline) in closing where deadline <= now {
            closing[id] = nil
            guard let peer = peers[id] else { continue }
            peer.session.abort()
            closed(id)
        }
    }

    /// Reading resumes for connections paused when the server-wide budget ran out.
    private func resumePaused() {
        for id in paused.sorted() { peers[id]?.session.resumeReading() }
        paused.removeAll()
    }

    private func closed(_ id: ConnectionID) {
        // Keep the peer alive until the callback that brought us here has returned.
        if let peer = peers.removeValue(forKey: id) { loop?.perform { withExtendedLifetime(peer) {} } }
        paused.remove(id)
        closing[id] = nil
        feed(.disconnected(id))
        checkDrained()
    }

    private func checkDrained() {
        if peers.isEmpty, let done = whenDrained {
            whenDrained = nil
            done()
        }
    }

    /// Runs events through the directory one at a time, even when carrying out an action
    /// (a close) makes libsoup call back into us.
    private func feed(_ event: RoomDirectory.Event) {
        pending.append(event)
        guard !processing else { return }
        processing = true
        defer { processing = false }
        while !pending.isEmpty {
            let next = pending.removeFirst()
            let time = clock()
            for action in directory.handle(next, at: time) { perform(action, at: time) }
        }
    }

    private func perform(_ action: RoomDirectory.Action, at time: SignalingTime) {
        switch action {
        case let .send(message, id):
            guard let peer = peers[id] else { return }
            let text = SignalingMessage.encode(message)
            metrics.recordSent(message, bytes: text.utf8.count)
            peer.session.send(text: text)
        case let .close(id, code):
            guard let peer = peers[id] else { return }
            peer.session.close(code: UInt16(code.rawValue))
            startCloseTimeout(id, at: time.monotonic)
        case .abort(let id):
            guard let peer = peers[id] else { return }
            peer.session.abort()
            closed(id)
        case .log(let activity):
            metrics.record(activity)
            if logThrottle.admit(activity, now: time.monotonic) { emit(.activity(activity), time.date) }
        case .broker(let command):
            broker?.perform(command)
        }
    }

    // MARK: HTTP

    private func serveHTTP(_ message: OpaquePointer, path: String) {
        let method = soup_server_message_get_method(message).map { String(cString: $0) } ?? ""
        guard method == "GET" || method == "HEAD" else {
            return respond(message, status: 405, json: #"{"error":"method not allowed"}"#)
        }
        switch path {
        case RoomServer.healthPath:
            let s = status()
            // A node that cannot reach its broker admits nobody: a balancer's health check should pass it by.
            if let problem = broker?.problem {
                let reason = SignalingMessage.encode([problem]).dropFirst().dropLast()
                return respond(message, status: 503, json: #"{"participants":\#(s.participants),"rooms":\#(s.rooms),"status":"unavailable","reason":\#(reason),"uptimeSeconds":\#(s.uptimeSeconds)}"#)
            }
            respond(message, status: 200, json: #"{"participants":\#(s.participants),"rooms":\#(s.rooms),"status":"ok","uptimeSeconds":\#(s.uptimeSeconds)}"#)
        case RoomServer.metricsPath:
            let process = ServerMetrics.Reading.process()
            let reading = ServerMetrics.Reading(status: status(), node: node, brokerUp: broker.map { $0.problem == nil },
                                                brokerRoundTrips: broker?.roundTrips, forwarded: broker?.forwarded,
                                                residentBytes: process.residentBytes, openFiles: process.openFiles)
            respond(message, status: 200, contentType: "text/plain; version=0.0.4; charset=utf-8",
                    body: Array(metrics.exposition(reading).utf8), headers: [])
        case RoomServer.webSocketPath:
            if method == "GET", upgrade(message) { return }
            respond(message, status: 426, json: #"{"error":"connect with a WebSocket client (signaling protocol v1)"}"#)
        default:
            let headers = soup_server_message_get_request_headers(message)
            let tag = soup_message_headers_get_one(headers, "If-None-Match").map { String(cString: $0) }
            if let file = files?.response(method: method, path: path, ifNoneMatch: tag) {
                return respond(message, status: file.status, contentType: file.contentType, body: file.body, headers: file.headers)
            }
            respond(message, status: 404, json: files == nil ? #"{"error":"not found: try /health, /metrics or the WebSocket at /ws"}"#
                                                             : #"{"error":"not found"}"#)
        }
    }

    private func respond(_ message: OpaquePointer, status: UInt32, json: String) {
        respond(message, status: status, contentType: "application/json", body: Array(json.utf8), headers: [])
    }

    private func respond(_ message: OpaquePointer, status: UInt32, contentType: String, body: [UInt8], headers: [(String, String)]) {
        soup_server_message_set_status(message, guint(status), nil)
        let responseHeaders = soup_server_message_get_response_headers(message)
        // One answer per connection: libsoup 3.2 never notices when a client closes an idle
        // keep-alive connection, which would otherwise stay in CLOSE_WAIT and hold a descriptor
        // for good (fixed upstream in 3.4). Health checks do not need keep-alive, and the page's
        // handful of files load in parallel over fresh local connections, revalidated by ETag.
        soup_message_headers_replace(responseHeaders, "Connection", "close")
        for (name, value) in headers { soup_message_headers_replace(responseHeaders, name, value) }
        if status == 304 { return }
        body.withUnsafeBufferPointer { buffer in
            buffer.baseAddress?.withMemoryRebound(to: CChar.self, capacity: buffer.count) { text in
                soup_server_message_set_response(message, contentType, SOUP_MEMORY_COPY, text, gsize(buffer.count))
            }
        }
    }
}

/// A WebSocket connection as the server holds it: the session (bytes) and its frame reader.
/// Used on the loop thread only.
final class Peer {
    let session: WebSocketSession
    var reader: WebSocketFrameReader
    private let baseline: TransportSocket.Counters? // the HTTP upgrade's bytes, not counted

    init(session: WebSocketSession, reader: WebSocketFrameReader, baseline: TransportSocket.Counters?) {
        self.session = session
        self.reader = reader
        self.baseline = baseline
    }

    /// What the directory's limits need: the bytes read since the upgrade, the bytes the client's
    /// TCP has acknowledged, and what waits for it (in the session's queue and in the kernel's).
    func transportReading() -> RoomDirectory.TransportReading {
        let kernel = session.transport?.counters()
        var acknowledged: UInt64 = 0
        if let kernel, let baseline, kernel.acknowledged >= baseline.acknowledged {
            acknowledged = kernel.acknowledged - baseline.acknowledged
        }
        return .init(bytesReceived: session.bytesRead, bytesAcknowledged: acknowledged,
                     backlogBytes: session.queuedBytes + (kernel?.queued ?? 0))
    }
}
