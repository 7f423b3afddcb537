import Dispatch
import Foundation
import Synchronization
import VeilCall
import VeilCore
import VeilGLib
import VeilConsole
#if canImport(Glibc)
import Glibc
#endif

/// The server-load part of `veil bench`: a real `veil serve` child process (this executable) on a
/// free loopback port, and N simulated clients in this process joining and leaving its rooms.
///
/// Each round starts a fresh server, so that its memory before the clients is a clean baseline:
/// 1. **ramp**: N WebSocket clients connect and `join` (rooms of `roomSize`, filled in join order),
///    at most `maximumInFlight` between connecting and `joined` at a time, each given `joinTimeout`;
/// 2. **hold**: everyone stays (pinging every second, as real clients do) for `holdSeconds`; the
///    server's RSS is read at the end;
/// 3. **leave**: every client sends `leave` in one burst; the remaining members of each room must
///    each get one `participantLeft` per leaver;
/// 4. **close**: every client closes its WebSocket; the server must report no rooms and no
///    participants on `/health` and exit cleanly on SIGTERM.
///
/// Latencies are taken in this process on one GLib loop that also serves every client, so under
/// load they include the clients' own queueing; both processes share the machine's cores.
struct ServerLoadBenchmark {
    /// Clients per round, one round (and one fresh server) each.
    var clientCounts = [100, 500, 1000]
    /// Participants per room (the server's limit is 8): each join and leave fans out to the others.
    var roomSize = 6
    /// Clients between opening their WebSocket and receiving `joined` at any time.
    var maximumInFlight = 64
    /// How long everyone stays joined before the server's memory is read.
    var holdSeconds = 1.0
    /// Longest one client may take from opening its WebSocket to `joined`.
    var joinTimeout = 5.0
    /// Longest one round's ramp may take, all clients together.
    var rampTimeout = 15.0
    /// Longest the leave burst may take to fan out.
    var leaveTimeout = 5.0
    /// Rounds run again on the same server, after the measured one, to see whether its memory keeps growing.
    var repeats = 1
    var quiet = false
    /// Descriptors the server may keep beyond idle once the clients are gone: GLib starts a worker
    /// thread or two under load, each with a wake-up descriptor. Sockets left open would be N-fold.
    static let openFilesSlack = 2

    /// Runs every round; a round that fails records why and the next one still runs.
    func run() throws -> BenchReport.ServerLoad {
        let began = monotonicMilliseconds()
        let limit = OpenFileLimit.raiseToHard()
        let needed = UInt64((clientCounts.max() ?? 0) + 256)
        if limit.soft < needed && !quiet {
            Terminal.note("bench: open-file limit \(limit.soft) (hard \(limit.hard)) is below the \(needed) the largest round needs; "
                          + "its joins beyond that will fail")
        }
        let executable = try Self.executableURL()
        var report = BenchReport.ServerLoad(roomSize: roomSize, maximumInFlight: maximumInFlight, holdSeconds: holdSeconds,
                                            joinTimeoutSeconds: joinTimeout, openFiles: limit)
        for count in clientCounts {
            if !quiet { Terminal.note("bench: server load, \(count) clients") }
            let round = runRound(clients: count, executable: executable, report: &report)
            if !quiet {
                Terminal.note("bench: \(count) clients: \(round.joined) joined at \(String(format: "%.0f", round.joinsPerSecond)) joins/s, "
                              + "p95 \(String(format: "%.1f", round.joinMilliseconds.p95)) ms, \(round.failures) failed"
                              + (round.error.map { "; \($0)" } ?? ""))
            }
            report.rounds.append(round)
        }
        report.wallSeconds = BenchReport.rounded((monotonicMilliseconds() - began) / 1000)
        return report
    }

    /// One round against a fresh server; problems end up in the round's `error`, never thrown.
    private func runRound(clients count: Int, executable: URL, report: inout BenchReport.ServerLoad) -> BenchReport.ServerLoad.Round {
        var round = BenchReport.ServerLoad.Round(clients: count, rooms: (count + roomSize - 1) / roomSize)
        let began = monotonicMilliseconds()
        measure(&round, executable: executable, report: &report)
        round.wallSeconds = BenchReport.rounded((monotonicMilliseconds() - began) / 1000)
        return round
    }

