import Foundation
import VeilCore

// Room membership as a value-type state machine: events in (a connection opened, a message
// arrived, a connection closed, time passed), actions out (send this to that connection, close it,
// log this). No I/O, no clock of its own: `RoomServer` feeds it, the tests drive it directly.

/// Identifies one WebSocket connection for as long as it is open (assigned by the server, never reused).
public struct ConnectionID: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The number.
    public let rawValue: UInt64
    /// An identifier from its number.
    public init(_ rawValue: UInt64) { self.rawValue = rawValue }
    public var description: String { "#\(rawValue)" }
    public static func < (a: ConnectionID, b: ConnectionID) -> Bool { a.rawValue < b.rawValue }
}

/// A reading of the two clocks the room logic needs: a monotonic one for liveness, the wall clock
/// for token expiry. Injected so the logic is testable without sleeping.
public struct SignalingTime: Equatable, Sendable {
    /// Seconds on a monotonic clock (any origin).
    public var monotonic: TimeInterval
    /// The date, for token expiry.
    public var date: Date

    /// A reading.
    public init(monotonic: TimeInterval, date: Date) { self.monotonic = monotonic; self.date = date }

    /// The current time of this process.
    public static func now() -> SignalingTime {
        SignalingTime(monotonic: ProcessInfo.processInfo.systemUptime, date: Date())
    }

    /// This reading `seconds` later on both clocks.
    public func adding(_ seconds: TimeInterval) -> SignalingTime {
        SignalingTime(monotonic: monotonic + seconds, date: date.addingTimeInterval(seconds))
    }
}

/// Something worth one log line. It never carries a token.
public enum RoomActivity: Equatable, Sendable, CustomStringConvertible {
    /// `user` joined `room`, which now has `participants` members; `resumed` when they took over their own earlier session.
    case joined(room: String, user: String, participants: Int, resumed: Bool)
    /// `user` left `room`, for `reason`.
    case left(room: String, user: String, reason: LeaveReason)
    /// The server removed `user` from `room` for `code` (a protocol violation, a limit): they leave as `kicked`.
    case kicked(room: String, user: String, code: SignalingErrorCode)
    /// `user`'s connection to `room` dropped without `leave`; they are held for `grace` seconds.
    case dropped(room: String, user: String, grace: TimeInterval)
    /// A join of `user` to `room` was refused with `code`.
    case refused(room: String, user: String, code: SignalingErrorCode)
    /// A connection that was not in a room was closed for `code` (protocol violation, join timeout).
    case closed(ConnectionID, code: SignalingErrorCode)

    /// `key=value` words, e.g. `join room=r user=u participants=2` (`LogLine`).
    public var description: String { logLine.text }
}

