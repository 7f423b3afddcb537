import Foundation
import VeilConsole
import XCTest
@testable import VeilBench

/// The several-node part of `veil bench`'s server load, with real processes (redis-server, three
/// `veil serve` nodes, haproxy with deploy/haproxy.cfg) and a small number of clients; and the
/// pieces it reads Redis and reports with.
final class ClusterLoadTests: XCTestCase {
    /// The `veil` executable built next to the tests: the nodes run it.
    private func veil() throws -> URL {
        var directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = directory.appendingPathComponent("veil")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
            directory = directory.deletingLastPathComponent()
        }
        throw XCTSkip("the veil executable is not built next to the tests (swift build --build-tests builds it)")
    }

    /// Sixty clients in ten rooms of six through haproxy: everyone joins, every room but few sits on
    /// one node, every offer and answer arrives and some cross nodes, the nodes' own participant
    /// counts add up to everyone, Redis works in every phase, and nothing is left running.
    func testClientsSpreadOverThreeNodesReachEachOtherAndEverythingStops() throws {
        if case .failure(let unavailable) = LoadCluster.Tools.find() { throw XCTSkip(unavailable.reason) }
        var bench = ClusterLoadBenchmark()
        bench.clients = 60
        bench.offersPerSecond = 300
        bench.executable = try veil()
        bench.quiet = true
        let report = bench.run()
        print(report.markdown.joined(separator: "\n"))

        XCTAssertNil(report.notRun)
        XCTAssertNil(report.error)
        XCTAssertEqual(report.joined, 60)
        XCTAssertEqual(report.failures, 0, "\(report.failureKinds)")
        XCTAssertEqual(report.errorsAfterJoining, [:])
        XCTAssertEqual(report.participantJoinedReceived, report.participantJoinedExpected)
        XCTAssertEqual(report.participantJoinedExpected, 10 * 15, "one notice per pair in each room")

        let nodes = report.processes.filter { $0.name.hasPrefix("node") }
        XCTAssertEqual(report.processes.map(\.name), ["node1", "node2", "node3", "haproxy", "redis-server", ClusterLoadBenchmark.clientsName])
        XCTAssertEqual(nodes.compactMap(\.participants).reduce(0, +), 60, "each node's /health counts its own participants")
        XCTAssertTrue(nodes.allSatisfy { ($0.participants ?? 0) > 0 }, "leastconn gives every node some: \(nodes.map(\.participants))")
        XCTAssertTrue(nodes.allSatisfy { $0.kibPerParticipant != nil })
        XCTAssertEqual(report.unplaced, 0, "every joined client is in one node's log")
        XCTAssertEqual(report.roomsByNodes.reduce(0, +), 10)
        XCTAssertGreaterThan(report.roomsByNodes.dropFirst().reduce(0, +), 0, "rooms spread over the nodes: \(report.roomsByNodes)")

        // Each of the 15 pairs of a room: one offer and its answer.
        XCTAssertEqual(report.relay.pairs, 150)
        XCTAssertEqual(report.relay.offersSent, 150)
        XCTAssertEqual(report.relay.answersSent, 150)
        XCTAssertEqual(report.relay.delivered, 300)
        XCTAssertEqual(report.relay.errors, [:])
        XCTAssertEqual(report.relay.crossNode.count + report.relay.sameNode.count, 300)
        XCTAssertGreaterThan(report.relay.crossNode.count, 0)
        XCTAssertGreaterThan(report.relay.crossNodeOffers.count, 0)
        XCTAssertGreaterThan(report.relay.crossNodeAnswers.count, 0)
        XCTAssertGreaterThan(report.relay.crossNode.p50, 0)

        // Two members on different nodes leaving at once may each miss the other's leave: at most one notice per pair.
        XCTAssertLessThanOrEqual(report.participantLeftReceived, report.participantLeftExpected)
        XCTAssertEqual(report.unexpectedCloses, 0)
        for node in nodes { XCTAssertEqual(node.healthAfter, "ok: 0 participants in 0 rooms", node.name) }

        XCTAssertEqual(report.broker.phases.map(\.name), ["ramp", "hold", "relay", "leave"])
        for phase in report.broker.phases {
            XCTAssertGreaterThan(phase.commands, 0, phase.name)
            XCTAssertGreaterThan(phase.residentKiB, 0, phase.name)
        }
        XCTAssertGreaterThan(report.broker.phases[2].publishCalls, 0, "cross-node offers go through Redis's pub/sub")
        XCTAssertFalse(report.broker.commands.isEmpty)

        for process in report.processes.dropLast() {
            XCTAssertEqual(process.goneAfterwards, true, "\(process.name) (pid \(process.pid)) still runs")
            XCTAssertEqual(process.exit, "clean", process.name)
        }
    }

    func testAPartThatCouldNotRunSaysWhy() {
        var report = BenchReport.ClusterLoad(nodes: 3, clients: 300, roomSize: 6, rooms: 50, maximumInFlight: 64, holdSeconds: 1,
                                             offersPerSecond: 1000, openFiles: OpenFileLimit.raiseToHard())
        report.notRun = "haproxy is not installed (scripts/bootstrap installs Debian's haproxy)"
        XCTAssertEqual(report.markdown, ["## Room service: 3 nodes behind haproxy, rooms shared through Redis", "",
                                         "Not run: haproxy is not installed (scripts/bootstrap installs Debian's haproxy)."])
    }

    /// `INFO`'s text as Redis 7.0 writes it: fields, and command statistics by lower-case name.
    func testRedisInfoReadsFieldsAndCommandStatistics() {
        let text = """
        # Server\r
        redis_version:7.0.15\r
        \r
        # Stats\r
        total_commands_processed:1234\r
        \r
        # CPU\r
        used_cpu_sys:1.500000\r
        used_cpu_user:2.250000\r
        \r
        # Memory\r
        used_memory:1048576\r
        used_memory_rss:4194304\r
        \r
        # Commandstats\r
        cmdstat_evalsha:calls=200,usec=5000,usec_per_call=25.00,rejected_calls=0,failed_calls=0\r
        cmdstat_PUBLISH:calls=300,usec=900,usec_per_call=3.00,rejected_calls=0,failed_calls=0\r
        cmdstat_info:calls=3,usec=30,usec_per_call=10.00,rejected_calls=0,failed_calls=0\r

        """
        let info = RedisInfo(parsing: text)
        XCTAssertEqual(info.fields["redis_version"], "7.0.15")
        XCTAssertEqual(info.totalCommands, 1234)
        XCTAssertEqual(info.cpuSeconds, 3.75, accuracy: 1e-9)
        XCTAssertEqual(info.usedMemoryBytes, 1_048_576)
        XCTAssertEqual(info.residentBytes, 4_194_304)
        XCTAssertEqual(info.commands["evalsha"], RedisInfo.Command(calls: 200, microseconds: 5000))
        XCTAssertEqual(info.commands["publish"], RedisInfo.Command(calls: 300, microseconds: 900))
        XCTAssertEqual(info.commands.count, 3)
        XCTAssertEqual(RedisInfo(parsing: ""), RedisInfo(parsing: "# Server\n"))
    }
}