    /// The phases of one round, filling in `round` as they go (the server is stopped before it returns).
    private func measure(_ round: inout BenchReport.ServerLoad.Round, executable: URL, report: inout BenchReport.ServerLoad) {
        let count = round.clients
        let secret = ServerSecret.random()
        let server: ServeProcess
        do {
            server = try ServeProcess.start(executable: executable, roomSize: roomSize, secret: secret)
        } catch {
            round.error = "the server did not start (\(error))"
            return
        }
        if report.serverOpenFiles == nil { report.serverOpenFiles = server.openFileLimit() }
        let plan: [LoadDriver.Seat]
        do {
            let authority = TokenAuthority(secret: secret)
            plan = try (0..<count).map { index -> LoadDriver.Seat in
                let room = "load-\(index / roomSize)", user = "u\(index)"
                return LoadDriver.Seat(room: room, user: user, token: try authority.issue(room: room, user: user, lifetime: 600))
            }
        } catch {
            round.error = "cannot issue the tokens (\(error))"
            server.stop()
            return
        }
        let driver = LoadDriver(url: server.webSocketURL, seats: plan, maximumInFlight: maximumInFlight, joinTimeout: joinTimeout)
        defer {
            driver.shutDown()
            round.serverExit = server.stop()
            round.serverLog = server.logCounts()
        }

        // Idle: the HTTP side has answered once, no WebSocket yet.
        do {
            let health = try server.health()
            round.serverThreadsIdle = server.threads()
            round.rssIdleKiB = server.residentKiB() ?? 0
            round.openFilesIdle = server.openFileCount()
            guard health.status == "ok" else { round.error = "/health said \(health.status) before the ramp"; return }
        } catch {
            round.error = "/health failed before the ramp (\(error))"
            return
        }
        let cpuBefore = server.cpuSeconds()

        // Ramp.
        let ramp = driver.ramp(timeout: rampTimeout)
        round.joined = ramp.joined
        round.failureKinds = ramp.failures
        round.failures = ramp.failures.values.reduce(0, +)
        round.rampSeconds = BenchReport.rounded(ramp.seconds)
        round.joinsPerSecond = ramp.seconds > 0 ? BenchReport.rounded(Double(ramp.joined) / ramp.seconds) : 0
        round.connectMilliseconds = Stats(ramp.connectMilliseconds)
        round.joinMilliseconds = Stats(ramp.joinMilliseconds)
        round.cpuSecondsRamp = zip(cpuBefore, server.cpuSeconds()).map { BenchReport.rounded($1 - $0) }
        if !ramp.finished { round.error = "the ramp did not finish within \(Int(rampTimeout)) s" }

        // Hold, then read the memory with everyone in.
        let hold = driver.hold(seconds: holdSeconds)
        round.participantJoinedExpected = hold.expected
        round.participantJoinedReceived = hold.received
        round.participantJoinedMilliseconds = Stats(hold.fanOutMilliseconds)
        round.rssAtPeakKiB = server.residentKiB() ?? 0
        round.serverThreadsAtPeak = server.threads()
        round.openFilesAtPeak = server.openFileCount()
        if round.joined > 0 {
            round.kibPerParticipant = BenchReport.rounded(Double(round.rssAtPeakKiB - round.rssIdleKiB) / Double(round.joined))
        }
        do {
            let health = try server.health()
            round.healthParticipantsAtPeak = health.participants
        } catch {
            round.error = round.error ?? "/health failed with everyone joined (\(error))"
        }

        // Leave in one burst, then close.
        let cpuBeforeLeave = server.cpuSeconds()
        let leave = driver.leaveAll(timeout: leaveTimeout)
        round.leaves = leave.leaves
        round.leaveSeconds = BenchReport.rounded(leave.seconds)
        round.participantLeftExpected = leave.expected
        round.participantLeftReceived = leave.received
        round.participantLeftMilliseconds = Stats(leave.fanOutMilliseconds)
        round.unexpectedCloses = leave.unexpectedCloses
        round.cpuSecondsLeave = zip(cpuBeforeLeave, server.cpuSeconds()).map { BenchReport.rounded($1 - $0) }
        driver.closeAll()
        round.openFilesAfter = server.waitForOpenFiles(atMost: round.openFilesIdle.map { $0 + Self.openFilesSlack }, timeout: 3)
        do {
            let health = try server.health()
            round.healthAfter = "\(health.status): \(health.participants) participants in \(health.rooms) rooms"
            if health.participants != 0 || health.rooms != 0 {
                round.error = round.error ?? "the server still has \(health.participants) participants in \(health.rooms) rooms after everyone left"
            }
        } catch {
            round.healthAfter = "failed"
            round.error = round.error ?? "/health failed after everyone left (\(error))"
        }
        round.rssAfterKiB = server.residentKiB() ?? 0

        // The same again on the same server, without the hold: memory that grows from one to the
        // next would be a leak rather than the allocator keeping pages.
        for _ in 0..<repeats where server.isRunning {
            let again = LoadDriver(url: server.webSocketURL, seats: plan, maximumInFlight: maximumInFlight, joinTimeout: joinTimeout)
            let ramp = again.ramp(timeout: rampTimeout)
            let leave = again.leaveAll(timeout: leaveTimeout)
            again.closeAll()
            _ = server.waitForOpenFiles(atMost: round.openFilesIdle.map { $0 + Self.openFilesSlack }, timeout: 3)
            again.shutDown()
            round.repeatFailures += ramp.failures.values.reduce(0, +) + (leave.expected - leave.received) + leave.unexpectedCloses
            round.rssAfterRepeatsKiB.append(server.residentKiB() ?? 0)
        }
        if !server.isRunning { round.error = round.error ?? "the server exited during the round" }
    }

    /// This executable, to start `veil serve` from: /proc/self/exe, else argv[0].
    static func executableURL() throws -> URL {
        if let path = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"),
           FileManager.default.isExecutableFile(atPath: path) {
            return URL(fileURLWithPath: path)
        }
        if let path = Bundle.main.executableURL?.path, FileManager.default.isExecutableFile(atPath: path) {
            return URL(fileURLWithPath: path)
        }
        throw VeilError.missingResource("cannot find this program's own executable to start `veil serve` from")
    }
}

// MARK: - The report