/// The rooms of a server and who is in them. Feed it `Event`s with the time; carry out the
/// `Action`s it returns, in order.
///
/// Rules (docs/protocol.md):
/// - A connection joins one room at a time with a token for that room and user. A room holds at
///   most `maximumParticipants` (held participants count); one more gets `room_full`.
/// - The same user joining the same room again takes over the session (reconnection): the old
///   connection gets `error(replaced)` and is closed; the others are told nothing; the newcomer's
///   `joined` says `resumed`.
/// - A connection that closes without `leave`, or stays silent (no message, not even `ping`) for
///   more than `silenceTimeout`, is dropped: its participant is held for `reconnectGrace` seconds
///   from their last sign of life, then reported as `participantLeft(timeout)`.
/// - Offer, answer and ICE are relayed only to another participant of the sender's room
///   (`unknown_peer` otherwise); messages to a held participant are dropped. Session descriptions
///   with a video section are refused (`video_not_allowed`): Veil sends voice and expressions only.
/// - Anything but `join` and `ping` before joining gets `not_joined`. An undecodable message gets
///   its error and the connection is closed; a joined sender is removed as `kicked`.
/// - Limits (`Configuration`): beyond `maximumConnections`, or beyond `maximumUnjoinedConnections`
///   of those not in a room, the connection that has waited longest without joining gets
///   `server_full` and is closed to make room (a newcomer is refused only when every connection is
///   in a room). A connection that sends more messages (WebSocket control frames included), bytes or
///   joins than its token buckets allow gets `rate_limited`; before joining its buckets are small.
///   One that leaves more than `maximumBacklogBytes` unread, or leaves queued bytes unacknowledged
///   for `stallTimeout`, gets `slow_consumer` (and its transport is cut). Either way it is closed and
///   a joined offender leaves as `kicked`.
/// - A gap between ticks beyond `pauseTolerance` is the server's own pause and counts against nobody.
public struct RoomDirectory: Sendable {
    /// Limits and timings. The limits and why they are what they are: docs/protocol.md, "Limits".
    public struct Configuration: Equatable, Sendable {
        /// Most participants in one room (a WebRTC mesh grows as n²): default 8.
        public var maximumParticipants: Int
        /// A connection with no message for longer than this is treated as dropped (half-open
        /// connections). Clients ping every `SignalingMessage.pingInterval`. Default 4 s.
        public var silenceTimeout: TimeInterval
        /// How long a dropped participant is held, from their last sign of life, so a reconnecting
        /// client can resume seamlessly. Default 3 s (so `participantLeft(timeout)` comes within 5 s of a drop).
        public var reconnectGrace: TimeInterval
        /// A connection must join within this long after opening (or after `leave`). Default 15 s.
        public var joinTimeout: TimeInterval
        /// STUN/TURN servers handed out in `joined`.
        public var iceServers: [ICEServer]
        /// Most open WebSocket connections, joined or not; one more gets `server_full`. Default 4096.
        public var maximumConnections: Int
        /// Most connections that have not joined a room (they are cheap to open and each waits up to
        /// `joinTimeout`); one more gets `server_full`. Default half of `maximumConnections`, so an
        /// idle-connection flood leaves the other half to people in calls.
        public var maximumUnjoinedConnections: Int
        /// Messages per connection in a room (every kind, `ping` included, WebSocket control frames
        /// too). Default 50/s with a burst that grows with the room size: see `RateLimit.messages(roomSize:)`.
        public var messageRate: RateLimit
        /// Messages per connection not in a room (control frames included): it has nothing to send
        /// but `join` and `ping`. Default 2/s, burst 10.
        public var unjoinedMessageRate: RateLimit
        /// Bytes received per connection not in a room. Default 4 KiB/s, burst 16 KiB: a `join` is
        /// a few hundred bytes.
        public var unjoinedByteRate: RateLimit
        /// The largest message from a connection not in a room (a `join` is a few hundred bytes; the
        /// size is checked when a frame's header announces it, before its payload is read). Default 4 KiB.
        public var maximumUnjoinedMessageBytes: Int
        /// Bytes the server reads per second from all connections not in a room together, and from all
        /// connections together (`ReadBudget`): when either is spent, reading from those connections
        /// pauses (their bytes wait in the kernel, and TCP makes the senders wait) until it refills.
        /// Defaults 1 MiB/s (burst 1 MiB) and 16 MiB/s (burst 4 MiB).
        public var unjoinedServerByteRate: RateLimit
        /// See `unjoinedServerByteRate`.
        public var serverByteRate: RateLimit
        /// A gap between two ticks longer than this is the server's own pause (a busy machine, a
        /// flood it was working through, a stop signal), not the clients': silences, join deadlines,
        /// stall timers and grace periods are moved on by the gap, so the server does not drop
        /// everyone for its own lateness. Nil counts every gap against the clients. Default 1 s
        /// (the server ticks every 0.1 s).
        public var pauseTolerance: TimeInterval?
        /// Bytes received per connection in a room, as the transport counts them (frames, control
        /// frames and all). Default 128 KiB/s with a burst of 1 MiB.
        public var byteRate: RateLimit
        /// `join` messages per connection, accepted or not. Default a burst of 5, then one per 5 s.
        public var joinRate: RateLimit
        /// Most bytes queued for one connection and not yet acknowledged by its TCP; more gets it
        /// closed with `slow_consumer` at once. Default 1 MiB.
        public var maximumBacklogBytes: Int
        /// How long a connection may leave queued bytes unacknowledged (it does not read) before it is
        /// closed with `slow_consumer`. Default 5 s.
        public var stallTimeout: TimeInterval

