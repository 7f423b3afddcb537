internal import CGLib
import Foundation
import VeilCore
import VeilGLib

/// Where a node finds Redis, and who it is there.
public struct RedisBrokerConfiguration: Equatable, Sendable {
    /// Redis's host (an IP address or a name) and port.
    public var host: String
    /// See `host`.
    public var port: Int
    /// This node's name, unique among the nodes sharing the Redis (`SignalingMessage.isValidName`).
    public var node: String
    /// How long the node's registration lasts without a heartbeat: a node silent for longer is
    /// taken for dead and its participants leave their rooms as `timeout`. Default 3 s.
    public var timeToLive: TimeInterval
    /// How often the node refreshes its registration and looks for dead nodes. Default 0.5 s.
    public var heartbeat: TimeInterval

    /// A configuration.
    public init(host: String, port: Int, node: String, timeToLive: TimeInterval = 3, heartbeat: TimeInterval = 0.5) {
        self.host = host; self.port = port; self.node = node; self.timeToLive = timeToLive; self.heartbeat = heartbeat
    }
}

/// Rooms shared through Redis (see `RedisRoomBroker+Scripts.swift` for the data and scripts).
///
/// Two connections: one for commands (the scripts, relays), one subscribed to the node's channel,
/// on which every event for this node arrives in the order Redis made the changes (the answer to a
/// join included, so it cannot overtake or be overtaken by the room's other changes).
///
/// The node refreshes its registration every `heartbeat`, and runs the reaper that takes nodes
/// whose registration ran out for dead. When Redis cannot be reached (or stops answering), joins
/// are refused with `service_unavailable` rather than admitted without the other nodes, the node
/// reconnects every second, and its leaves and mutes wait for the connection. If the node was
/// taken for dead meanwhile (or Redis lost its data), its participants are asked to join again;
/// if it kept its seats, Redis publishes its rooms' state to it, since what was published while
/// it was not listening is lost.
///
/// Loop-confined: created, used and stopped on the room server's GLib loop thread.
final class RedisRoomBroker: RoomBroker {
    let configuration: RedisBrokerConfiguration
    private let clock: () -> TimeInterval
    private var commands: RedisConnection?
    private var subscriber: RedisConnection?
    private var deliver: ((RoomBrokerEvent) -> Void)?
    private let log: (String) -> Void
    private enum State: Equatable { case connecting, ready, down(String), stopped }
    private var state = State.connecting
    private var opened = 0                // connections open (of two)
    private var waiting: [RoomBrokerCommand] = []  // until the connections are ready
    private var timer: GLibSource?
    private var reconnectTimer: GLibSource?
    private var heartbeatSent: TimeInterval?       // an unanswered heartbeat's time
    private var attemptStarted: TimeInterval?      // when the connections now opening were started
    private(set) var roundTrips = DurationHistogram()
    private(set) var forwarded = ServerMetrics.Tally()

    /// Most commands kept while Redis is away; beyond them the node's membership is rebuilt when it is back.
    static let maximumWaiting = 100_000

    init(configuration: RedisBrokerConfiguration, clock: @escaping () -> TimeInterval, log: @escaping (String) -> Void) {
        self.configuration = configuration
        self.clock = clock
        self.log = log
    }

    var problem: String? {
        if case .down(let reason) = state { return reason }
        return nil
    }

    private var endpoint: String { "\(configuration.host):\(configuration.port)" }
    private var ttlMilliseconds: String { String(Int(configuration.timeToLive * 1000)) }