extension BenchReport {
    /// `veil serve` under N simulated clients (`ServerLoadBenchmark`).
    struct ServerLoad: Codable {
        var roomSize: Int
        var maximumInFlight: Int
        var holdSeconds: Double
        var joinTimeoutSeconds: Double
        /// RLIMIT_NOFILE of the benchmark process after raising it (the server inherits it).
        var openFiles: OpenFileLimit.Outcome
        /// The server's own `Max open files` from /proc/PID/limits.
        var serverOpenFiles: String?
        var rounds: [Round] = []
        var wallSeconds = 0.0

        /// One round: N clients against a fresh server. Times in milliseconds unless named otherwise.
        struct Round: Codable {
            var clients: Int
            var rooms: Int
            var joined = 0
            /// Joins that did not end in `joined`: refused (by error code), timed out, connection failed or closed.
            var failures = 0
            var failureKinds: [String: Int] = [:]
            /// First WebSocket opened → last `joined`, seconds.
            var rampSeconds = 0.0
            var joinsPerSecond = 0.0
            /// Opening the WebSocket (TCP + HTTP upgrade).
            var connectMilliseconds = Stats([])
            /// `join` sent → `joined` received (token check, room membership, fan-out to the others).
            var joinMilliseconds = Stats([])
            /// `participantJoined` notices the others should get (one per pair in each room) and did get.
            var participantJoinedExpected = 0
            var participantJoinedReceived = 0
            /// The newcomer's `join` sent → another member's `participantJoined`.
            var participantJoinedMilliseconds = Stats([])
            var healthParticipantsAtPeak: Int?
            /// The server's VmRSS: idle (before any WebSocket), with everyone joined, after everyone left.
            var rssIdleKiB = 0
            var rssAtPeakKiB = 0
            var rssAfterKiB = 0
            /// VmRSS after each repeat of the round on the same server (no hold).
            var rssAfterRepeatsKiB: [Int] = []
            /// Joins, `participantLeft` notices and connections lost in those repeats.
            var repeatFailures = 0
            /// The server's open file descriptors: idle, with everyone joined, after everyone closed.
            var openFilesIdle: Int?
            var openFilesAtPeak: Int?
            var openFilesAfter: Int?
            /// (RSS with everyone joined − idle) / joined.
            var kibPerParticipant = 0.0
            var serverThreadsIdle: Int?
            var serverThreadsAtPeak: Int?
            /// Server CPU seconds (user, system) during the ramp and during the leave burst.
            var cpuSecondsRamp: [Double] = []
            var cpuSecondsLeave: [Double] = []
            var leaves = 0
            /// First `leave` sent → last expected `participantLeft` received, seconds.
            var leaveSeconds = 0.0
            var participantLeftExpected = 0
            var participantLeftReceived = 0
            /// A member's `leave` sent → another member's `participantLeft` (all leaves sent in one burst).
            var participantLeftMilliseconds = Stats([])
            /// Connections the server closed while their client was joined or leaving.
            var unexpectedCloses = 0
            var healthAfter: String?
            /// How the server process ended on SIGTERM.
            var serverExit: String?
            /// The server's log lines by kind (join, leave, refuse, drop, close, ...).
            var serverLog: [String: Int] = [:]
            var wallSeconds = 0.0
            /// Why the round is incomplete, if it is.
            var error: String?
        }