        /// Limits and timings; the defaults suit a local mesh.
        public init(maximumParticipants: Int = 8, silenceTimeout: TimeInterval = 4, reconnectGrace: TimeInterval = 3,
                    joinTimeout: TimeInterval = 15, iceServers: [ICEServer] = [],
                    maximumConnections: Int = 4096, maximumUnjoinedConnections: Int? = nil,
                    messageRate: RateLimit? = nil, byteRate: RateLimit = .init(perSecond: 128 * 1024, burst: 1024 * 1024),
                    joinRate: RateLimit = .init(perSecond: 0.2, burst: 5),
                    maximumBacklogBytes: Int = 1024 * 1024, stallTimeout: TimeInterval = 5,
                    unjoinedMessageRate: RateLimit = .init(perSecond: 2, burst: 10),
                    unjoinedByteRate: RateLimit = .init(perSecond: 4 * 1024, burst: 16 * 1024),
                    maximumUnjoinedMessageBytes: Int = 4 * 1024,
                    unjoinedServerByteRate: RateLimit = .init(perSecond: 1024 * 1024, burst: 1024 * 1024),
                    serverByteRate: RateLimit = .init(perSecond: 16 * 1024 * 1024, burst: 4 * 1024 * 1024),
                    pauseTolerance: TimeInterval? = 1) {
            self.maximumParticipants = max(1, maximumParticipants)
            self.silenceTimeout = silenceTimeout
            self.reconnectGrace = reconnectGrace
            self.joinTimeout = joinTimeout
            self.iceServers = iceServers
            self.maximumConnections = max(1, maximumConnections)
            self.maximumUnjoinedConnections = max(1, maximumUnjoinedConnections ?? self.maximumConnections / 2)
            self.messageRate = messageRate ?? .messages(roomSize: self.maximumParticipants)
            self.byteRate = byteRate
            self.joinRate = joinRate
            self.maximumBacklogBytes = max(1, maximumBacklogBytes)
            self.stallTimeout = stallTimeout
            self.unjoinedMessageRate = unjoinedMessageRate
            self.unjoinedByteRate = unjoinedByteRate
            self.maximumUnjoinedMessageBytes = max(1, maximumUnjoinedMessageBytes)
            self.unjoinedServerByteRate = unjoinedServerByteRate
            self.serverByteRate = serverByteRate
            self.pauseTolerance = pauseTolerance
        }
    }

    /// A token bucket's size: `perSecond` sustained, up to `burst` at once after a quiet spell.
    public struct RateLimit: Equatable, Sendable, CustomStringConvertible {
        /// Refill per second.
        public var perSecond: Double
        /// Capacity (and the allowance of a new connection).
        public var burst: Double
        /// A limit.
        public init(perSecond: Double, burst: Double) {
            self.perSecond = max(0, perSecond)
            self.burst = max(1, burst)
        }

        /// The message limit for rooms of `roomSize`: 50 per second, and a burst of 60 plus 30 for
        /// each other participant. A newcomer sends one offer and trickles some 10–25 ICE
        /// candidates to each of the others within a second or two of joining; otherwise a client
        /// sends one `ping` a second and an occasional `mute`.
        public static func messages(roomSize: Int) -> RateLimit {
            RateLimit(perSecond: 50, burst: Double(60 + 30 * max(0, roomSize - 1)))
        }

        public var description: String { "\(Self.number(perSecond))/s, burst \(Self.number(burst))" }
        private static func number(_ x: Double) -> String { x.rounded() == x ? String(Int(x)) : String(format: "%.2f", x) }
    }

    /// What the transport says about one connection, read by the server a few times a second.
    public struct TransportReading: Equatable, Sendable {
        /// Bytes received on the connection since it opened (all of them: frames, control frames).
        public var bytesReceived: UInt64
        /// Bytes its peer's TCP has acknowledged since it opened.
        public var bytesAcknowledged: UInt64
        /// Bytes queued for it (by the server and in the kernel) that its peer has not acknowledged yet.
        public var backlogBytes: Int
        /// A reading.
        public init(bytesReceived: UInt64, bytesAcknowledged: UInt64, backlogBytes: Int) {
            self.bytesReceived = bytesReceived; self.bytesAcknowledged = bytesAcknowledged; self.backlogBytes = backlogBytes
        }
    }

    /// What happened.
    public enum Event: Equatable, Sendable {
        /// A WebSocket connection opened.
        case connected(ConnectionID)
        /// A decoded message arrived on a connection.
        case received(ClientMessage, from: ConnectionID)
        /// Something arrived that is not a valid message (bad JSON, binary frame, too large).
        case invalid(SignalingError, from: ConnectionID)
        /// The transport's counters for a connection (see `TransportReading`): byte rate and backlog.
        case transport(ConnectionID, TransportReading)
        /// The server has read `total` bytes from the connection since it opened (checked against the
        /// byte rate as each slice is read, before it is parsed).
        case bytesRead(ConnectionID, total: UInt64)
        /// A WebSocket control frame (ping or pong) arrived: a sign of life, and a message against the rate.
        case controlFrame(ConnectionID)
        /// The connection closed (by the peer or by the network), without the server asking.
        case disconnected(ConnectionID)
        /// Time passed: check silences, join deadlines and grace periods. Call it a few times a second.
        case tick
        /// The server stops: everyone is disconnected.
        case shutdown
        /// The broker that shares rooms with other nodes reports something (see `RoomBroker`).
        case broker(RoomBrokerEvent)
    }

