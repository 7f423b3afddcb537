import Foundation
import VeilConsole

extension BenchReport {
    /// Several `veil serve` nodes behind haproxy, sharing rooms through Redis, under N simulated
    /// clients (`ClusterLoadBenchmark`). Times in milliseconds unless named otherwise.
    struct ClusterLoad: Codable {
        var nodes: Int
        var clients: Int
        var roomSize: Int
        var rooms: Int
        var maximumInFlight: Int
        var holdSeconds: Double
        var offersPerSecond: Double
        /// RLIMIT_NOFILE of the benchmark process after raising it (every child inherits it).
        var openFiles: OpenFileLimit.Outcome
        /// `Max open files` of a node and of haproxy, from /proc/PID/limits.
        var nodeOpenFiles: String?
        var balancerOpenFiles: String?
        /// Why the part did not run (redis-server or haproxy missing), if it did not.
        var notRun: String?
        /// Why the run is incomplete, if it is.
        var error: String?

        var joined = 0
        /// Joins that did not end in `joined`: refused (by error code), timed out, connection failed or closed.
        var failures = 0
        var failureKinds: [String: Int] = [:]
        /// `error` messages to clients already joined during the ramp (then closed), by kind.
        var errorsAfterJoining: [String: Int] = [:]
        /// First WebSocket opened → last `joined`, seconds.
        var rampSeconds = 0.0
        var joinsPerSecond = 0.0
        /// Opening the WebSocket through haproxy (TCP + HTTP upgrade).
        var connectMilliseconds = Stats([])
        /// `join` sent → `joined` received (the node asks Redis to admit).
        var joinMilliseconds = Stats([])
        /// `participantJoined` notices the others should get (one per pair in each room) and did get, and their delay.
        var participantJoinedExpected = 0
        var participantJoinedReceived = 0
        var participantJoinedMilliseconds = Stats([])
        /// Rooms whose members were on 1, 2, 3, … nodes (index 0: one node).
        var roomsByNodes: [Int] = []
        /// Joined clients that no node's log named.
        var unplaced = 0
        var relay = Relay()
        /// The nodes, then haproxy, redis-server and the benchmark's own process (the clients).
        var processes: [ProcessFigures] = []
        var broker = Broker()
        /// First `leave` sent → last `participantLeft`, seconds; notices got, of at most one per pair.
        var leaveSeconds = 0.0
        var participantLeftExpected = 0
        var participantLeftReceived = 0
        var participantLeftMilliseconds = Stats([])
        /// Connections closed while their client was joined or leaving.
        var unexpectedCloses = 0
        var wallSeconds = 0.0

        /// Offers and answers between members of a room, timed from `send` to arrival.
        struct Relay: Codable {
            /// Pairs in all the rooms (one offer each), of which the phase had time for `offersSent`.
            var pairs = 0
            var offersSent = 0
            var answersSent = 0
            var delivered = 0
            /// Pairs not tried because one of the two was not joined.
            var skipped = 0
            /// `error` messages the clients got during the phase, by code.
            var errors: [String: Int] = [:]
            /// First offer → last arrival, seconds.
            var seconds = 0.0
            /// Sender and receiver on different nodes (through Redis), on the same node, or unknown.
            var crossNode = Stats([])
            var sameNode = Stats([])
            var crossNodeOffers = Stats([])
            var crossNodeAnswers = Stats([])
            var unplaced = 0

            init() {}

            /// The driver's samples, split by the nodes of their two ends (`nodeOfSeat`).
            init(_ result: LoadDriver.RelayResult, nodeOfSeat: [Int?], pairs: Int) {
                self.pairs = pairs
                offersSent = result.offersSent
                answersSent = result.answersSent
                delivered = result.samples.count
                skipped = result.skipped
                errors = result.errors
                seconds = BenchReport.rounded(result.seconds)
                var cross: [LoadDriver.RelaySample] = [], same: [Double] = []
                for sample in result.samples {
                    guard let from = nodeOfSeat[sample.from], let to = nodeOfSeat[sample.to] else { unplaced += 1; continue }
                    if from == to { same.append(sample.milliseconds) } else { cross.append(sample) }
                }
                crossNode = Stats(cross.map(\.milliseconds))
                sameNode = Stats(same)
                crossNodeOffers = Stats(cross.filter { !$0.isAnswer }.map(\.milliseconds))
                crossNodeAnswers = Stats(cross.filter(\.isAnswer).map(\.milliseconds))
            }
        }