        /// The Markdown section of the report.
        var markdown: [String] {
            func f0(_ v: Double) -> String { String(format: "%.0f", v) }
            func f1(_ v: Double) -> String { String(format: "%.1f", v) }
            func mb(_ kib: Int) -> String { String(format: "%.1f", Double(kib) / 1024) }
            var lines = ["## Room server under load", ""]
            lines.append("A real `veil serve` process on 127.0.0.1 (a fresh one per row), driven by N WebSocket clients in the "
                         + "benchmark process (one GLib loop): rooms of \(roomSize), at most \(maximumInFlight) joins in flight, "
                         + "\(f1(holdSeconds)) s held, then every client leaves in one burst and closes. Join latency is `join` sent "
                         + "→ `joined` received; memory is the server's VmRSS with everyone joined minus before the first WebSocket, "
                         + "per participant.")
            lines.append("")
            lines.append("| N | joins/s | join p50 ms | p95 ms | failures | server RSS MB idle / at N | KiB per participant |")
            lines.append("|--:|--:|--:|--:|--:|--:|--:|")
            for r in rounds {
                let failures = r.failures == 0 ? "0" : "**\(r.failures)** (" + r.failureKinds.sorted { $0.key < $1.key }
                    .map { "\($0.key) \($0.value)" }.joined(separator: ", ") + ")"
                lines.append("| \(r.clients) | **\(f0(r.joinsPerSecond))** | \(f1(r.joinMilliseconds.p50)) | **\(f1(r.joinMilliseconds.p95))** | "
                             + "\(failures) | \(mb(r.rssIdleKiB)) / \(mb(r.rssAtPeakKiB)) | **\(f1(r.kibPerParticipant))** |")
            }
            lines.append("")
            lines.append("| N | connect p50 / p95 ms | participantJoined got / expected, p95 ms | leave burst s | participantLeft got / expected, p95 ms "
                         + "| server CPU s ramp / leave | RSS MB after / after a repeat | descriptors idle / at N / after | /health after | exit |")
            lines.append("|--:|--:|--:|--:|--:|--:|--:|--:|:--|:--|")
            for r in rounds {
                let cpu = [r.cpuSecondsRamp, r.cpuSecondsLeave].map { $0.count == 2 ? String(format: "%.2f", $0[0] + $0[1]) : "?" }
                lines.append("| \(r.clients) | \(f1(r.connectMilliseconds.p50)) / \(f1(r.connectMilliseconds.p95)) | "
                             + "\(r.participantJoinedReceived) / \(r.participantJoinedExpected), \(f1(r.participantJoinedMilliseconds.p95)) | "
                             + "\(String(format: "%.2f", r.leaveSeconds)) | "
                             + "\(r.participantLeftReceived) / \(r.participantLeftExpected), \(f1(r.participantLeftMilliseconds.p95)) | "
                             + "\(cpu[0]) / \(cpu[1]) | \(mb(r.rssAfterKiB))\(r.rssAfterRepeatsKiB.map { " / " + mb($0) }.joined()) | "
                             + "\([r.openFilesIdle, r.openFilesAtPeak, r.openFilesAfter].map { $0.map(String.init) ?? "?" }.joined(separator: " / ")) | "
                             + "\(r.healthAfter ?? "-") | \(r.serverExit ?? "-") |")
            }
            lines.append("")
            var notes: [String] = []
            notes.append("Open-file limit \(openFiles.soft) (hard \(openFiles.hard))" + (openFiles.raisedFrom.map { ", raised from \($0)" } ?? "")
                         + (openFiles.problem.map { "; \($0)" } ?? "") + (serverOpenFiles.map { "; the server's: \($0)" } ?? "") + ".")
            for r in rounds {
                if let error = r.error { notes.append("**N = \(r.clients): \(error).**") }
                if r.unexpectedCloses > 0 { notes.append("N = \(r.clients): the server closed \(r.unexpectedCloses) joined connections.") }
                if r.repeatFailures > 0 { notes.append("N = \(r.clients): \(r.repeatFailures) joins or notices failed in the repeat.") }
            }
            notes.append("Latencies are measured in the benchmark process, whose one loop serves every client: under load they include "
                         + "its queueing, and both processes share the machine's cores. Memory after everyone left stays above idle "
                         + "as far as the allocator keeps freed pages; after a repeat of the same round on the same server it should "
                         + "not grow again (it would if connections leaked).")
            lines.append(notes.joined(separator: " "))
            return lines
        }
    }
}

// MARK: - The clients

/// N signaling clients on one GLib loop, driven through the phases of a round. Everything but
/// the public entry points runs on `loop`'s thread.
///
/// `@unchecked Sendable`: all mutable state is touched only on the loop's thread; the entry points
/// hop there with `GLibLoop.sync` and wait with a timeout on semaphores the loop signals.
final class LoadDriver: @unchecked Sendable {
    /// Who one client is: its room, user name and token.
    struct Seat: Sendable {
        var room: String
        var user: String
        var token: String
    }

    /// What the ramp did.
    struct RampResult {
        var finished: Bool
        var joined: Int
        var failures: [String: Int]
        var seconds: Double
        var connectMilliseconds: [Double]
        var joinMilliseconds: [Double]
    }

    /// What the hold saw: `participantJoined` fan-out.
    struct HoldResult {
        var expected: Int
        var received: Int
        var fanOutMilliseconds: [Double]
    }

    /// What the leave burst did.
    struct LeaveResult {
        var leaves: Int
        var seconds: Double
        var expected: Int
        var received: Int
        var fanOutMilliseconds: [Double]
        var unexpectedCloses: Int
    }

    /// One offer or answer of the relay phase, timed from `send` to its arrival at the other client.
    struct RelaySample {
        /// Seats (indices into `seats`) of the sender and the receiver.
        var from: Int
        var to: Int
        var isAnswer: Bool
        var milliseconds: Double
        /// When it arrived (monotonic milliseconds).
        var received: Double
    }

    /// What the relay phase did.
    struct RelayResult {
        var finished = false
        var offersSent = 0
        var answersSent = 0
        /// Pairs not tried: one of the two was not joined.
        var skipped = 0
        var samples: [RelaySample] = []
        /// `error` messages the clients got meanwhile, by code.
        var errors: [String: Int] = [:]
        /// First offer due → last arrival.
        var seconds = 0.0
    }

    /// The relay phase in progress (on the loop only): a class, so that its tables are changed in
    /// place rather than copied on each change.
    private final class Relay {
        var pairs: [(from: Int, to: Int)]
        var offersPerSecond: Double
        var sdp: String
        var started: Double
        var done: DispatchSemaphore
        var timer: GLibTimer?
        var next = 0
        var offersSent = 0
        var answersSent = 0
        var skipped = 0
        /// Send times of the offers and answers on their way, by `key(sender, receiver)`.
        var offers: [Int: Double] = [:]
        var answers: [Int: Double] = [:]
        var samples: [RelaySample] = []
        var errors: [String: Int] = [:]

        init(pairs: [(from: Int, to: Int)], offersPerSecond: Double, sdp: String, started: Double, done: DispatchSemaphore) {
            self.pairs = pairs
            self.offersPerSecond = offersPerSecond
            self.sdp = sdp
            self.started = started
            self.done = done
        }

        static func key(_ sender: Int, _ receiver: Int) -> Int { sender << 32 | receiver }