    /// What to do.
    public enum Action: Equatable, Sendable {
        /// Send `message` on `connection`.
        case send(ServerMessage, to: ConnectionID)
        /// Close `connection` with `code` (after the sends before it). The directory has forgotten it.
        case close(ConnectionID, code: WebSocketCloseCode)
        /// Cut `connection`'s transport now, after its `close`, without waiting for the closing
        /// handshake: its peer does not read, so the handshake cannot complete, and what is queued for
        /// it should be freed.
        case abort(ConnectionID)
        /// Write a log line.
        case log(RoomActivity)
        /// Hand a command to the broker that shares rooms with other nodes (only when `brokered`).
        case broker(RoomBrokerCommand)
    }

    /// A member of a room.
    struct Participant: Equatable, Sendable {
        var user: String
        var connection: ConnectionID?  // nil while held after a drop, or on another node
        var muted = false
        var heldSince: TimeInterval?   // last sign of life before the drop
        var node: String?              // the node they are on, when not this one (brokered)
    }

    /// A join waiting for the broker's answer.
    struct Admission: Equatable, Sendable {
        var room: String
        var user: String
    }

    struct Connection: Equatable, Sendable {
        var room: String?              // nil: not in a room
        var user: String?
        var lastSeen: TimeInterval
        var idleSince: TimeInterval    // when it opened or last left a room
        var messages: TokenBucket
        var bytes: TokenBucket
        var joins: TokenBucket
        var bytesReceived: UInt64 = 0  // at the last transport reading
        var bytesAcknowledged: UInt64 = 0
        var stalledSince: TimeInterval? // backlog with no acknowledgement since then
        var admission: Admission?      // a join the broker has not answered yet

        init(now: TimeInterval, configuration: Configuration) {
            lastSeen = now
            idleSince = now
            messages = TokenBucket(configuration.unjoinedMessageRate, now: now)
            bytes = TokenBucket(configuration.unjoinedByteRate, now: now)
            joins = TokenBucket(configuration.joinRate, now: now)
        }

        /// Full message and byte allowances, a participant's (sized for a call: offers, candidates)
        /// or, out of a room, a stranger's (`join` and `ping` only).
        mutating func resetAllowances(joined: Bool, now: TimeInterval, configuration: Configuration) {
            messages = TokenBucket(joined ? configuration.messageRate : configuration.unjoinedMessageRate, now: now)
            bytes = TokenBucket(joined ? configuration.byteRate : configuration.unjoinedByteRate, now: now)
        }
    }

    /// A token bucket: starts full, refills at the limit's rate up to its burst.
    struct TokenBucket: Equatable, Sendable {
        let limit: RateLimit
        var tokens: Double
        var updated: TimeInterval

        init(_ limit: RateLimit, now: TimeInterval) { self.limit = limit; tokens = limit.burst; updated = now }

        /// Adds what the rate has refilled since the last update.
        mutating func refill(now: TimeInterval) {
            tokens = min(limit.burst, tokens + max(0, now - updated) * limit.perSecond)
            updated = max(updated, now)
        }

        /// Takes `amount` if there is that much; false (and nothing taken) otherwise.
        mutating func take(_ amount: Double, now: TimeInterval) -> Bool {
            refill(now: now)
            guard tokens >= amount else { return false }
            tokens -= amount
            return true
        }
    }

    /// The configuration in force.
    public let configuration: Configuration
    /// Whether rooms are shared with other nodes through a `RoomBroker`: joins are admitted by the
    /// broker (the room size holds across nodes), and participants of other nodes are mirrored in
    /// the rooms this node has participants in.
    public let brokered: Bool
    private let tokens: TokenAuthority
    var connections: [ConnectionID: Connection] = [:]
    var rooms: [String: [Participant]] = [:]   // in join order
    private var lastTick: TimeInterval?               // the last tick (or the first event)

    /// An empty directory admitting holders of tokens signed by `tokens`; `brokered` when it
    /// shares its rooms with other nodes through a broker.
    public init(configuration: Configuration = Configuration(), tokens: TokenAuthority, brokered: Bool = false) {
        self.configuration = configuration
        self.tokens = tokens
        self.brokered = brokered
    }

