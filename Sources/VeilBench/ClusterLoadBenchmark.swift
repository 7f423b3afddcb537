import Foundation
import VeilCore
import VeilConsole
#if canImport(Glibc)
import Glibc
#endif

/// The several-node part of `veil bench`'s server load: redis-server, three `veil serve` nodes
/// sharing rooms through it and haproxy in front of them (`LoadCluster`, deploy/haproxy.cfg as it
/// is), and N simulated clients in this process that all connect to haproxy's one address.
///
/// 1. **ramp**: the clients join rooms of `roomSize` (filled in join order, so that the balancer's
///    `leastconn` spreads each room over the nodes), as in `ServerLoadBenchmark`;
/// 2. **hold**: everyone stays for `holdSeconds`; each node's RSS, participants and rooms are read,
///    and which node each client landed on is read from the nodes' `join` log lines;
/// 3. **relay**: in every room each member sends every earlier member an offer (as a newcomer
///    does), `offersPerSecond` in all for at most `relaySeconds`, and each answers at once; every
///    offer and answer is timed from `send` to its arrival, and split by whether the two were on
///    different nodes;
/// 4. **leave** and **close**: every client leaves in one burst, then closes; every node must
///    report nobody left, then everything is stopped.
///
/// Redis's `INFO` is read between the phases: commands, CPU and memory per phase.
struct ClusterLoadBenchmark {
    var clients = 3000
    var nodes = 3
    var roomSize = 6
    var maximumInFlight = 64
    var holdSeconds = 1.0
    var joinTimeout = 5.0
    /// Offers started per second in the relay phase, all rooms together (answers come on top).
    var offersPerSecond = 200.0
    /// How long the relay phase sends offers at most: with many rooms, the first pair of every
    /// room goes first, then the second, and so on until the time is up.
    var relaySeconds = 15.0
    var leaveTimeout = 10.0
    /// The `veil` executable the nodes run (this one by default).
    var executable: URL?
    var quiet = false

    /// Longest the ramp may take: 15 s, or 20 ms per client beyond that.
    var rampTimeout: TimeInterval { max(15, Double(clients) * 0.02) }

    /// What a session description looks like on the wire: an offer's shape and size as webrtcbin
    /// makes it (Opus voice and the expression data channel), strict enough for the nodes' check.
    static let sessionDescription = [
        "v=0", "o=- 4611731400430051336 2 IN IP4 127.0.0.1", "s=-", "t=0 0", "a=group:BUNDLE audio0 application1",
        "a=msid-semantic: WMS", "a=ice-options:trickle",
        "m=audio 9 UDP/TLS/RTP/SAVPF 96", "c=IN IP4 0.0.0.0", "a=setup:actpass", "a=ice-ufrag:0Wz9m8JfHqVg3sSRYh2sUQ4kq0ivPm2x",
        "a=ice-pwd:1b6Vb0N5kIy+3bW7b0yUuH2qg9hP0s3Yl", "a=rtcp-mux", "a=rtcp-rsize", "a=sendrecv", "a=rtpmap:96 OPUS/48000/2",
        "a=rtcp-fb:96 transport-cc", "a=fmtp:96 minptime=10;useinbandfec=1",
        "a=extmap:1 http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01",
        "a=ssrc:2291386361 msid:user3840120442@host-7e8b0a6c webrtctransceiver0", "a=ssrc:2291386361 cname:user3840120442@host-7e8b0a6c",
        "a=mid:audio0",
        "a=fingerprint:sha-256 4B:1E:9A:0C:52:77:3D:E1:60:2F:18:AB:CD:98:41:5E:07:93:62:B5:F4:0D:2A:6E:8C:39:11:C7:58:E2:A4:90",
        "m=application 9 UDP/DTLS/SCTP webrtc-datachannel", "c=IN IP4 0.0.0.0", "a=setup:actpass",
        "a=ice-ufrag:0Wz9m8JfHqVg3sSRYh2sUQ4kq0ivPm2x", "a=ice-pwd:1b6Vb0N5kIy+3bW7b0yUuH2qg9hP0s3Yl", "a=bundle-only",
        "a=mid:application1", "a=sctp-port:5000",
        "a=fingerprint:sha-256 4B:1E:9A:0C:52:77:3D:E1:60:2F:18:AB:CD:98:41:5E:07:93:62:B5:F4:0D:2A:6E:8C:39:11:C7:58:E2:A4:90",
    ].joined(separator: "\r\n") + "\r\n"