        func arrived(_ sample: RelaySample) {
            samples.append(sample)
            checkDone()
        }

        /// Signals `done` once every pair was tried and every offer and answer sent has arrived.
        func checkDone() {
            if next == pairs.count, offers.isEmpty, answers.isEmpty, samples.count == offersSent + answersSent { done.signal() }
        }
    }

    /// How the failures of the ramp name an `error` that came after `joined`, before its code.
    static let afterJoiningPrefix = "error after joining: "

    private enum Phase { case waiting, connecting, joining, joined, leaving, closed, failed }

    private struct Client {
        var phase = Phase.waiting
        var connection: SignalingConnection?
        var opened = 0.0
        var connected = 0.0
        var joinSent = 0.0
        var joined = 0.0
        var leaveSent = 0.0
    }

    private let loop = GLibLoop(name: "veil-bench-clients")
    private let url: URL
    private let seats: [Seat]
    private let seatOfUser: [String: Int]
    private let maximumInFlight: Int
    private let joinTimeoutMilliseconds: Double
    private var clients: [Client]
    private var nextToOpen = 0
    private var inFlight = 0
    private var settled = 0
    private var failures: [String: Int] = [:]
    private var joinedFanOut: [Double] = []
    private var leftFanOut: [Double] = []
    private var leftExpected = Int.max
    private var lastLeftReceived = 0.0
    private var unexpectedCloses = 0
    private var timer: GLibTimer?
    private var ticks = 0
    private var rampDone: DispatchSemaphore?
    private var leaveDone: DispatchSemaphore?
    private var relay: Relay?

    init(url: URL, seats: [Seat], maximumInFlight: Int, joinTimeout: TimeInterval) {
        self.url = url
        self.seats = seats
        var seatOfUser: [String: Int] = [:]
        for (index, seat) in seats.enumerated() { seatOfUser[seat.user] = index }
        self.seatOfUser = seatOfUser
        self.maximumInFlight = max(1, maximumInFlight)
        joinTimeoutMilliseconds = joinTimeout * 1000
        clients = Array(repeating: Client(), count: seats.count)
    }

    /// Opens every client, at most `maximumInFlight` at a time, and waits until each has joined or
    /// failed, or `timeout` passes (clients still in flight then count as timed out).
    func ramp(timeout: TimeInterval) -> RampResult {
        let done = DispatchSemaphore(value: 0)
        try? loop.sync { [self] in
            rampDone = done
            timer = loop.every(milliseconds: 100) { [weak self] in self?.tick() ?? false }
            if seats.isEmpty { done.signal() }
            openMore()
        }
        let finished = done.wait(timeout: .now() + timeout) == .success
        return (try? loop.sync { [self] in
            rampDone = nil
            if !finished {
                nextToOpen = clients.count // the rest never start
                for index in clients.indices where clients[index].phase == .connecting || clients[index].phase == .joining {
                    fail(index, "timeout")
                }
            }
            let joined = clients.filter { $0.joined > 0 }
            let first = clients.map(\.opened).filter { $0 > 0 }.min() ?? 0
            let last = joined.map(\.joined).max() ?? first
            let notStarted = clients.filter { $0.phase == .waiting }.count
            var failures = self.failures
            if notStarted > 0 { failures["not started", default: 0] += notStarted }
            return RampResult(finished: finished, joined: joined.count, failures: failures, seconds: (last - first) / 1000,
                              connectMilliseconds: clients.filter { $0.connected > 0 }.map { $0.connected - $0.opened },
                              joinMilliseconds: joined.map { $0.joined - $0.joinSent })
        }) ?? RampResult(finished: false, joined: 0, failures: [:], seconds: 0, connectMilliseconds: [], joinMilliseconds: [])
    }

    /// Keeps everyone joined (pinging) for `seconds`, then reports the `participantJoined` fan-out.
    func hold(seconds: TimeInterval) -> HoldResult {
        Thread.sleep(forTimeInterval: max(0, seconds))
        return (try? loop.sync { [self] in
            HoldResult(expected: pairsPerRoom(), received: joinedFanOut.count, fanOutMilliseconds: joinedFanOut)
        }) ?? HoldResult(expected: 0, received: 0, fanOutMilliseconds: [])
    }

    /// Every joined client sends `leave` at once; waits until every remaining member has been told
    /// about every leaver, or `timeout` passes.
    ///
    /// With `quietPeriod`, it stops waiting as soon as no notice has come for that long: members
    /// on different nodes who leave at the same moment may each be gone before the other's leave
    /// reaches them, so fewer notices than one per pair can be all there is.
    func leaveAll(timeout: TimeInterval, quietPeriod: TimeInterval? = nil) -> LeaveResult {
        let done = DispatchSemaphore(value: 0)
        let leaves = (try? loop.sync { [self] () -> Int in
            leftExpected = pairsPerRoom()
            leaveDone = done
            var leaves = 0
            for index in clients.indices where clients[index].phase == .joined {
                clients[index].phase = .leaving
                clients[index].leaveSent = monotonicMilliseconds()
                clients[index].connection?.send(SignalingMessage.encode(ClientMessage.leave))
                leaves += 1
            }
            if leftFanOut.count >= leftExpected { done.signal() }
            return leaves
        }) ?? 0
        if let quietPeriod {
            let deadline = DispatchTime.now() + timeout
            while done.wait(timeout: .now() + 0.1) == .timedOut, DispatchTime.now() < deadline {
                let quiet = (try? loop.sync { [self] in
                    monotonicMilliseconds() - max(lastLeftReceived, clients.map(\.leaveSent).max() ?? 0)
                }) ?? 0
                if quiet > quietPeriod * 1000 { break }
            }
        } else {
            _ = done.wait(timeout: .now() + timeout)
        }
        return (try? loop.sync { [self] in
            leaveDone = nil
            let first = clients.map(\.leaveSent).filter { $0 > 0 }.min() ?? 0
            return LeaveResult(leaves: leaves, seconds: lastLeftReceived > first ? (lastLeftReceived - first) / 1000 : 0,
                               expected: leftExpected, received: leftFanOut.count, fanOutMilliseconds: leftFanOut,
                               unexpectedCloses: unexpectedCloses)
        }) ?? LeaveResult(leaves: leaves, seconds: 0, expected: 0, received: 0, fanOutMilliseconds: [], unexpectedCloses: 0)
    }