    /// Number of rooms with at least one participant on this node.
    public var roomCount: Int { rooms.count }
    /// Number of participants on this node in all rooms (held ones included).
    public var participantCount: Int { rooms.values.reduce(0) { $0 + $1.count { $0.node == nil } } }
    /// Number of open connections, joined or not.
    public var connectionCount: Int { connections.count }
    /// Number of open connections not in a room.
    public var unjoinedConnectionCount: Int { connections.values.reduce(0) { $0 + ($1.room == nil ? 1 : 0) } }
    /// The participants of `room`, in join order.
    public func participants(in room: String) -> [ParticipantInfo] {
        (rooms[room] ?? []).map { ParticipantInfo(user: $0.user, muted: $0.muted) }
    }
    /// Whether connection `id` is open and in a room.
    public func isJoined(_ id: ConnectionID) -> Bool { connections[id]?.room != nil }
    /// The largest message connection `id` may send now: `SignalingMessage.maxSize` in a room,
    /// `maximumUnjoinedMessageBytes` before.
    public func messageLimit(for id: ConnectionID) -> Int {
        isJoined(id) ? SignalingMessage.maxSize : configuration.maximumUnjoinedMessageBytes
    }
    /// Whether `user` in `room` is held after a drop, waiting for a reconnection.
    public func isHeld(user: String, in room: String) -> Bool {
        rooms[room]?.first { $0.user == user }?.heldSince != nil
    }

    /// Processes one event at `time` and returns what to do, in order.
    public mutating func handle(_ event: Event, at time: SignalingTime) -> [Action] {
        let now = time.monotonic
        if lastTick == nil { lastTick = now } // the pause tolerance counts from the first event
        switch event {
        case .connected(let id):
            guard connections[id] == nil else { return [] }
            // When full, the connection that has waited longest without joining makes room: a client
            // joins within a round trip of connecting, so idle ones crowding the server are pushed
            // out by newcomers (reconnecting participants among them) instead of locking them out.
            var actions: [Action] = []
            let full = connections.count >= configuration.maximumConnections
            if full || unjoinedConnectionCount >= configuration.maximumUnjoinedConnections {
                guard let oldest = oldestUnjoinedConnection else {
                    return refuseConnection(id, message: "the server has its maximum of \(configuration.maximumConnections) connections: try again later")
                }
                connections.removeValue(forKey: oldest)
                actions = refuseConnection(oldest, message: "the server is full and this connection had not joined a room: join right after connecting")
            }
            connections[id] = Connection(now: now, configuration: configuration)
            return actions
        case let .received(message, id):
            guard connections[id] != nil else { return [] }
            connections[id]?.lastSeen = now
            guard connections[id]?.messages.take(1, now: now) == true else {
                return expel(id, rateError(for: id, of: "messages"))
            }
            if case .join = message, connections[id]?.joins.take(1, now: now) != true {
                return expel(id, SignalingError(.rateLimited, "more than \(configuration.joinRate) joins on one connection"))
            }
            return receive(message, from: id, at: time)
        case let .invalid(error, id):
            return expel(id, error)
        case let .bytesRead(id, total):
            return charge(bytesReceived: total, of: id, now: now)
        case let .transport(id, reading):
            return transport(reading, of: id, now: now)
        case .controlFrame(let id):
            guard connections[id] != nil else { return [] }
            connections[id]?.lastSeen = now
            guard connections[id]?.messages.take(1, now: now) == true else {
                return expel(id, rateError(for: id, of: "messages"))
            }
            return []
        case .disconnected(let id):
            guard let connection = connections.removeValue(forKey: id) else { return [] }
            return drop(connection, lastSignOfLife: now)
        case .tick:
            return tick(now: now)
        case .broker(let event):
            return handle(event, at: time)
        case .shutdown:
            let ids = connections.keys.sorted()
            connections.removeAll()
            rooms.removeAll()
            return ids.flatMap { id -> [Action] in
                // With rooms shared between nodes, the seats stay in the broker for a while: a client
                // that reconnects (the balancer sends it to another node) resumes its seat.
                [.send(.error(code: .serverShutdown, message: brokered ? "this server is shutting down: reconnect, another node takes you back into your room"
                                                                       : "the server is shutting down"), to: id), .close(id, code: .goingAway)]
            }
        }
    }

    // MARK: - Limits