    func start(deliver: @escaping (RoomBrokerEvent) -> Void) throws {
        // Before listening, once and blocking (a second at most): Redis answers, and no live node
        // has this name. Afterwards everything goes through the loop.
        let reply: RedisReply
        do {
            reply = try RedisOnce.command(host: configuration.host, port: configuration.port, timeout: 2,
                                          ["EVAL", Self.register, "0", configuration.node, ttlMilliseconds, "1"])
        } catch {
            throw VeilError.io("\(error): start redis-server there, or give its address with --redis HOST:PORT")
        }
        if case .error(let message) = reply {
            throw VeilError.io("Redis at \(endpoint) refused node \(configuration.node): \(message.replacingOccurrences(of: "ERR ", with: ""))")
        }
        self.deliver = deliver
        connect()
        let interval = UInt32(max(0.05, configuration.heartbeat) * 1000)
        timer = GLibSource(milliseconds: interval) { [weak self] in
            self?.beat()
            return true
        }
    }

    func stop() {
        state = .stopped
        timer?.cancel(); timer = nil
        reconnectTimer?.cancel(); reconnectTimer = nil
        commands?.close(); commands = nil
        subscriber?.close(); subscriber = nil
        deliver = nil
        waiting.removeAll()
    }

    func perform(_ command: RoomBrokerCommand) {
        switch state {
        case .ready:
            send(command)
        case .connecting:
            wait(command)
        case .down(let reason):
            if case let .admit(room, user, connection, _) = command {
                // Admitting without the other nodes could split a room, or fill it past its size.
                deliver?(.refused(room: room, user: user, connection: connection, code: .serviceUnavailable,
                                  message: "this server cannot reach the service that shares its rooms (\(reason)); try again shortly"))
            } else if case .relay = command {
                // Offers and candidates are of the moment: clients negotiate again when they reconnect.
            } else {
                wait(command)
            }
        case .stopped:
            break
        }
    }

    private func wait(_ command: RoomBrokerCommand) {
        guard waiting.count < Self.maximumWaiting else {
            waiting.removeAll()
            deliver?(.membershipLost(reason: "this server lost the service that shares its rooms for too long"))
            return
        }
        waiting.append(command)
    }

    private func send(_ command: RoomBrokerCommand) {
        let node = configuration.node
        switch command {
        case let .admit(room, user, connection, limit):
            run(Self.admit, [room, user, node, String(limit), String(connection.rawValue)]) { [weak self] reply in
                // The answer comes on the channel; only a failure to run the script is answered here.
                switch reply {
                case .integer?: break
                default:
                    self?.deliver?(.refused(room: room, user: user, connection: connection, code: .serviceUnavailable,
                                            message: "the service that shares this server's rooms did not admit you: try again shortly"))
                }
            }
        case let .leave(room, user, reason):
            run(Self.leave, [room, user, node, reason.rawValue])
        case let .mute(room, user, muted):
            run(Self.mute, [room, user, node, muted ? "1" : "0"])
        case let .relay(room, to, target, message):
            guard let commands else { return }
            let text = BrokerMessage(t: "relay", room: room, to: to, msg: message).text
            forwarded.add(bytes: text.utf8.count)
            commands.command(["PUBLISH", "veil:node:\(target)", text]) { _ in }
        }
    }

    private func run(_ script: String, _ arguments: [String], reply: @escaping (RedisReply?) -> Void = { _ in }) {
        guard let commands else { return reply(nil) }
        commands.command(["EVAL", script, "0"] + arguments) { [weak self] answer in
            if case .error(let message)? = answer { self?.log("Redis: \(message)") }
            reply(answer)
        }
    }

    // MARK: Connections

    private func connect() {
        opened = 0
        heartbeatSent = nil
        attemptStarted = clock()
        do {
            commands = try RedisConnection(host: configuration.host, port: configuration.port,
                                           opened: { [weak self] in self?.connectionOpened() },
                                           closed: { [weak self] reason in self?.lose(reason) })
            subscriber = try RedisConnection(host: configuration.host, port: configuration.port,
                                             opened: { [weak self] in self?.connectionOpened() },
                                             closed: { [weak self] reason in self?.lose(reason) })
        } catch {
            lose("\(error)")
        }
    }