    /// Every pair's first member sends the second an offer, paced at `offersPerSecond`; the second
    /// answers it as soon as it arrives, as a call's peers do. Waits until every offer and answer
    /// has arrived, or `timeout` passes. Pairs name seats (indices into `seats`); a pair whose
    /// sender is not joined is skipped.
    func relay(_ pairs: [(from: Int, to: Int)], offersPerSecond: Double, sdp: String, timeout: TimeInterval) -> RelayResult {
        let done = DispatchSemaphore(value: 0)
        try? loop.sync { [self] in
            relay = Relay(pairs: pairs, offersPerSecond: max(1, offersPerSecond), sdp: sdp, started: monotonicMilliseconds(), done: done)
            if pairs.isEmpty { done.signal() }
            relay?.timer = loop.every(milliseconds: 10) { [weak self] in self?.sendOffers() ?? false }
        }
        let finished = done.wait(timeout: .now() + timeout) == .success
        return (try? loop.sync { [self] () -> RelayResult in
            defer { relay?.timer?.cancel(); relay = nil }
            guard let relay else { return RelayResult() }
            let last = relay.samples.map(\.received).max() ?? relay.started
            return RelayResult(finished: finished, offersSent: relay.offersSent, answersSent: relay.answersSent,
                               skipped: relay.skipped, samples: relay.samples, errors: relay.errors,
                               seconds: (last - relay.started) / 1000)
        }) ?? RelayResult()
    }

    /// The seats (indices into `seats`) that are joined now.
    func joinedSeats() -> [Int] {
        (try? loop.sync { [self] in clients.indices.filter { clients[$0].phase == .joined } }) ?? []
    }

    /// Closes every client's WebSocket (close code 1000).
    func closeAll() {
        try? loop.sync { [self] in
            for index in clients.indices where clients[index].connection != nil {
                if clients[index].phase != .failed { clients[index].phase = .closed }
                clients[index].connection?.close()
            }
        }
    }

    /// Stops the timer, closes what is still open and lets go of every connection, on the loop.
    func shutDown() {
        try? loop.sync { [self] in
            timer?.cancel()
            timer = nil
            for index in clients.indices {
                clients[index].connection?.close()
                clients[index].connection = nil
            }
        }
    }

    // MARK: On the loop

    /// One `participantJoined` (and later `participantLeft`) per pair of members of a room.
    private func pairsPerRoom() -> Int {
        var members: [String: Int] = [:]
        for (index, client) in clients.enumerated() where client.joined > 0 && client.phase == .joined {
            members[seats[index].room, default: 0] += 1
        }
        return members.values.reduce(0) { $0 + $1 * ($1 - 1) / 2 }
    }

    private func openMore() {
        while inFlight < maximumInFlight, nextToOpen < clients.count {
            open(nextToOpen)
            nextToOpen += 1
        }
    }

    private func open(_ index: Int) {
        let connection = SignalingConnection(loop: loop, url: url)
        connection.onMessage = { [weak self] text in self?.received(text, by: index) }
        connection.onClose = { [weak self] closure in self?.closed(index, closure) }
        clients[index].connection = connection
        clients[index].phase = .connecting
        clients[index].opened = monotonicMilliseconds()
        inFlight += 1
        let seat = seats[index]
        connection.connect(timeoutSeconds: UInt32(max(1, joinTimeoutMilliseconds / 1000))) { [weak self] result in
            guard let self, self.clients[index].phase == .connecting else { return }
            switch result {
            case .success:
                let now = monotonicMilliseconds()
                self.clients[index].connected = now
                self.clients[index].phase = .joining
                self.clients[index].joinSent = now
                self.clients[index].connection?.send(SignalingMessage.encode(ClientMessage.join(room: seat.room, user: seat.user, token: seat.token)))
            case .failure:
                self.fail(index, "connect failed")
            }
        }
    }