    /// The connection not in a room that has been idle longest.
    private var oldestUnjoinedConnection: ConnectionID? {
        connections.lazy.filter { $0.value.room == nil }.min { ($0.value.idleSince, $0.key) < ($1.value.idleSince, $1.key) }?.key
    }

    private func refuseConnection(_ id: ConnectionID, message: String) -> [Action] {
        [.send(.error(code: .serverFull, message: message), to: id), .close(id, code: .serverFull), .log(.closed(id, code: .serverFull))]
    }

    /// Closes a connection that broke the protocol or a limit: its error, its close code, and a joined
    /// participant leaves as `kicked`.
    private mutating func expel(_ id: ConnectionID, _ error: SignalingError, abort: Bool = false) -> [Action] {
        guard let connection = connections.removeValue(forKey: id) else { return [] }
        var actions: [Action] = [.send(.error(code: error.code, message: error.message), to: id),
                                 .close(id, code: Self.closeCode(for: error.code))]
        if abort { actions.append(.abort(id)) }
        if let room = connection.room, let user = connection.user {
            actions += remove(user: user, from: room, reason: .kicked, code: error.code)
        } else {
            actions.append(.log(.closed(id, code: error.code)))
        }
        return actions
    }

    /// `rate_limited` for connection `id`, naming the limit it broke (`what`: "messages" or "bytes").
    private func rateError(for id: ConnectionID, of what: String) -> SignalingError {
        let joined = isJoined(id)
        let limit = switch (what, joined) {
        case ("bytes", true): configuration.byteRate
        case ("bytes", false): configuration.unjoinedByteRate
        case (_, true): configuration.messageRate
        default: configuration.unjoinedMessageRate
        }
        return SignalingError(.rateLimited, "more than \(limit) \(what)\(joined ? "" : " before joining"): slow down")
    }

    /// Charges what arrived since the last count (`total` is since the connection opened) to the byte rate.
    private mutating func charge(bytesReceived total: UInt64, of id: ConnectionID, now: TimeInterval) -> [Action] {
        guard var connection = connections[id], total > connection.bytesReceived else { return [] }
        let received = total - connection.bytesReceived
        connection.bytesReceived = total
        guard connection.bytes.take(Double(received), now: now) else { return expel(id, rateError(for: id, of: "bytes")) }
        connections[id] = connection
        return []
    }

    private mutating func transport(_ reading: TransportReading, of id: ConnectionID, now: TimeInterval) -> [Action] {
        let charged = charge(bytesReceived: reading.bytesReceived, of: id, now: now)
        guard charged.isEmpty, var connection = connections[id] else { return charged }
        if reading.backlogBytes > configuration.maximumBacklogBytes {
            return expel(id, SignalingError(.slowConsumer, "\(reading.backlogBytes) bytes queued for this connection and not read: read what the server sends"), abort: true)
        }
        if reading.backlogBytes > 0, reading.bytesAcknowledged <= connection.bytesAcknowledged {
            let since = connection.stalledSince ?? now
            connection.stalledSince = since
            if now - since >= configuration.stallTimeout {
                return expel(id, SignalingError(.slowConsumer, "nothing read for \(Int(configuration.stallTimeout)) s with \(reading.backlogBytes) bytes waiting: read what the server sends"), abort: true)
            }
        } else {
            connection.stalledSince = nil
        }
        connection.bytesAcknowledged = max(connection.bytesAcknowledged, reading.bytesAcknowledged)
        connections[id] = connection
        return []
    }

    // MARK: - Messages

    private mutating func receive(_ message: ClientMessage, from id: ConnectionID, at time: SignalingTime) -> [Action] {
        guard let connection = connections[id] else { return [] }
        if case .ping(let t) = message { return [.send(.pong(t: t), to: id)] }
        if case let .join(room, user, token) = message {
            return join(room: room, user: user, token: token, from: id, at: time)
        }
        guard let room = connection.room, let user = connection.user else {
            return [.send(.error(code: .notJoined, message: "join a room first"), to: id)]
        }
        switch message {
        case let .offer(to, sdp):
            return relay(.offer(from: user, sdp: sdp), sdp: sdp, from: user, to: to, in: room, sender: id)
        case let .answer(to, sdp):
            return relay(.answer(from: user, sdp: sdp), sdp: sdp, from: user, to: to, in: room, sender: id)
        case let .ice(to, mline, candidate):
            return relay(.ice(from: user, mline: mline, candidate: candidate), sdp: nil, from: user, to: to, in: room, sender: id)
        case .mute(let muted):
            guard let index = rooms[room]?.firstIndex(where: { $0.user == user }), rooms[room]?[index].muted != muted else { return [] }
            rooms[room]?[index].muted = muted
            return broadcast(.muteChanged(user: user, muted: muted), in: room, except: user)
                + (brokered ? [.broker(.mute(room: room, user: user, muted: muted))] : [])
        case .leave:
            connections[id]?.room = nil
            connections[id]?.resetAllowances(joined: false, now: time.monotonic, configuration: configuration)
            connections[id]?.user = nil
            connections[id]?.idleSince = time.monotonic
            return remove(user: user, from: room, reason: .left)
        case .join, .ping:
            return [] // handled above
        }
    }

