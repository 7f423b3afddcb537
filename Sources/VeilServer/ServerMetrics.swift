import Foundation
import VeilCore

/// What one node counts for `/metrics`, written in Prometheus' text exposition format (version
/// 0.0.4). The counters start at zero when the node starts; the gauges are read when scraped.
///
/// Nothing here names a room, a user, a token or an address: labels are error codes, leave
/// reasons and fixed words only, so the metrics are safe to hand to whoever runs the monitoring.
///
/// Loop-confined, like the `ServerCore` that owns it.
struct ServerMetrics {
    /// Joins admitted, `new` or `resumed` (a participant taking over their own seat).
    private(set) var joins: [String: Int] = ["new": 0, "resumed": 0]
    /// Joins refused, by error code.
    private(set) var refusals: [String: Int] = Dictionary(uniqueKeysWithValues: Self.refusalCodes.map { ($0.rawValue, 0) })
    /// Connections closed because they broke one of the server's limits, by error code.
    private(set) var cuts: [String: Int] = Dictionary(uniqueKeysWithValues: Self.limitCodes.map { ($0.rawValue, 0) })
    /// Connections closed for breaking the protocol (anything else the server closes one for), by error code.
    private(set) var violations: [String: Int] = [:]
    /// Participants who left their room, by reason (their own node's and the other nodes' alike:
    /// each node counts what its participants were told).
    private(set) var leaves: [String: Int] = Dictionary(uniqueKeysWithValues: LeaveReason.allCases.map { ($0.rawValue, 0) })
    /// WebSocket text messages received and bytes read from clients (frames and headers).
    private(set) var received = Tally()
    /// Messages sent to clients and their bytes (JSON text).
    private(set) var sent = Tally()
    /// Offers, answers and candidates handed to a participant of this node (those sent on to
    /// another node's the broker counts as it publishes them: `RoomBroker.forwarded`).
    private(set) var relayedToParticipants = Tally()

    /// A number of messages and their bytes.
    struct Tally: Equatable, Sendable {
        var messages = 0
        var bytes = 0
        mutating func add(bytes count: Int) { messages += 1; bytes += count }
    }

    /// The refusals every scrape shows, at zero until they happen.
    static let refusalCodes: [SignalingErrorCode] = [.roomFull, .tokenMissing, .tokenMalformed, .tokenForged, .tokenExpired,
                                                     .tokenWrongRoom, .tokenWrongUser, .serviceUnavailable]
    /// The codes of the server's limits (docs/protocol.md, "Limits"): a connection closed with one
    /// of them was cut by a limit rather than for a protocol mistake.
    static let limitCodes: [SignalingErrorCode] = [.rateLimited, .slowConsumer, .serverFull, .messageTooLarge, .joinTimeout, .pingTimeout]

    /// Counts one room event (every one: the log may hold some back, the metrics do not).
    mutating func record(_ activity: RoomActivity) {
        switch activity {
        case .joined(_, _, _, let resumed): joins[resumed ? "resumed" : "new", default: 0] += 1
        case .refused(_, _, let code): refusals[code.rawValue, default: 0] += 1
        case .left(_, _, let reason): leaves[reason.rawValue, default: 0] += 1
        case .kicked(_, _, let code):
            leaves[LeaveReason.kicked.rawValue, default: 0] += 1
            closed(code)
        case .closed(_, let code): closed(code)
        case .dropped: break
        }
    }

    private mutating func closed(_ code: SignalingErrorCode) {
        if Self.limitCodes.contains(code) { cuts[code.rawValue, default: 0] += 1 } else { violations[code.rawValue, default: 0] += 1 }
    }

    /// Counts a message read from a client (`bytes`: what its frame took on the wire).
    mutating func recordReceived(bytes: Int) { received.bytes += bytes }
    /// Counts a text message decoded from a client.
    mutating func recordReceivedMessage() { received.messages += 1 }

    /// Counts a message sent to a client of this node.
    mutating func recordSent(_ message: ServerMessage, bytes: Int) {
        sent.add(bytes: bytes)
        if Self.isRelayed(message) { relayedToParticipants.add(bytes: bytes) }
    }

    private static func isRelayed(_ message: ServerMessage) -> Bool {
        switch message {
        case .offer, .answer, .ice: true
        default: false
        }
    }

    /// What the node is like right now, besides its counters.
    struct Reading {
        var status: RoomServer.Status
        /// The node's name among those sharing rooms, when it shares them.
        var node: String?
        /// Whether the broker works (nil: no broker).
        var brokerUp: Bool?
        /// The broker's round trips so far (nil: no broker).
        var brokerRoundTrips: DurationHistogram?
        /// What the broker sent on to participants of other nodes (nil: no broker, so nothing).
        var forwarded: Tally?
        /// The process's resident memory and open descriptors (nil where /proc cannot be read).
        var residentBytes: Int?
        var openFiles: Int?