        /// One process of the cluster.
        struct ProcessFigures: Codable {
            var name: String
            var pid: Int32
            /// A node's own participants and rooms on `/health`, with everyone joined.
            var participants: Int?
            var rooms: Int?
            /// VmRSS before the clients, with everyone joined, and after they all left and closed.
            var rssIdleKiB = 0
            var rssAtPeakKiB = 0
            var rssAfterKiB = 0
            /// A node's (RSS with everyone joined − before) / its participants.
            var kibPerParticipant: Double?
            /// CPU seconds (user + system) from before the ramp to after the leave.
            var cpuSeconds = 0.0
            var openFilesAtPeak: Int?
            var openFilesAfter: Int?
            var healthAfter: String?
            /// A node's log lines by kind (join, leave, drop, close, refuse, …).
            var log: [String: Int]?
            /// How it ended on SIGTERM, and whether its process id was gone afterwards.
            var exit: String?
            var goneAfterwards: Bool?

            init(name: String, pid: Int32) {
                self.name = name
                self.pid = pid
            }
        }

        /// What Redis did: per phase, and per command over the whole run.
        struct Broker: Codable {
            var phases: [BrokerPhase] = []
            var commands: [BrokerCommand] = []
            var usedMemoryAtPeakBytes: Int?
            var connectedClients: Int?
        }

        /// Redis over one phase (from the end of the one before).
        struct BrokerPhase: Codable {
            var name: String
            var seconds: Double
            /// `total_commands_processed`, which counts the commands scripts run.
            var commands: Int
            var commandsPerSecond: Double
            var cpuSeconds: Double
            /// `PUBLISH` calls (from the scripts): each carries a change or a relayed message to one node.
            var publishCalls: Int
            /// `used_memory_rss` at the end of the phase.
            var residentKiB: Int
        }

        /// One command's calls over the run.
        struct BrokerCommand: Codable {
            var name: String
            var calls: Int
            var microsecondsPerCall: Double
        }