    private func received(_ text: String, by index: Int) {
        let now = monotonicMilliseconds()
        guard let message = try? SignalingMessage.decode(ServerMessage.self, from: text) else {
            failures["undecodable message", default: 0] += 1
            return
        }
        switch message {
        case .joined:
            guard clients[index].phase == .joining else { return }
            clients[index].phase = .joined
            clients[index].joined = now
            settle()
        case .participantJoined(let user, _):
            if let other = seatOfUser[user], clients[other].joinSent > 0 { joinedFanOut.append(now - clients[other].joinSent) }
        case .offer(let user, _):
            guard let from = seatOfUser[user], let sent = relay?.offers.removeValue(forKey: Relay.key(from, index)) else { return }
            // The answer is on its way before the offer counts as arrived, so the phase cannot end between them.
            if let sdp = relay?.sdp, clients[index].phase == .joined {
                relay?.answers[Relay.key(index, from)] = monotonicMilliseconds()
                relay?.answersSent += 1
                clients[index].connection?.send(SignalingMessage.encode(ClientMessage.answer(to: user, sdp: sdp)))
            }
            relay?.arrived(RelaySample(from: from, to: index, isAnswer: false, milliseconds: now - sent, received: now))
        case .answer(let user, _):
            guard let from = seatOfUser[user], let sent = relay?.answers.removeValue(forKey: Relay.key(from, index)) else { return }
            relay?.arrived(RelaySample(from: from, to: index, isAnswer: true, milliseconds: now - sent, received: now))
        case .participantLeft(let user, _):
            guard let other = seatOfUser[user], clients[other].leaveSent > 0 else { return }
            leftFanOut.append(now - clients[other].leaveSent)
            lastLeftReceived = now
            if leftFanOut.count >= leftExpected { leaveDone?.signal() }
        case .error(let code, _):
            if relay != nil { relay?.errors[code.rawValue, default: 0] += 1 }
            if clients[index].phase == .connecting || clients[index].phase == .joining {
                fail(index, "refused: \(code)")
            } else {
                failures[Self.afterJoiningPrefix + code.rawValue, default: 0] += 1
            }
        default:
            break
        }
    }

    private func closed(_ index: Int, _ closure: SignalingConnection.Closure) {
        switch clients[index].phase {
        case .connecting, .joining: fail(index, "closed before joined")
        case .joined, .leaving: unexpectedCloses += 1; clients[index].phase = .failed
        case .waiting, .closed, .failed: break
        }
    }

    /// Counts a failed join (once) and lets the next client start.
    private func fail(_ index: Int, _ reason: String) {
        let phase = clients[index].phase
        guard phase == .connecting || phase == .joining else { return }
        clients[index].phase = .failed
        failures[reason, default: 0] += 1
        clients[index].connection?.close()
        settle()
    }

    private func settle() {
        inFlight -= 1
        settled += 1
        if settled == clients.count { rampDone?.signal() }
        openMore()
    }

    /// Offers due by now at the relay's pace, from the next pairs.
    private func sendOffers() -> Bool {
        guard let state = relay else { return false }
        let now = monotonicMilliseconds()
        let due = min(state.pairs.count, Int(((now - state.started) / 1000 * state.offersPerSecond).rounded(.up)))
        while state.next < due {
            let pair = state.pairs[state.next]
            state.next += 1
            guard clients.indices.contains(pair.from), clients.indices.contains(pair.to),
                  clients[pair.from].phase == .joined, clients[pair.to].phase == .joined else {
                state.skipped += 1
                continue
            }
            state.offers[Relay.key(pair.from, pair.to)] = monotonicMilliseconds()
            state.offersSent += 1
            clients[pair.from].connection?.send(SignalingMessage.encode(ClientMessage.offer(to: seats[pair.to].user, sdp: state.sdp)))
        }
        state.checkDone()
        return state.next < state.pairs.count
    }

    /// Every 100 ms: a tenth of the open clients ping (so each pings once a second, as the
    /// protocol asks), and joins past their deadline fail.
    private func tick() -> Bool {
        ticks += 1
        let now = monotonicMilliseconds()
        let ping = SignalingMessage.encode(ClientMessage.ping(t: nil))
        for index in clients.indices {
            switch clients[index].phase {
            case .connecting, .joining:
                if now - clients[index].opened > joinTimeoutMilliseconds { fail(index, "timeout") }
                else if clients[index].phase == .joining, index % 10 == ticks % 10 { clients[index].connection?.send(ping) }
            case .joined, .leaving:
                if index % 10 == ticks % 10 { clients[index].connection?.send(ping) }
            case .waiting, .closed, .failed:
                break
            }
        }
        return true
    }
}

// MARK: - The server process

/// `veil serve` as a child process on a free loopback port, with a fresh secret in its environment.
/// `stop()` (or `deinit`) ends it: SIGTERM, then SIGKILL if it has not exited within 5 s.
///
/// `@unchecked Sendable`: what the output threads see is guarded by `log`; the rest is set in `start`
/// and used from the benchmark's thread only.
final class ServeProcess: @unchecked Sendable {
    private let child: ChildProcess
    private let log: LogBox
    /// The server's WebSocket URL, from its `listen` log line.
    private(set) var webSocketURL = URL(fileURLWithPath: "/")
    private(set) var port = 0

    /// What the server's output said, filled in by the threads that drain its pipes.
    private final class LogBox: Sendable {
        struct State {
            var url: URL?
            var counts: [String: Int] = [:]
            /// `room user` of every `join` line.
            var joins: Set<String> = []
            var stderrTail = ""
        }
        let state = Mutex(State())
    }

    private init(child: ChildProcess, log: LogBox) {
        self.child = child
        self.log = log
    }