        /// The process's own figures from /proc (Linux).
        static func process() -> (residentBytes: Int?, openFiles: Int?) {
            var resident: Int?
            if let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8),
               let pages = statm.split(separator: " ").dropFirst().first.flatMap({ Int($0) }) {
                resident = pages * Int(sysconf(Int32(_SC_PAGESIZE)))
            }
            let files = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")).map(\.count)
            return (resident, files)
        }
    }

    /// The exposition: `# HELP`, `# TYPE` and samples for every metric, one family after another.
    func exposition(_ reading: Reading) -> String {
        var out = Exposition()
        let status = reading.status
        out.family("veil_participants", .gauge, "Participants connected to this node, in all rooms (held ones included)",
                   [([], status.participants)])
        out.family("veil_rooms", .gauge, "Rooms with at least one participant of this node", [([], status.rooms)])
        out.family("veil_connections", .gauge, "Open WebSocket connections, joined or not", [([], status.connections)])
        out.family("veil_connections_limit", .gauge, "The most WebSocket connections this node takes", [([], status.maximumConnections)])
        out.family("veil_sockets", .gauge, "Accepted TCP connections held: WebSockets and HTTP requests in progress", [([], status.sockets)])
        out.family("veil_uptime_seconds", .gauge, "Seconds since the node started", [([], status.uptimeSeconds)])
        out.family("veil_joins_total", .counter, "Joins admitted: new, or resumed (a participant taking over their own seat)",
                   Self.labelled("kind", joins))
        out.family("veil_join_refusals_total", .counter, "Joins refused, by error code", Self.labelled("reason", refusals))
        out.family("veil_leaves_total", .counter, "Participants who left a room of this node's participants, by reason",
                   Self.labelled("reason", leaves))
        out.family("veil_connections_cut_total", .counter,
                   "Connections closed because they broke a limit of the server (docs/protocol.md, Limits), by error code",
                   Self.labelled("limit", cuts))
        out.family("veil_protocol_errors_total", .counter, "Connections closed for breaking the signaling protocol, by error code",
                   Self.labelled("code", violations))
        out.family("veil_messages_received_total", .counter, "Text messages received from clients", [([], received.messages)])
        out.family("veil_received_bytes_total", .counter, "Bytes read from clients' WebSockets", [([], received.bytes)])
        out.family("veil_messages_sent_total", .counter, "Messages sent to clients", [([], sent.messages)])
        out.family("veil_sent_bytes_total", .counter, "Bytes of the messages sent to clients (JSON text)", [([], sent.bytes)])
        let relayed = ["participant": relayedToParticipants, "node": reading.forwarded ?? Tally()]
        out.family("veil_relayed_messages_total", .counter,
                   "Offers, answers and candidates passed on: to a participant of this node, or to another node's",
                   Self.labelled("to", relayed.mapValues(\.messages)))
        out.family("veil_relayed_bytes_total", .counter,
                   "Bytes of the offers, answers and candidates passed on (JSON text; to another node with its room and addressee)",
                   Self.labelled("to", relayed.mapValues(\.bytes)))
        if let node = reading.node {
            out.family("veil_node_info", .gauge, "This node's name among the nodes sharing rooms", [([("node", node)], 1)])
        }
        if let up = reading.brokerUp {
            out.family("veil_broker_up", .gauge, "1 while the broker that shares rooms between nodes answers, else 0 (joins are refused)",
                       [([], up ? 1 : 0)])
        }
        if let trips = reading.brokerRoundTrips {
            out.histogram("veil_broker_round_trip_seconds", "Round trips of the node's heartbeat to the broker", trips)
        }
        if let resident = reading.residentBytes {
            out.family("process_resident_memory_bytes", .gauge, "Resident memory size in bytes", [([], resident)])
        }
        if let files = reading.openFiles {
            out.family("process_open_fds", .gauge, "Number of open file descriptors", [([], files)])
        }
        return out.text
    }

    private static func labelled(_ label: String, _ counts: [String: Int]) -> [([(String, String)], Int)] {
        counts.sorted { $0.key < $1.key }.map { ([(label, $0.key)], $0.value) }
    }
}

/// Durations in buckets, as a Prometheus histogram counts them (cumulative when written).
struct DurationHistogram: Equatable, Sendable {
    /// Upper bounds of the buckets, in seconds (+Inf is implied).
    static let bounds: [Double] = [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1]
    /// Observations at or below each bound (not cumulative), and above the last.
    private(set) var buckets = [Int](repeating: 0, count: bounds.count + 1)
    /// Sum of the observations, seconds.
    private(set) var sum = 0.0
    /// Number of observations.
    private(set) var count = 0

    mutating func record(_ seconds: Double) {
        guard seconds.isFinite, seconds >= 0 else { return }
        buckets[Self.bounds.firstIndex { seconds <= $0 } ?? Self.bounds.count] += 1
        sum += seconds
        count += 1
    }
}

/// Prometheus' text format, written family by family.
private struct Exposition {
    enum Kind: String { case gauge, counter, histogram }
    private(set) var text = ""

    mutating func family(_ name: String, _ kind: Kind, _ help: String, _ samples: [([(String, String)], Int)]) {
        header(name, kind, help)
        for (labels, value) in samples { sample(name, labels, String(value)) }
    }

    mutating func histogram(_ name: String, _ help: String, _ histogram: DurationHistogram) {
        header(name, .histogram, help)
        var cumulative = 0
        for (index, bound) in DurationHistogram.bounds.enumerated() {
            cumulative += histogram.buckets[index]
            sample(name + "_bucket", [("le", String(bound))], String(cumulative))
        }
        sample(name + "_bucket", [("le", "+Inf")], String(histogram.count))
        sample(name + "_sum", [], String(histogram.sum))
        sample(name + "_count", [], String(histogram.count))
    }

    private mutating func header(_ name: String, _ kind: Kind, _ help: String) {
        text += "# HELP \(name) \(help.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\n", with: "\\n"))\n"
        text += "# TYPE \(name) \(kind.rawValue)\n"
    }

    private mutating func sample(_ name: String, _ labels: [(String, String)], _ value: String) {
        text += name
        if !labels.isEmpty {
            let escaped = labels.map { key, value in
                let v = value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
                    .replacingOccurrences(of: "\n", with: "\\n")
                return "\(key)=\"\(v)\""
            }
            text += "{" + escaped.joined(separator: ",") + "}"
        }
        text += " \(value)\n"
    }
}