    /// Runs the part; what fails is recorded in the report (`notRun` or `error`), never thrown.
    func run() -> BenchReport.ClusterLoad {
        let began = monotonicMilliseconds()
        let limit = OpenFileLimit.raiseToHard()
        var report = BenchReport.ClusterLoad(nodes: nodes, clients: clients, roomSize: roomSize,
                                             rooms: (clients + roomSize - 1) / roomSize, maximumInFlight: maximumInFlight,
                                             holdSeconds: holdSeconds, offersPerSecond: offersPerSecond, openFiles: limit)
        // This process holds one descriptor per client; haproxy two; the nodes share the clients.
        let needed = UInt64(2 * clients + 256)
        if limit.soft < needed {
            note("open-file limit \(limit.soft) (hard \(limit.hard)) is below the \(needed) haproxy needs for \(clients) clients; "
                 + "joins beyond that will fail")
        }
        let tools: LoadCluster.Tools
        switch LoadCluster.Tools.find() {
        case .success(let found): tools = found
        case .failure(let unavailable):
            report.notRun = unavailable.reason
            note("several nodes not run: \(unavailable.reason)")
            return report
        }
        let executable: URL
        do { executable = try self.executable ?? ServerLoadBenchmark.executableURL() } catch {
            report.notRun = "\(error)"
            return report
        }
        let secret = ServerSecret.random()
        let cluster: LoadCluster
        do {
            cluster = try LoadCluster.start(tools, executable: executable, nodes: nodes, roomSize: roomSize, secret: secret)
        } catch {
            report.error = "the cluster did not start (\(error))"
            return report
        }
        note("several nodes: redis-server on 127.0.0.1:\(cluster.redisPort), \(nodes) nodes, haproxy on \(cluster.webSocketURL); \(clients) clients")
        report.processes = cluster.nodes.enumerated().map { BenchReport.ClusterLoad.ProcessFigures(name: "node\($0.offset + 1)", pid: $0.element.pid) }
            + [BenchReport.ClusterLoad.ProcessFigures(name: "haproxy", pid: cluster.balancer.pid),
               BenchReport.ClusterLoad.ProcessFigures(name: "redis-server", pid: cluster.redis.pid),
               BenchReport.ClusterLoad.ProcessFigures(name: Self.clientsName, pid: getpid())]
        report.nodeOpenFiles = cluster.nodes.first?.openFileLimit()
        report.balancerOpenFiles = cluster.balancer.openFileLimit()
        measure(&report, cluster: cluster, secret: secret)
        for (index, node) in cluster.nodes.enumerated() { report.processes[index].log = node.logCounts() }
        let exits = cluster.stop()
        for index in report.processes.indices where report.processes[index].name != Self.clientsName {
            report.processes[index].exit = exits[report.processes[index].name]
            report.processes[index].goneAfterwards = kill(report.processes[index].pid, 0) != 0 && errno == ESRCH
        }
        report.wallSeconds = BenchReport.rounded((monotonicMilliseconds() - began) / 1000)
        return report
    }

    /// The row of this process, whose one GLib loop runs every client.
    static let clientsName = "clients (this process)"

    private func note(_ text: String) {
        if !quiet { Terminal.note("bench: \(text)") }
    }