        /// The Markdown section of the report.
        var markdown: [String] {
            func f0(_ v: Double) -> String { String(format: "%.0f", v) }
            func f1(_ v: Double) -> String { String(format: "%.1f", v) }
            func mb(_ kib: Int) -> String { String(format: "%.1f", Double(kib) / 1024) }
            var lines = ["## Room service: \(nodes) nodes behind haproxy, rooms shared through Redis", ""]
            if let notRun {
                lines.append("Not run: \(notRun).")
                return lines
            }
            lines.append("redis-server, \(nodes) `veil serve --redis` nodes and haproxy with deploy/haproxy.cfg as it is (`balance leastconn`), "
                         + "all on 127.0.0.1; \(clients) WebSocket clients in the benchmark process (one GLib loop) connect to haproxy "
                         + "and join rooms of \(roomSize) in order, at most \(maximumInFlight) joins in flight, so that each room spreads "
                         + "over the nodes. After \(f1(holdSeconds)) s held, in every room each member sends every earlier member an "
                         + "offer (\(f0(offersPerSecond)) offers/s in all, for \(relay.offersSent + relay.skipped) of the rooms' \(relay.pairs) pairs, a \(ClusterLoadBenchmark.sessionDescription.utf8.count)-byte "
                         + "description), which answers at once; each is timed from `send` to its arrival. Then everyone leaves in one "
                         + "burst and closes. Which node a client was on comes from the nodes' own `join` log lines.")
            lines.append("")
            let failures = failures == 0 ? "0" : "**\(failures)** (" + failureKinds.sorted { $0.key < $1.key }
                .map { "\($0.key) \($0.value)" }.joined(separator: ", ") + ")"
            lines.append("| clients | joined | failures | joins/s | join p50 / **p95** ms | cross-node relay p50 / **p95** ms | same-node relay p50 / p95 ms |")
            lines.append("|--:|--:|--:|--:|--:|--:|--:|")
            lines.append("| \(clients) | \(joined) | \(failures) | \(f0(joinsPerSecond)) | \(f1(joinMilliseconds.p50)) / **\(f1(joinMilliseconds.p95))** | "
                         + "\(f1(relay.crossNode.p50)) / **\(f1(relay.crossNode.p95))** (\(relay.crossNode.count)) | "
                         + "\(f1(relay.sameNode.p50)) / \(f1(relay.sameNode.p95)) (\(relay.sameNode.count)) |")
            lines.append("")
            lines.append("| process | participants / rooms | RSS MB before / with everyone / after | **KiB per participant** | CPU s | descriptors with everyone / after | /health after | exit |")
            lines.append("|:--|--:|--:|--:|--:|--:|:--|:--|")
            for p in processes {
                let seats = p.participants.map { "\($0) / \(p.rooms ?? 0)" } ?? "-"
                let perParticipant = p.kibPerParticipant.map { "**\(f1($0))**" } ?? "-"
                let files = [p.openFilesAtPeak, p.openFilesAfter].map { $0.map(String.init) ?? "-" }.joined(separator: " / ")
                lines.append("| \(p.name) | \(seats) | \(mb(p.rssIdleKiB)) / \(mb(p.rssAtPeakKiB)) / \(mb(p.rssAfterKiB)) | \(perParticipant) | "
                             + "\(String(format: "%.2f", p.cpuSeconds)) | \(files) | \(p.healthAfter ?? "-") | \(p.exit ?? "-") |")
            }
            lines.append("")
            lines.append("Redis, phase by phase (commands include those its scripts run):")
            lines.append("")
            lines.append("| phase | s | commands | **commands/s** | CPU s | PUBLISH to a node | RSS MB at the end |")
            lines.append("|:--|--:|--:|--:|--:|--:|--:|")
            for phase in broker.phases {
                lines.append("| \(phase.name) | \(String(format: "%.2f", phase.seconds)) | \(phase.commands) | **\(f0(phase.commandsPerSecond))** | "
                             + "\(String(format: "%.2f", phase.cpuSeconds)) | \(phase.publishCalls) | \(mb(phase.residentKiB)) |")
            }
            if !broker.commands.isEmpty {
                lines.append("")
                lines.append("Commands over the whole run, most called first: " + broker.commands.prefix(10)
                    .map { "`\($0.name)` \($0.calls) (\(String(format: "%.1f", $0.microsecondsPerCall)) µs each)" }.joined(separator: ", ") + ".")
            }
            lines.append("")
            var notes: [String] = []
            let spread = roomsByNodes.enumerated().filter { $0.element > 0 }
                .map { "\($0.element) on \($0.offset + 1) node\($0.offset == 0 ? "" : "s")" }.joined(separator: ", ")
            if !spread.isEmpty { notes.append("Rooms: \(spread).") }
            notes.append("Relay: \(relay.offersSent) offers and \(relay.answersSent) answers sent, \(relay.delivered) arrived in "
                         + "\(String(format: "%.1f", relay.seconds)) s; cross-node offers p95 \(f1(relay.crossNodeOffers.p95)) ms, "
                         + "answers p95 \(f1(relay.crossNodeAnswers.p95)) ms"
                         + (relay.errors.isEmpty ? "" : "; errors " + relay.errors.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
                         + (relay.skipped > 0 ? "; \(relay.skipped) pairs skipped (not joined)" : "") + ".")
            notes.append("`participantJoined` \(participantJoinedReceived) / \(participantJoinedExpected), p95 \(f1(participantJoinedMilliseconds.p95)) ms; "
                         + "`participantLeft` \(participantLeftReceived) of at most \(participantLeftExpected), p95 \(f1(participantLeftMilliseconds.p95)) ms "
                         + "(leave burst \(String(format: "%.2f", leaveSeconds)) s: two members on different nodes who leave at the same moment "
                         + "may each be gone before the other's leave reaches them); connect through haproxy p95 \(f1(connectMilliseconds.p95)) ms.")
            if unplaced > 0 { notes.append("\(unplaced) joined clients were in no node's log.") }
            if !errorsAfterJoining.isEmpty {
                notes.append("**During the ramp, joined clients got " + errorsAfterJoining.sorted { $0.key < $1.key }
                    .map { "`\($0.key.dropFirst(LoadDriver.afterJoiningPrefix.count))` \($0.value)" }.joined(separator: ", ")
                    + "** (the node closes them: a `ping_timeout` means nothing reached it from the client for 4 s).")
            }
            if unexpectedCloses > 0 { notes.append("\(unexpectedCloses) joined connections were closed.") }
            if let usedMemoryAtPeakBytes = broker.usedMemoryAtPeakBytes { notes.append("Redis's dataset with everyone joined: \(mb(usedMemoryAtPeakBytes / 1024)) MB (`used_memory`).") }
            notes.append("Open-file limit \(openFiles.soft) (hard \(openFiles.hard))" + (openFiles.raisedFrom.map { ", raised from \($0)" } ?? "")
                         + (nodeOpenFiles.map { "; a node's: \($0)" } ?? "") + (balancerOpenFiles.map { "; haproxy's: \($0)" } ?? "") + ".")
            for p in processes {
                guard let log = p.log?.filter({ !["join", "leave", "listen"].contains($0.key) }), !log.isEmpty else { continue }
                notes.append("\(p.name) also logged " + log.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ") + ".")
            }
            if let error { notes.append("**Incomplete: \(error).**") }
            notes.append("Every process shares this machine's cores with the clients' loop, whose queueing the latencies include; "
                         + "\(f0(wallSeconds)) s for the whole part.")
            lines.append(notes.joined(separator: " "))
            return lines
        }
    }
}