    private mutating func join(room: String, user: String, token: String?, from id: ConnectionID, at time: SignalingTime) -> [Action] {
        if let current = connections[id]?.room ?? connections[id]?.admission?.room {
            return [.send(.error(code: .alreadyJoined, message: "this connection is already in room \(current); send leave first"), to: id)]
        }
        do {
            _ = try tokens.verify(token, room: room, user: user, now: time.date)
        } catch {
            return refuse(id, room: room, user: user, code: error.code, message: error.message, close: .policyViolation)
        }
        var members = rooms[room] ?? []
        if brokered, !members.contains(where: { $0.user == user && $0.node == nil }) {
            // Only the broker knows every node's participants: it admits (or refuses) the join.
            connections[id]?.admission = Admission(room: room, user: user)
            return [.broker(.admit(room: room, user: user, connection: id, limit: configuration.maximumParticipants))]
        }
        var actions: [Action] = []
        let resumed: Bool
        if let index = members.firstIndex(where: { $0.user == user }) {
            // The same user again: a reconnection (or a second device) takes the session over.
            if let old = members[index].connection {
                connections.removeValue(forKey: old)
                actions += [.send(.error(code: .replaced, message: "another connection joined as \(user) in \(room)"), to: old),
                            .close(old, code: .replaced)]
            }
            members[index].connection = id
            members[index].heldSince = nil
            resumed = true
        } else {
            guard members.count < configuration.maximumParticipants else {
                return refuse(id, room: room, user: user, code: .roomFull,
                              message: "room \(room) is full (\(configuration.maximumParticipants) participants)", close: .roomFull)
            }
            members.append(Participant(user: user, connection: id))
            resumed = false
        }
        rooms[room] = members
        if connections[id]?.room == nil {
            connections[id]?.resetAllowances(joined: true, now: time.monotonic, configuration: configuration)
        }
        connections[id]?.room = room
        connections[id]?.user = user
        let me = members.first { $0.user == user }
        let others = members.filter { $0.user != user }.map { ParticipantInfo(user: $0.user, muted: $0.muted) }
        actions.append(.send(.joined(.init(you: user, room: room, muted: me?.muted ?? false, resumed: resumed,
                                           participants: others, iceServers: configuration.iceServers)), to: id))
        if !resumed { actions += broadcast(.participantJoined(user: user, muted: false), in: room, except: user) }
        actions.append(.log(.joined(room: room, user: user, participants: members.count, resumed: resumed)))
        return actions
    }

    private mutating func refuse(_ id: ConnectionID, room: String, user: String, code: SignalingErrorCode,
                                 message: String, close: WebSocketCloseCode) -> [Action] {
        connections.removeValue(forKey: id)
        return [.send(.error(code: code, message: message), to: id), .close(id, code: close), .log(.refused(room: room, user: user, code: code))]
    }

    private func relay(_ message: ServerMessage, sdp: String?, from user: String, to target: String,
                       in room: String, sender: ConnectionID) -> [Action] {
        guard target != user, let peer = rooms[room]?.first(where: { $0.user == target }) else {
            return [.send(.error(code: .unknownPeer, message: "\(target) is not another participant of room \(room)"), to: sender)]
        }
        if let sdp, let refusal = Self.refusal(of: sdp) {
            return [.send(.error(code: .videoNotAllowed, message: refusal), to: sender)]
        }
        if let node = peer.node { return [.broker(.relay(room: room, to: target, node: node, message: message))] }
        guard let connection = peer.connection else { return [] } // held: they renegotiate when they resume
        return [.send(message, to: connection)]
    }