    private func connectionOpened() {
        opened += 1
        guard opened == 2, let subscriber else { return }
        subscriber.subscribe("veil:node:\(configuration.node)", subscribed: { [weak self] in
            self?.subscribedToChannel()
        }, message: { [weak self] text in
            self?.received(text)
        })
    }

    private func subscribedToChannel() {
        guard state != .stopped else { return }
        let wasDown = problem
        // Registered again (or still) before anything else goes out: a heartbeat that finds the
        // node gone means its participants were taken out of their rooms meanwhile.
        run(Self.register, [configuration.node, ttlMilliseconds, "0"]) { [weak self] reply in
            guard let self, self.state != .stopped, reply != nil else { return }
            if case .integer(1)? = reply {
                // Its seats are gone: what waited for the connection no longer applies, and everyone joins again.
                self.waiting.removeAll()
                self.deliver?(.membershipLost(reason: "this server was away from the service that shares its rooms"))
            }
            self.state = .ready
            self.attemptStarted = nil
            if let wasDown { self.log("Redis at \(self.endpoint) answers again (after: \(wasDown))") }
            let queued = self.waiting
            self.waiting.removeAll()
            queued.forEach(self.send)
            if wasDown != nil, case .integer(0)? = reply {
                // Its seats were kept, but Redis keeps no message for a node that is not listening:
                // the changes to its rooms meanwhile come as the rooms' state, after what waited.
                self.run(Self.state, [self.configuration.node])
            }
        }
    }

    private func lose(_ reason: String) {
        guard state != .stopped else { return }
        attemptStarted = nil
        if problem == nil { log("\(reason); joins are refused until it is back") }
        state = .down(reason)
        commands?.close(); commands = nil
        subscriber?.close(); subscriber = nil
        // Joins waiting for the connection are answered now.
        let admits = waiting.filter { if case .admit = $0 { return true }; return false }
        waiting.removeAll { if case .admit = $0 { return true }; return false }
        admits.forEach(perform)
        guard reconnectTimer == nil else { return }
        reconnectTimer = GLibSource(milliseconds: 1000) { [weak self] in
            guard let self else { return false }
            self.reconnectTimer = nil
            if case .down = self.state { self.connect() }
            return false
        }
    }

    private func received(_ text: String) {
        switch BrokerMessage.event(from: text, forNode: configuration.node) {
        case .success(let event): deliver?(event)
        case .failure(let error): log("\(error)")
        }
    }

    // MARK: Heartbeat

    /// Refreshes the registration and reaps dead nodes; a heartbeat unanswered for longer than half
    /// the time to live means Redis is unreachable (a cut network gives no error of its own).
    private func beat() {
        let now = clock()
        if state != .ready {
            // A Redis that accepts connections and answers nothing (stopped, a cut link that
            // still completes handshakes) must not leave joins waiting: give up and try again.
            if let started = attemptStarted, now - started > configuration.timeToLive / 2, state != .stopped {
                lose("Redis at \(endpoint) accepts connections but does not answer")
            }
            return
        }
        if let sent = heartbeatSent {
            if now - sent > configuration.timeToLive / 2 {
                lose("Redis at \(endpoint) has not answered for \(String(format: "%.1f", now - sent)) s")
            }
            return
        }
        heartbeatSent = now
        run(Self.register, [configuration.node, ttlMilliseconds, "0"]) { [weak self] reply in
            guard let self, self.state == .ready, let reply else { return }
            self.heartbeatSent = nil
            self.roundTrips.record(self.clock() - now)
            if case .integer(1) = reply {
                self.deliver?(.membershipLost(reason: "this server was taken for dead by the service that shares its rooms"))
            }
        }
        run(Self.reap, []) { [weak self] reply in
            guard let self, case .array(let dead)? = reply else { return }
            for case .string(let node) in dead { self.log("node \(node) stopped answering; its participants left their rooms") }
        }
    }
}