    /// The phases, against a running cluster (which the caller stops).
    private func measure(_ report: inout BenchReport.ClusterLoad, cluster: LoadCluster, secret: ServerSecret) {
        // Every process, in the order of `report.processes`: the nodes, haproxy, Redis, this one.
        let resident: () -> [Int] = {
            (cluster.nodes.map { $0.residentKiB() } + [cluster.balancer.residentKiB(), cluster.redis.residentKiB(), ChildProcess.residentKiB(of: getpid())])
                .map { $0 ?? 0 }
        }
        let cpu: () -> [Double] = {
            (cluster.nodes.map { $0.cpuSeconds() } + [cluster.balancer.cpuSeconds(), cluster.redis.cpuSeconds(), ChildProcess.cpuSeconds(of: getpid())])
                .map { $0.reduce(0, +) }
        }
        var snapshots = BrokerSnapshots(port: cluster.redisPort)
        for (index, node) in cluster.nodes.enumerated() {
            do {
                let health = try node.health()
                guard health.status == "ok" else { report.error = "node\(index + 1)'s /health said \(health.status) before the ramp"; return }
            } catch {
                report.error = "node\(index + 1)'s /health failed before the ramp (\(error))"
                return
            }
        }
        for (index, kib) in resident().enumerated() { report.processes[index].rssIdleKiB = kib }
        let cpuBefore = cpu()
        snapshots.take("idle")

        let plan: [LoadDriver.Seat]
        do {
            let authority = TokenAuthority(secret: secret)
            plan = try (0..<report.clients).map { index -> LoadDriver.Seat in
                let room = "load-\(index / roomSize)", user = "u\(index)"
                return LoadDriver.Seat(room: room, user: user, token: try authority.issue(room: room, user: user, lifetime: 600))
            }
        } catch {
            report.error = "cannot issue the tokens (\(error))"
            return
        }
        let driver = LoadDriver(url: cluster.webSocketURL, seats: plan, maximumInFlight: maximumInFlight, joinTimeout: joinTimeout)
        defer { driver.shutDown() }

        // Ramp.
        let ramp = driver.ramp(timeout: rampTimeout)
        report.joined = ramp.joined
        // Errors to clients already joined (ping_timeout from a starved loop, say) are not failed joins.
        report.errorsAfterJoining = ramp.failures.filter { $0.key.hasPrefix(LoadDriver.afterJoiningPrefix) }
        report.failureKinds = ramp.failures.filter { !$0.key.hasPrefix(LoadDriver.afterJoiningPrefix) }
        report.failures = report.failureKinds.values.reduce(0, +)
        report.rampSeconds = BenchReport.rounded(ramp.seconds)
        report.joinsPerSecond = ramp.seconds > 0 ? BenchReport.rounded(Double(ramp.joined) / ramp.seconds) : 0
        report.connectMilliseconds = Stats(ramp.connectMilliseconds)
        report.joinMilliseconds = Stats(ramp.joinMilliseconds)
        if !ramp.finished { report.error = "the ramp did not finish within \(Int(rampTimeout)) s" }
        snapshots.take("ramp")
        note("several nodes: \(ramp.joined) of \(report.clients) joined, join p95 \(String(format: "%.1f", report.joinMilliseconds.p95)) ms, "
             + "\(report.failures) failed")

        // Hold, then read every process with everyone in.
        let hold = driver.hold(seconds: holdSeconds)
        report.participantJoinedExpected = hold.expected
        report.participantJoinedReceived = hold.received
        report.participantJoinedMilliseconds = Stats(hold.fanOutMilliseconds)
        snapshots.take("hold")
        for (index, kib) in resident().enumerated() { report.processes[index].rssAtPeakKiB = kib }
        for (index, node) in cluster.nodes.enumerated() {
            report.processes[index].openFilesAtPeak = node.openFileCount()
            do {
                let health = try node.health()
                report.processes[index].participants = health.participants
                report.processes[index].rooms = health.rooms
                if health.participants > 0 {
                    let grown = report.processes[index].rssAtPeakKiB - report.processes[index].rssIdleKiB
                    report.processes[index].kibPerParticipant = BenchReport.rounded(Double(grown) / Double(health.participants))
                }
            } catch {
                report.error = report.error ?? "node\(index + 1)'s /health failed with everyone joined (\(error))"
            }
        }
        report.processes[cluster.nodes.count].openFilesAtPeak = cluster.balancer.openFileCount()
        report.broker.usedMemoryAtPeakBytes = snapshots.last?.usedMemoryBytes
        report.broker.connectedClients = snapshots.last?.connectedClients

        // Where everyone landed, from the nodes' own `join` lines.
        var nodeOfSeat = [Int?](repeating: nil, count: plan.count)
        for (seat, entry) in plan.enumerated() {
            nodeOfSeat[seat] = cluster.nodes.firstIndex { $0.logged(join: entry.user, room: entry.room) }
        }
        let joinedSeats = Set(driver.joinedSeats())
        report.unplaced = joinedSeats.filter { nodeOfSeat[$0] == nil }.count
        var nodesOfRoom: [String: Set<Int>] = [:]
        for seat in joinedSeats { if let node = nodeOfSeat[seat] { nodesOfRoom[plan[seat].room, default: []].insert(node) } }
        report.roomsByNodes = (1...nodes).map { count in nodesOfRoom.values.filter { $0.count == count }.count }

        // Relay: in each room every member offers every earlier one; rooms interleaved, so the pace is even.
        var pairsByRoom: [[(from: Int, to: Int)]] = []
        for first in stride(from: 0, to: plan.count, by: roomSize) {
            let members = Array(first..<min(first + roomSize, plan.count))
            pairsByRoom.append(members.flatMap { later in members.filter { $0 < later }.map { (from: later, to: $0) } })
        }
        var pairs: [(from: Int, to: Int)] = []
        for round in 0..<(pairsByRoom.map(\.count).max() ?? 0) {
            for room in pairsByRoom where round < room.count { pairs.append(room[round]) }
        }
        report.relay.pairs = pairs.count
        pairs = Array(pairs.prefix(max(1, Int(offersPerSecond * relaySeconds))))
        let relayTimeout = Double(pairs.count) / offersPerSecond + 15
        note("several nodes: relaying \(pairs.count) offers and their answers at \(Int(offersPerSecond)) offers/s")
        let relay = driver.relay(pairs, offersPerSecond: offersPerSecond, sdp: Self.sessionDescription, timeout: relayTimeout)
        snapshots.take("relay")
        report.relay = BenchReport.ClusterLoad.Relay(relay, nodeOfSeat: nodeOfSeat, pairs: report.relay.pairs)
        if !relay.finished { report.error = report.error ?? "the relay did not finish within \(Int(relayTimeout)) s" }
        note("several nodes: cross-node relay p50 \(String(format: "%.1f", report.relay.crossNode.p50)) ms, "
             + "p95 \(String(format: "%.1f", report.relay.crossNode.p95)) ms over \(report.relay.crossNode.count) messages")

        // Leave in one burst, then close.
        let leave = driver.leaveAll(timeout: leaveTimeout, quietPeriod: 1)
        report.leaveSeconds = BenchReport.rounded(leave.seconds)
        report.participantLeftExpected = leave.expected
        report.participantLeftReceived = leave.received
        report.participantLeftMilliseconds = Stats(leave.fanOutMilliseconds)
        report.unexpectedCloses = leave.unexpectedCloses
        snapshots.take("leave")
        driver.closeAll()
        for (index, node) in cluster.nodes.enumerated() {
            report.processes[index].openFilesAfter = node.waitForOpenFiles(atMost: 32, timeout: 5)
        }
        for (index, node) in cluster.nodes.enumerated() {
            do {
                let health = try node.health()
                report.processes[index].healthAfter = "\(health.status): \(health.participants) participants in \(health.rooms) rooms"
                if health.participants != 0 || health.rooms != 0 {
                    report.error = report.error ?? "node\(index + 1) still has \(health.participants) participants in \(health.rooms) rooms after everyone left"
                }
            } catch {
                report.processes[index].healthAfter = "failed"
                report.error = report.error ?? "node\(index + 1)'s /health failed after everyone left (\(error))"
            }
        }
        for (index, kib) in resident().enumerated() { report.processes[index].rssAfterKiB = kib }
        for (index, pair) in zip(cpuBefore, cpu()).enumerated() { report.processes[index].cpuSeconds = BenchReport.rounded(pair.1 - pair.0) }
        report.broker.phases = snapshots.phases()
        report.broker.commands = snapshots.commands()
        if let problem = snapshots.problem { report.error = report.error ?? "Redis's INFO could not be read (\(problem))" }
        for (index, node) in cluster.nodes.enumerated() where !node.isRunning {
            report.error = report.error ?? "node\(index + 1) exited during the run"
        }
    }
}