    /// Why `sdp` may not be relayed, or nil: it must be well-formed SDP, read strictly, with only an
    /// audio section and a data channel (`SessionDescriptionMedia`, the rule the clients apply too).
    static func refusal(of sdp: String) -> String? {
        do {
            let media = try SessionDescriptionMedia(parsing: sdp)
            guard let section = media.firstForbiddenSection else { return nil }
            return "session descriptions carry one audio section and one data channel only, never video or other media (m=\(section.kind.prefix(20)) on line \(section.line)): Veil sends voice and expressions only"
        } catch {
            return "\(error): session descriptions must be strict SDP, so that no parser reads a video section into them"
        }
    }

    // MARK: - Membership changes

    func broadcast(_ message: ServerMessage, in room: String, except user: String) -> [Action] {
        (rooms[room] ?? []).compactMap { member in
            guard member.user != user, let connection = member.connection else { return nil }
            return .send(message, to: connection)
        }
    }

    mutating func remove(user: String, from room: String, reason: LeaveReason, code: SignalingErrorCode? = nil) -> [Action] {
        guard var members = rooms[room], let index = members.firstIndex(where: { $0.user == user }) else { return [] }
        let local = members[index].node == nil
        members.remove(at: index)
        rooms[room] = members.isEmpty ? nil : members
        let line: RoomActivity = if let code { .kicked(room: room, user: user, code: code) } else { .left(room: room, user: user, reason: reason) }
        var actions = broadcast(.participantLeft(user: user, reason: reason), in: room, except: user) + [.log(line)]
        if brokered {
            if local { actions.append(.broker(.leave(room: room, user: user, reason: reason))) }
            // Participants of other nodes are mirrored only while this node has some of its own there.
            if !members.contains(where: { $0.node == nil }) { rooms[room] = nil }
        }
        return actions
    }

    private mutating func drop(_ connection: Connection, lastSignOfLife: TimeInterval) -> [Action] {
        guard let room = connection.room, let user = connection.user,
              let index = rooms[room]?.firstIndex(where: { $0.user == user }) else { return [] }
        rooms[room]?[index].connection = nil
        rooms[room]?[index].heldSince = lastSignOfLife
        return [.log(.dropped(room: room, user: user, grace: configuration.reconnectGrace))]
    }

    private mutating func tick(now: TimeInterval) -> [Action] {
        if let tolerance = configuration.pauseTolerance, let last = lastTick, now - last > tolerance {
            forgive(pause: now - last - tolerance, now: now)
        }
        lastTick = now
        var actions: [Action] = []
        for (id, connection) in connections.sorted(by: { $0.key < $1.key }) {
            if now - connection.lastSeen > configuration.silenceTimeout {
                // Probably half-open; if the client is alive after all, it learns why.
                connections.removeValue(forKey: id)
                actions += [.send(.error(code: .pingTimeout, message: "nothing received for \(Int(configuration.silenceTimeout)) s: send ping every second"), to: id),
                            .close(id, code: .timeout)]
                if connection.room != nil {
                    actions += drop(connection, lastSignOfLife: connection.lastSeen)
                } else {
                    actions.append(.log(.closed(id, code: .pingTimeout)))
                }
            } else if connection.room == nil, now - connection.idleSince > configuration.joinTimeout {
                connections.removeValue(forKey: id)
                actions += [.send(.error(code: .joinTimeout, message: "no join within \(Int(configuration.joinTimeout)) s"), to: id),
                            .close(id, code: .timeout), .log(.closed(id, code: .joinTimeout))]
            }
        }
        for room in rooms.keys.sorted() {
            for member in rooms[room] ?? [] {
                if let since = member.heldSince, now - since >= configuration.reconnectGrace {
                    actions += remove(user: member.user, from: room, reason: .timeout)
                }
            }
        }
        return actions
    }

    /// Moves every client's clocks on by `pause`, time the server was not looking (never past `now`).
    private mutating func forgive(pause: TimeInterval, now: TimeInterval) {
        for id in connections.keys {
            guard var connection = connections[id] else { continue }
            connection.lastSeen = min(now, connection.lastSeen + pause)
            connection.idleSince = min(now, connection.idleSince + pause)
            connection.stalledSince = connection.stalledSince.map { min(now, $0 + pause) }
            connections[id] = connection
        }
        for room in rooms.keys {
            guard var members = rooms[room] else { continue }
            for index in members.indices { members[index].heldSince = members[index].heldSince.map { min(now, $0 + pause) } }
            rooms[room] = members
        }
    }

    static func closeCode(for code: SignalingErrorCode) -> WebSocketCloseCode {
        switch code {
        case .messageTooLarge: .tooBig
        case .rateLimited, .slowConsumer: .policyViolation
        case .serverFull: .serverFull
        default: .protocolError
        }
    }
}