    /// Starts `executable serve --host 127.0.0.1 --port 0 --room-size N arguments` and waits (up
    /// to 10 s) for its `listen` line.
    static func start(executable: URL, roomSize: Int, secret: ServerSecret, arguments: [String] = [],
                      name: String = "serve") throws -> ServeProcess {
        let log = LogBox()
        let listening = DispatchSemaphore(value: 0)
        let child = try ChildProcess(
            name: name, executable: executable,
            arguments: ["serve", "--host", "127.0.0.1", "--port", "0", "--room-size", "\(roomSize)"] + arguments,
            environment: [ServerSecret.environmentVariable: secret.hexText],
            line: { stream, line in
                guard stream == .output else {
                    log.state.withLock { $0.stderrTail = String(($0.stderrTail + line + "\n").suffix(2000)) }
                    return
                }
                // `2025-01-01T12:00:00.000Z join room=r user=u participants=2`
                let words = line.split(separator: " ")
                guard words.count >= 2 else { return }
                let kind = String(words[1])
                log.state.withLock { state in
                    state.counts[kind, default: 0] += 1
                    if kind == "join", let room = words.first(where: { $0.hasPrefix("room=") })?.dropFirst(5),
                       let user = words.first(where: { $0.hasPrefix("user=") })?.dropFirst(5) {
                        state.joins.insert("\(room) \(user)")
                    }
                    if kind == "listen", let text = words.first(where: { $0.hasPrefix("url=") })?.dropFirst(4) {
                        state.url = URL(string: String(text))
                        listening.signal()
                    }
                }
            },
            ended: { listening.signal() }) // it exited before listening: stop waiting
        let server = ServeProcess(child: child, log: log)
        let ready = listening.wait(timeout: .now() + 10) == .success
        guard ready, let url = log.state.withLock({ $0.url }), let port = url.port else {
            let tail = log.state.withLock { $0.stderrTail }.trimmingCharacters(in: .whitespacesAndNewlines)
            _ = child.stop()
            throw VeilError.io("`veil serve` did not report a listening URL" + (ready ? "" : " within 10 s")
                               + (tail.isEmpty ? "" : ": \(tail)"))
        }
        server.webSocketURL = url
        server.port = port
        return server
    }

    var isRunning: Bool { child.isRunning }
    var pid: Int32 { child.pid }

    /// Ends the server (SIGTERM, then SIGKILL after 5 s) and says how it ended; safe to call again.
    @discardableResult
    func stop() -> String { child.stop() }

    /// The server's log lines so far, counted by kind.
    func logCounts() -> [String: Int] { log.state.withLock { $0.counts } }

    /// Whether the server's log says `user` joined `room` on it.
    func logged(join user: String, room: String) -> Bool { log.state.withLock { $0.joins.contains("\(room) \(user)") } }

    /// VmRSS in KiB.
    func residentKiB() -> Int? { child.residentKiB() }

    /// The number of threads.
    func threads() -> Int? { child.threads() }

    /// Its open file descriptors (sockets included).
    func openFileCount() -> Int? { child.openFileCount() }

    /// Waits until the server has at most `limit` descriptors open, or `timeout` passes; returns the last count.
    func waitForOpenFiles(atMost limit: Int?, timeout: TimeInterval) -> Int? {
        child.waitForOpenFiles(atMost: limit, timeout: timeout)
    }

    /// User and system CPU seconds so far (empty when /proc cannot say).
    func cpuSeconds() -> [Double] { child.cpuSeconds() }

    /// `Max open files` (soft hard) from /proc/PID/limits.
    func openFileLimit() -> String? { child.openFileLimit() }

    /// What `GET /health` answered.
    struct Health: Decodable {
        var participants: Int
        var rooms: Int
        var status: String
    }

    /// `GET /health` over a plain socket (HTTP/1.0, 3 s timeout).
    func health() throws -> Health {
        let body = try HTTPProbe.get(port: port, path: "/health")
        do { return try JSONDecoder().decode(Health.self, from: Data(body.utf8)) } catch {
            throw VeilError.io("/health answered something else than its JSON: \(body.prefix(200))")
        }
    }
}

/// A minimal HTTP/1.0 GET to 127.0.0.1 over a blocking socket, for the server's `/health`.
enum HTTPProbe {
    /// The body of a `200` answer.
    static func get(port: Int, path: String, timeoutSeconds: Int = 3) throws -> String {
        let connection = try LoopbackConnection(port: port, timeoutSeconds: timeoutSeconds)
        try connection.send("GET \(path) HTTP/1.0\r\nHost: 127.0.0.1:\(port)\r\n\r\n")
        var response: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while response.count < 1 << 20 {
            let count = connection.receive(into: &buffer)
            guard count >= 0 else { throw VeilError.io("no answer from 127.0.0.1:\(port)\(path) within \(timeoutSeconds) s") }
            if count == 0 { break }
            response.append(contentsOf: buffer[0..<count])
        }
        let text = String(decoding: response, as: UTF8.self)
        guard let split = text.range(of: "\r\n\r\n") else { throw VeilError.io("a malformed HTTP answer from \(path)") }
        let statusLine = text[..<split.lowerBound].split(separator: "\r\n").first ?? ""
        guard statusLine.split(separator: " ").dropFirst().first == "200" else {
            throw VeilError.io("\(path) answered \(statusLine)")
        }
        return String(text[split.upperBound...])
    }
}