/// Redis's `INFO` at the ends of the benchmark's phases, and what changed between them.
private struct BrokerSnapshots {
    let port: Int
    private var taken: [(name: String, time: Double, info: RedisInfo)] = []
    /// The first reason a read failed.
    private(set) var problem: String?

    init(port: Int) { self.port = port }

    var last: RedisInfo? { taken.last?.info }

    /// Reads `INFO` at the end of the phase `name` (the first snapshot: before any).
    mutating func take(_ name: String) {
        do { taken.append((name, monotonicMilliseconds(), try RedisInfo.read(port: port))) } catch {
            problem = problem ?? "\(error)"
        }
    }

    /// Each phase against the snapshot before it.
    func phases() -> [BenchReport.ClusterLoad.BrokerPhase] {
        zip(taken, taken.dropFirst()).map { before, after in
            let seconds = (after.time - before.time) / 1000
            // Less the benchmark's own INFO, counted in the later snapshot.
            let commands = max(0, after.info.totalCommands - before.info.totalCommands - 1)
            return BenchReport.ClusterLoad.BrokerPhase(
                name: after.name, seconds: BenchReport.rounded(seconds), commands: commands,
                commandsPerSecond: seconds > 0 ? BenchReport.rounded(Double(commands) / seconds) : 0,
                cpuSeconds: BenchReport.rounded(after.info.cpuSeconds - before.info.cpuSeconds),
                publishCalls: (after.info.commands["publish"]?.calls ?? 0) - (before.info.commands["publish"]?.calls ?? 0),
                residentKiB: after.info.residentBytes / 1024)
        }
    }

    /// Calls and time per command from the first snapshot to the last, most called first.
    func commands() -> [BenchReport.ClusterLoad.BrokerCommand] {
        guard let first = taken.first?.info, let last = taken.last?.info else { return [] }
        return last.commands.compactMap { name, now -> BenchReport.ClusterLoad.BrokerCommand? in
            let before = first.commands[name] ?? RedisInfo.Command(calls: 0, microseconds: 0)
            let calls = now.calls - before.calls - (name == "info" ? taken.count - 1 : 0)
            guard calls > 0 else { return nil }
            return BenchReport.ClusterLoad.BrokerCommand(name: name, calls: calls,
                                                         microsecondsPerCall: BenchReport.rounded(Double(now.microseconds - before.microseconds) / Double(calls)))
        }.sorted { ($0.calls, $1.name) > ($1.calls, $0.name) }
    }
}
