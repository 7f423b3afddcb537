import Foundation
import VeilCore
import VeilGLib
import VeilTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Several `veil serve` nodes sharing rooms through Redis, behind haproxy: real processes on
/// loopback (redis-server, the built `veil`, haproxy with deploy/haproxy.cfg), and real WebSocket
/// clients. Participants of one room on different nodes hear of each other, exchange offers,
/// answers, candidates and mute states, and see each other leave; the room size holds across
/// nodes; a node killed outright has its participants reported `left(timeout)` to the others.
final class SharedRoomsTests: XCTestCase {
    var cluster: ServiceCluster!
    var clientLoop: GLibLoop!

    override func setUpWithError() throws {
        clientLoop = GLibLoop(name: "test-clients")
    }

    override func tearDown() {
        cluster?.stop()
        cluster = nil
        clientLoop = nil
        super.tearDown()
    }

    /// A session description as Veil's clients send it: one audio section and a data channel.
    static let sdp = "v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\nc=IN IP4 0.0.0.0\r\n"
        + "a=rtpmap:111 OPUS/48000/2\r\nm=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\nc=IN IP4 0.0.0.0\r\n"

    func join(_ user: String, room: String, at url: URL, file: StaticString = #filePath, line: UInt = #line) throws -> (WebSocketTestClient, ServerMessage.Joined) {
        let client = try WebSocketTestClient.connect(to: url, name: user, loop: clientLoop)
        client.send(.join(room: room, user: user, token: try cluster.token(room: room, user: user)))
        let answer = client.next(timeout: 10) { if case .joined = $0 { true } else if case .error = $0 { true } else { false } }
        guard case .joined(let joined)? = answer else {
            XCTFail("\(user) did not join \(room) at \(url): \(String(describing: answer))", file: file, line: line)
            throw ServiceCluster.Failure(description: "no joined")
        }
        return (client, joined)
    }

    func testParticipantsOnDifferentNodesExchangeEverythingThroughTheBalancer() throws {
        cluster = try ServiceCluster(nodes: 3)
        let balancer = try XCTUnwrap(cluster.balancerURL)
        let (alice, aliceJoined) = try join("alice", room: "standup", at: balancer)
        XCTAssertEqual(aliceJoined.participants, [])
        let (bob, bobJoined) = try join("bob", room: "standup", at: balancer)
        let aliceNode = try XCTUnwrap(cluster.node(ofJoin: "alice", room: "standup"))
        let bobNode = try XCTUnwrap(cluster.node(ofJoin: "bob", room: "standup"))
        print("through haproxy: alice joined on \(aliceNode), bob on \(bobNode)")
        XCTAssertNotEqual(aliceNode, bobNode, "the balancer put both on one node: the test would not cross nodes")
        XCTAssertEqual(bobJoined.participants, [ParticipantInfo(user: "alice", muted: false)])
        XCTAssertEqual(alice.next(timeout: 5) { if case .participantJoined = $0 { true } else { false } },
                       .participantJoined(user: "bob", muted: false))

        let started = Date()
        bob.send(.offer(to: "alice", sdp: Self.sdp))
        XCTAssertEqual(alice.next(timeout: 5) { if case .offer = $0 { true } else { false } }, .offer(from: "bob", sdp: Self.sdp))
        print(String(format: "offer from node to node in %.1f ms", Date().timeIntervalSince(started) * 1000))
        alice.send(.answer(to: "bob", sdp: Self.sdp))
        XCTAssertEqual(bob.next(timeout: 5) { if case .answer = $0 { true } else { false } }, .answer(from: "alice", sdp: Self.sdp))
        let candidate = "candidate:1 1 UDP 2122252543 192.168.1.2 50000 typ host"
        bob.send(.ice(to: "alice", mline: 0, candidate: candidate))
        XCTAssertEqual(alice.next(timeout: 5) { if case .ice = $0 { true } else { false } }, .ice(from: "bob", mline: 0, candidate: candidate))
        alice.send(.ice(to: "bob", mline: 1, candidate: candidate))
        XCTAssertEqual(bob.next(timeout: 5) { if case .ice = $0 { true } else { false } }, .ice(from: "alice", mline: 1, candidate: candidate))
        alice.send(.mute(muted: true))
        XCTAssertEqual(bob.next(timeout: 5) { if case .muteChanged = $0 { true } else { false } }, .muteChanged(user: "alice", muted: true))
        // A relay to someone who is not in the room is refused by the sender's node, as on one node.
        alice.send(.offer(to: "carol", sdp: Self.sdp))
        XCTAssertEqual(alice.nextError(timeout: 5), .unknownPeer)
        // Video is refused before it leaves the sender's node.
        alice.send(.offer(to: "bob", sdp: Self.sdp + "m=video 9 UDP/TLS/RTP/SAVPF 96\r\n"))
        XCTAssertEqual(alice.nextError(timeout: 5), .videoNotAllowed)

        // A newcomer learns the muted state kept on the other node.
        let (carol, carolJoined) = try join("carol", room: "standup", at: balancer)
        XCTAssertEqual(Set(carolJoined.participants.map(\.user)), ["alice", "bob"])
        XCTAssertEqual(carolJoined.participants.first { $0.user == "alice" }?.muted, true)
        print("carol joined on \(cluster.node(ofJoin: "carol", room: "standup") ?? "?")")

        bob.send(.leave)
        XCTAssertEqual(alice.next(timeout: 5) { if case .participantLeft = $0 { true } else { false } }, .participantLeft(user: "bob", reason: .left))
        XCTAssertEqual(carol.next(timeout: 5) { if case .participantLeft = $0 { true } else { false } }, .participantLeft(user: "bob", reason: .left))
        XCTAssertEqual(alice.undecodableMessages + bob.undecodableMessages + carol.undecodableMessages, [])
    }

    func testTheRoomSizeHoldsAcrossNodes() throws {
        cluster = try ServiceCluster(nodes: 3, arguments: ["--room-size", "2"])
        let (alice, _) = try join("alice", room: "pair", at: cluster.nodeURLs[0])
        let (bob, _) = try join("bob", room: "pair", at: cluster.nodeURLs[1])
        // The third, on the third node, finds the room full.
        let carol = try WebSocketTestClient.connect(to: cluster.nodeURLs[2], name: "carol", loop: clientLoop)
        carol.send(.join(room: "pair", user: "carol", token: try cluster.token(room: "pair", user: "carol")))
        XCTAssertEqual(carol.nextError(timeout: 10), .roomFull)
        XCTAssertEqual(carol.waitClosed(timeout: 5), WebSocketCloseCode.roomFull.rawValue)
        // And through the balancer too.
        let dave = try WebSocketTestClient.connect(to: try XCTUnwrap(cluster.balancerURL), name: "dave", loop: clientLoop)
        dave.send(.join(room: "pair", user: "dave", token: try cluster.token(room: "pair", user: "dave")))
        XCTAssertEqual(dave.nextError(timeout: 10), .roomFull)
        // The same user again does not count twice: bob moves from the second node to the first.
        let (bobAgain, rejoined) = try join("bob", room: "pair", at: cluster.nodeURLs[0])
        XCTAssertTrue(rejoined.resumed)
        XCTAssertEqual(bob.nextError(timeout: 5), .replaced)
        XCTAssertNil(alice.next(timeout: 1) { if case .participantLeft = $0 { true } else { false } }, "a takeover is not a leave")
        // A seat freed on one node is free on the others.
        bobAgain.send(.leave)
        XCTAssertEqual(alice.next(timeout: 5) { if case .participantLeft = $0 { true } else { false } }, .participantLeft(user: "bob", reason: .left))
        let (_, carolJoined) = try join("carol", room: "pair", at: cluster.nodeURLs[2])
        XCTAssertEqual(carolJoined.participants, [ParticipantInfo(user: "alice", muted: false)])
    }

    func testANodeKilledOutrightHasItsParticipantsLeaveOnTheOthersWithinFiveSeconds() throws {
        cluster = try ServiceCluster(nodes: 3)
        let (alice, _) = try join("alice", room: "r", at: cluster.nodeURLs[0])
        let (bob, _) = try join("bob", room: "r", at: cluster.nodeURLs[1])
        let (carol, carolJoined) = try join("carol", room: "r", at: cluster.nodeURLs[2])
        XCTAssertNotNil(alice.next(timeout: 5) { $0 == .participantJoined(user: "bob", muted: false) })
        XCTAssertEqual(Set(carolJoined.participants.map(\.user)), ["alice", "bob"])
        let killed = Date()
        cluster.kill(node: 1)
        var delays: [Double] = []
        for client in [alice, carol] {
            let left = client.next(timeout: 15) { if case .participantLeft = $0 { true } else { false } }
            XCTAssertEqual(left, .participantLeft(user: "bob", reason: .timeout), client.name)
            delays.append(Date().timeIntervalSince(killed))
        }
        print(String(format: "SIGKILL of bob's node → left(timeout) at alice %.2f s, at carol %.2f s", delays[0], delays.count > 1 ? delays[1] : -1))
        XCTAssertLessThan(delays.max() ?? 99, 5, "a dead node's participants must leave within 5 s")
        // The survivors still talk across nodes.
        alice.send(.offer(to: "carol", sdp: Self.sdp))
        XCTAssertEqual(carol.next(timeout: 5) { if case .offer = $0 { true } else { false } }, .offer(from: "alice", sdp: Self.sdp))
        withExtendedLifetime(bob) {}
    }

    /// A client of a node killed outright reconnects through the balancer at once: its seat is still
    /// held (the dead node's registration has not run out), so it resumes on another node and the
    /// others see no one leave.
    func testAClientOfAKilledNodeResumesItsSeatThroughTheBalancer() throws {
        cluster = try ServiceCluster(nodes: 3)
        let balancer = try XCTUnwrap(cluster.balancerURL)
        let (alice, _) = try join("alice", room: "r", at: balancer)
        let (bob, _) = try join("bob", room: "r", at: balancer)
        XCTAssertNotNil(alice.next(timeout: 5) { $0 == .participantJoined(user: "bob", muted: false) })
        let dead = try XCTUnwrap(cluster.node(ofJoin: "bob", room: "r"))
        let killed = Date()
        cluster.kill(node: try XCTUnwrap(Int(dead.dropFirst("node".count))) - 1)
        XCTAssertNotNil(bob.waitClosed(timeout: 10), "the balancer cut bob's connection")
        let (bobAgain, resumed) = try join("bob", room: "r", at: balancer)
        print(String(format: "SIGKILL of %@: bob back in his room %.0f ms after it", dead, Date().timeIntervalSince(killed) * 1000))
        XCTAssertTrue(resumed.resumed)
        XCTAssertNotEqual(cluster.node(ofJoin: "bob", room: "r", after: dead), nil)
        XCTAssertNil(alice.next(timeout: 5) { if case .participantLeft = $0 { true } else { false } }, "bob's seat moved, he did not leave")
        alice.send(.ice(to: "bob", mline: 0, candidate: "candidate:1 1 UDP 1 10.0.0.1 9 typ host"))
        XCTAssertNotNil(bobAgain.next(timeout: 5) { if case .ice = $0 { true } else { false } })
    }

    /// Two real `veil call`s through the balancer: the node holding one's signaling is killed.
    /// That call reconnects through haproxy to another node and resumes its seat, and neither side
    /// loses the other: media is peer to peer, so voice and expressions keep arriving throughout.
    func testACallRidesOutTheKillOfItsSignalingNode() throws {
        try callRidesOut("SIGKILL") { self.cluster.kill(node: $0) }
    }

    /// The same through a rolling restart's step: the node is drained with SIGTERM.
    func testACallRidesOutTheDrainOfItsSignalingNode() throws {
        try callRidesOut("SIGTERM") { self.cluster.nodes[$0].process.terminate() }
    }

    private func callRidesOut(_ what: String, stopping stop: (Int) -> Void) throws {
        cluster = try ServiceCluster(nodes: 3)
        let balancer = try XCTUnwrap(cluster.balancerURL).absoluteString
        let veil = try TestProgram.veil
        func call(_ user: String) throws -> ChildProcess {
            try ChildProcess(name: user, executable: veil,
                             arguments: ["call", "--server", balancer, "--room", "r", "--user", user,
                                         "--token", try cluster.token(room: "r", user: user),
                                         "--audio-in", "tone", "--audio-out", "none", "--out", "none", "--duration", "40", "--json"],
                             directory: cluster.workspace.directory, environment: ["DISPLAY": nil, "PULSE_SERVER": nil])
        }
        func statistics(_ child: ChildProcess) -> [[String: Any]] { child.events.filter { $0["event"] as? String == "statistics" } }
        /// What `child` received from `peer` in each statistics round after the first `count` rounds.
        func flowing(_ child: ChildProcess, from peer: String, after count: Int = 0) -> [(fps: Double, audio: Double)] {
            statistics(child).dropFirst(count).compactMap { event in
                guard let entry = (event["peers"] as? [[String: Any]])?.first(where: { $0["user"] as? String == peer }) else { return nil }
                return ((entry["expressionFramesPerSecond"] as? Double) ?? 0, (entry["audioBitrateIn"] as? Double) ?? 0)
            }
        }
        let alice = try call("alice")
        XCTAssertTrue(alice.wait(timeout: 20) { $0.contains(#""event":"joined""#) }, alice.text)
        let bob = try call("bob")
        defer { alice.stop(); bob.stop() }
        // The call is up: expressions and voice arrive at both ends.
        let up = { (child: ChildProcess, peer: String) in
            child.wait(timeout: 30) { _ in flowing(child, from: peer).contains { $0.fps > 0 && $0.audio > 0 } }
        }
        XCTAssertTrue(up(alice, "bob"), alice.text)
        XCTAssertTrue(up(bob, "alice"), bob.text)
        let dead = try XCTUnwrap(cluster.node(ofJoin: "alice", room: "r"))
        let (aliceBefore, bobBefore) = (statistics(alice).count, statistics(bob).count)
        let killed = Date()
        stop(try XCTUnwrap(Int(dead.dropFirst("node".count))) - 1)
        XCTAssertTrue(alice.wait(timeout: 15) { $0.contains(#""resumed":true"#) }, "alice did not resume her seat: \(alice.text.suffix(2000))")
        print(String(format: "%@ to %@ (alice's signaling): alice resumed through %@ after %.2f s", what,
                     dead, cluster.node(ofJoin: "alice", room: "r", after: dead) ?? "?", Date().timeIntervalSince(killed)))
        // Eight more seconds of the call (four statistics rounds at each end).
        Thread.sleep(forTimeInterval: 8)
        let aliceAfter = flowing(alice, from: "bob", after: aliceBefore)
        let bobAfter = flowing(bob, from: "alice", after: bobBefore)
        let shown = { (rounds: [(fps: Double, audio: Double)]) in
            rounds.map { String(format: "%.1f frames/s %.1f kbit/s", $0.fps, $0.audio / 1000) }.joined(separator: ", ")
        }
        print("received after the \(what) (every 2 s): alice from bob \(shown(aliceAfter)); bob from alice \(shown(bobAfter))")
        XCTAssertGreaterThanOrEqual(aliceAfter.count, 3)
        XCTAssertGreaterThanOrEqual(bobAfter.count, 3)
        for (fps, audio) in aliceAfter + bobAfter {
            XCTAssertGreaterThan(fps, 0, "expressions stopped")
            XCTAssertGreaterThan(audio, 0, "voice stopped")
        }
        for child in [alice, bob] {
            let left = child.events.filter { $0["event"] as? String == "participantLeft" }
            XCTAssertEqual(left.count, 0, "\(child.name) saw someone leave: \(left)")
        }
    }

    /// A rolling restart's step: SIGTERM drains a node. It stops accepting, tells its clients to
    /// reconnect, and exits; a client that reconnects through the balancer lands on another node
    /// and resumes its seat, and the others in its room see no one leave.
    func testSIGTERMDrainsANodeAndItsParticipantsResumeOnAnother() throws {
        cluster = try ServiceCluster(nodes: 3)
        let balancer = try XCTUnwrap(cluster.balancerURL)
        let (alice, _) = try join("alice", room: "r", at: balancer)
        let (bob, _) = try join("bob", room: "r", at: balancer)
        XCTAssertNotNil(alice.next(timeout: 5) { $0 == .participantJoined(user: "bob", muted: false) })
        alice.send(.mute(muted: true))
        XCTAssertNotNil(bob.next(timeout: 5) { $0 == .muteChanged(user: "alice", muted: true) })
        let drained = try XCTUnwrap(cluster.node(ofJoin: "alice", room: "r"))
        let index = try XCTUnwrap(Int(drained.dropFirst("node".count))) - 1

        let stopped = Date()
        cluster.nodes[index].process.terminate()
        XCTAssertEqual(alice.nextError(timeout: 10), .serverShutdown)
        XCTAssertEqual(alice.waitClosed(timeout: 10), WebSocketCloseCode.goingAway.rawValue)
        // What a client does on its own: reconnect through the same address and join again.
        let (again, resumed) = try join("alice", room: "r", at: balancer)
        let moved = Date().timeIntervalSince(stopped)
        XCTAssertTrue(resumed.resumed, "alice's seat was kept for her")
        XCTAssertTrue(resumed.muted, "and her mute state with it")
        XCTAssertEqual(resumed.participants, [ParticipantInfo(user: "bob", muted: false)])
        let now = try XCTUnwrap(cluster.node(ofJoin: "alice", room: "r", after: drained))
        print(String(format: "SIGTERM to %@: alice back in her room on %@ %.0f ms after the signal", drained, now, moved * 1000))
        XCTAssertNotEqual(now, drained)
        cluster.nodes[index].process.waitUntilExit()
        XCTAssertEqual(cluster.nodes[index].process.terminationStatus, 0)
        XCTAssertTrue(cluster.nodes[index].text.contains("veil serve: stopping"))
        // Past the drained node's registration (3 s) and a reaper's round: bob never saw her leave.
        XCTAssertNil(bob.next(timeout: 5) { if case .participantLeft = $0 { true } else { false } }, "a drained node's participant left")
        bob.send(.offer(to: "alice", sdp: Self.sdp))
        XCTAssertEqual(again.next(timeout: 5) { if case .offer = $0 { true } else { false } }, .offer(from: "bob", sdp: Self.sdp))
    }

    /// Redis restarted (its data lost): the nodes reconnect, find their seats gone and ask their
    /// participants to join again, and the rooms are rebuilt as they do.
    func testARestartedRedisHasTheNodesRebuildTheRooms() throws {
        cluster = try ServiceCluster(nodes: 2, balancer: false)
        let (alice, _) = try join("alice", room: "r", at: cluster.nodeURLs[0])
        let (bob, _) = try join("bob", room: "r", at: cluster.nodeURLs[1])
        XCTAssertNotNil(alice.next(timeout: 5) { $0 == .participantJoined(user: "bob", muted: false) })
        try cluster.restartRedis()
        let restarted = Date()
        XCTAssertEqual(alice.nextError(timeout: 15), .serviceUnavailable)
        XCTAssertEqual(bob.nextError(timeout: 15), .serviceUnavailable)
        XCTAssertEqual(alice.waitClosed(timeout: 5), WebSocketCloseCode.serviceUnavailable.rawValue)
        print(String(format: "Redis restarted: participants asked to join again after %.2f s", Date().timeIntervalSince(restarted)))
        // What clients do by themselves: join again.
        let (aliceAgain, _) = try join("alice", room: "r", at: cluster.nodeURLs[0])
        let (bobAgain, bobJoined) = try join("bob", room: "r", at: cluster.nodeURLs[1])
        XCTAssertEqual(bobJoined.participants, [ParticipantInfo(user: "alice", muted: false)])
        XCTAssertNotNil(aliceAgain.next(timeout: 5) { $0 == .participantJoined(user: "bob", muted: false) })
        bobAgain.send(.offer(to: "alice", sdp: Self.sdp))
        XCTAssertEqual(aliceAgain.next(timeout: 5) { if case .offer = $0 { true } else { false } }, .offer(from: "bob", sdp: Self.sdp))
    }

    /// Redis that does not answer (stopped, as a cut network looks): a node admits nobody rather
    /// than split a room, and says so to the joiner and on /health; once Redis answers again, it admits.
    func testANodeCutFromRedisRefusesJoinsAndSaysSo() throws {
        cluster = try ServiceCluster(nodes: 2, balancer: false)
        let (alice, _) = try join("alice", room: "r", at: cluster.nodeURLs[0])
        XCTAssertEqual(try httpGet(cluster.healthURL(node: 1)).status, 200)
        cluster.signalRedis(SIGSTOP)
        let cut = Date()
        var health = (status: UInt32(0), body: "")
        while Date().timeIntervalSince(cut) < 20 {
            health = try httpGet(cluster.healthURL(node: 1))
            if health.status == 503 { break }
            Thread.sleep(forTimeInterval: 0.1)
        }
        print(String(format: "Redis stopped answering: /health says 503 after %.2f s: %@", Date().timeIntervalSince(cut), health.body))
        XCTAssertEqual(health.status, 503)
        XCTAssertTrue(health.body.contains(#""status":"unavailable""#), health.body)
        let carol = try WebSocketTestClient.connect(to: cluster.nodeURLs[1], name: "carol", loop: clientLoop)
        carol.send(.join(room: "r", user: "carol", token: try cluster.token(room: "r", user: "carol")))
        let refusal = carol.next(timeout: 10) { if case .error = $0 { true } else { false } }
        guard case let .error(code, message)? = refusal else { return XCTFail("no refusal: \(String(describing: refusal))") }
        XCTAssertEqual(code, .serviceUnavailable)
        XCTAssertTrue(message.contains("cannot reach"), message)
        XCTAssertEqual(carol.waitClosed(timeout: 5), WebSocketCloseCode.serviceUnavailable.rawValue)
        // The call already set up goes on meanwhile: alice's connection is not cut for it.
        XCTAssertNil(alice.waitClosed(timeout: 0.5))

        cluster.signalRedis(SIGCONT)
        let resumed = Date()
        while Date().timeIntervalSince(resumed) < 20, (try? httpGet(cluster.healthURL(node: 1)))?.status != 200 {
            Thread.sleep(forTimeInterval: 0.1)
        }
        XCTAssertEqual(try httpGet(cluster.healthURL(node: 1)).status, 200)
        print(String(format: "Redis answering again: node2 healthy after %.2f s", Date().timeIntervalSince(resumed)))
        let (_, daveJoined) = try join("dave", room: "r2", at: cluster.nodeURLs[1])
        XCTAssertEqual(daveJoined.participants, [])
    }

    /// A network partition between one node and Redis, the link reset: every connection of that
    /// node to Redis is closed with a reset and new ones are refused, while the other nodes reach
    /// Redis as before. See `partitionOneNode`.
    func testANodePartitionedFromRedisByResetsStopsAdmittingAndTheRoomStaysOne() throws {
        try partitionOneNode(.reset)
    }

    /// The same partition as a black hole: the node's connections to Redis stay open and carry
    /// nothing, and new ones are accepted and carry nothing (no error ever reaches the node).
    func testANodePartitionedFromRedisByABlackHoleStopsAdmittingAndTheRoomStaysOne() throws {
        try partitionOneNode(.blackHole)
    }

    /// node3 alone is cut from Redis (through `cluster.redisRelay`) while a room has participants on
    /// every node: the cut node says so on /health and refuses joins rather than admit anyone the
    /// others do not know of; the others take it for dead once its registration runs out and report
    /// its participants `left(timeout)`; its participant behind the balancer (cut by haproxy once
    /// /health fails) comes back through another node into the same room. When the link heals, the
    /// cut node registers again, asks its own stale participant to join again, and admits: one room.
    private func partitionOneNode(_ cut: TCPRelay.Mode) throws {
        cluster = try ServiceCluster(nodes: 3, relayedNode: 2)
        let relay = try XCTUnwrap(cluster.redisRelay)
        let balancer = try XCTUnwrap(cluster.balancerURL)
        // Three participants through the balancer land on the three nodes (leastconn); the one on node3 is cut off with it.
        let users = ["alice", "bob", "carol"]
        var clients: [String: WebSocketTestClient] = [:]
        for user in users { clients[user] = try join(user, room: "r", at: balancer).0 }
        let nodeOf = Dictionary(uniqueKeysWithValues: users.map { ($0, cluster.node(ofJoin: $0, room: "r")) })
        XCTAssertEqual(Set(nodeOf.values.compactMap { $0 }), ["node1", "node2", "node3"], "the balancer did not spread the room over every node")
        let cutUser = try XCTUnwrap(users.first { nodeOf[$0] == "node3" })
        let others = users.filter { $0 != cutUser }
        // And one participant connected to node3 directly, who stays there throughout.
        let (dave, _) = try join("dave", room: "r", at: cluster.nodeURLs[2])
        for user in others {
            XCTAssertNotNil(clients[user]?.next(timeout: 5) { $0 == .participantJoined(user: "dave", muted: false) }, user)
        }
        print("\(cut): \(cutUser) on node3 through the balancer, dave on node3 directly, \(others.joined(separator: " and ")) on node1 and node2")

        relay.set(cut)
        let cutAt = Date()
        func since(_ date: Date) -> String { String(format: "%.2f s", Date().timeIntervalSince(date)) }
        var health = (status: UInt32(0), body: "")
        while Date().timeIntervalSince(cutAt) < 20 {
            health = try httpGet(cluster.healthURL(node: 2))
            if health.status == 503 { break }
            Thread.sleep(forTimeInterval: 0.05)
        }
        print("\(cut): node3's /health says 503 after \(since(cutAt)): \(health.body)")
        XCTAssertEqual(health.status, 503)
        XCTAssertTrue(health.body.contains(#""status":"unavailable""#) && health.body.contains("Redis"), health.body)
        for index in 0..<2 { XCTAssertEqual(try httpGet(cluster.healthURL(node: index)).status, 200, "node\(index + 1) was not cut") }
        // Nobody gets into the room through the cut node: no second copy of it there.
        let erin = try WebSocketTestClient.connect(to: cluster.nodeURLs[2], name: "erin", loop: clientLoop)
        erin.send(.join(room: "r", user: "erin", token: try cluster.token(room: "r", user: "erin")))
        let refusal = erin.next(timeout: 10) { if case .error = $0 { true } else { false } }
        guard case let .error(code, message)? = refusal else { return XCTFail("no refusal: \(String(describing: refusal))") }
        XCTAssertEqual(code, .serviceUnavailable)
        XCTAssertTrue(message.contains("cannot reach"), message)
        XCTAssertEqual(erin.waitClosed(timeout: 5), WebSocketCloseCode.serviceUnavailable.rawValue)

        // haproxy takes node3 out (its /health fails) and cuts its connections; the client comes
        // back through the balancer at once, as clients do, until a node admits it.
        let cutClient = try XCTUnwrap(clients[cutUser])
        XCTAssertNotNil(cutClient.waitClosed(timeout: 15), "haproxy did not cut \(cutUser)'s connection to node3")
        print("\(cut): haproxy cut \(cutUser)'s connection \(since(cutAt)) after the cut")
        var back: (client: WebSocketTestClient, joined: ServerMessage.Joined)?
        var attempts = 0
        while back == nil, attempts < 20 {
            attempts += 1
            let client = try WebSocketTestClient.connect(to: balancer, name: cutUser, loop: clientLoop)
            client.send(.join(room: "r", user: cutUser, token: try cluster.token(room: "r", user: cutUser)))
            let answer = client.next(timeout: 10) { if case .joined = $0 { true } else if case .error = $0 { true } else { false } }
            if case .joined(let joined)? = answer { back = (client, joined) } else { Thread.sleep(forTimeInterval: 0.2) }
        }
        let (returned, rejoined) = try XCTUnwrap(back, "\(cutUser) found no node to take them back")
        let returnedTo = cluster.node(ofJoin: cutUser, room: "r", after: "node3")
        print("\(cut): \(cutUser) back in the room on \(returnedTo ?? "?") \(since(cutAt)) after the cut, attempt \(attempts), "
              + (rejoined.resumed ? "seat resumed" : "seat taken back already: joined afresh"))
        XCTAssertNotNil(returnedTo)
        XCTAssertTrue(Set(rejoined.participants.map(\.user)).isSuperset(of: others), "\(rejoined.participants)")

        // The other nodes take node3 for dead once its registration runs out: dave leaves their
        // participants' room as timeout (by the time printed: it may have come while the above ran).
        for user in others {
            let left = clients[user]?.next(timeout: 15) { $0 == .participantLeft(user: "dave", reason: .timeout) }
            XCTAssertNotNil(left, "\(user) did not see dave leave: \(clients[user]?.pending ?? [])")
            print("\(cut): \(user) has dave left(timeout) by \(since(cutAt)) after the cut")
        }
        for user in others {
            // A seat resumed before node3 was taken for dead moved with its holder (nobody sees
            // them go); one taken back with node3 left as timeout, and its holder joined again.
            let seen = clients[user]?.pending.filter { $0 == .participantLeft(user: cutUser, reason: .timeout) || $0 == .participantJoined(user: cutUser, muted: false) }
            if rejoined.resumed {
                XCTAssertNil(clients[user]?.next(timeout: 0.5) { $0 == .participantLeft(user: cutUser, reason: .timeout) }, "\(user): \(seen ?? [])")
            } else {
                XCTAssertNotNil(clients[user]?.next(timeout: 5) { $0 == .participantLeft(user: cutUser, reason: .timeout) }, "\(user): \(seen ?? [])")
                XCTAssertNotNil(clients[user]?.next(timeout: 5) { $0 == .participantJoined(user: cutUser, muted: false) }, "\(user): \(seen ?? [])")
            }
        }
        // One room: both others reach them, and they reach both.
        for user in others {
            clients[user]?.send(.offer(to: cutUser, sdp: Self.sdp))
            XCTAssertEqual(returned.next(timeout: 5) { if case .offer = $0 { true } else { false } }, .offer(from: user, sdp: Self.sdp))
            returned.send(.answer(to: user, sdp: Self.sdp))
            XCTAssertEqual(clients[user]?.next(timeout: 5) { if case .answer = $0 { true } else { false } }, .answer(from: cutUser, sdp: Self.sdp))
        }

        // The link heals: node3 registers again, finds itself taken for dead, and asks dave to join again.
        relay.set(.forwarding)
        let healedAt = Date()
        XCTAssertEqual(dave.nextError(timeout: 15), .serviceUnavailable)
        XCTAssertEqual(dave.waitClosed(timeout: 5), WebSocketCloseCode.serviceUnavailable.rawValue)
        print("\(cut): healed; node3 asks dave to join again \(since(healedAt)) after")
        while Date().timeIntervalSince(healedAt) < 20, (try? httpGet(cluster.healthURL(node: 2)))?.status != 200 {
            Thread.sleep(forTimeInterval: 0.05)
        }
        XCTAssertEqual(try httpGet(cluster.healthURL(node: 2)).status, 200)
        print("\(cut): healed; node3's /health says 200 after \(since(healedAt))")
        // It admits again, into the one room everybody else is in.
        let (_, daveJoined) = try join("dave", room: "r", at: cluster.nodeURLs[2])
        XCTAssertEqual(Set(daveJoined.participants.map(\.user)), Set(users))
        XCTAssertFalse(daveJoined.resumed)
        for user in others {
            XCTAssertNotNil(clients[user]?.next(timeout: 5) { $0 == .participantJoined(user: "dave", muted: false) }, user)
        }
        XCTAssertNotNil(returned.next(timeout: 5) { $0 == .participantJoined(user: "dave", muted: false) })
    }

    /// A partition shorter than the registration (3 s): the node keeps its seats, and what changed
    /// in its rooms while it was not listening (Redis keeps no messages for it) reaches its
    /// participants once it is back, so that they see the room the others see.
    func testANodeBackFromAShortPartitionCatchesUpWithItsRooms() throws {
        cluster = try ServiceCluster(nodes: 2, balancer: false, relayedNode: 1)
        let relay = try XCTUnwrap(cluster.redisRelay)
        let (alice, _) = try join("alice", room: "r", at: cluster.nodeURLs[0])
        let (bob, _) = try join("bob", room: "r", at: cluster.nodeURLs[0])
        let (dave, _) = try join("dave", room: "r", at: cluster.nodeURLs[1])
        XCTAssertNotNil(alice.next(timeout: 5) { $0 == .participantJoined(user: "dave", muted: false) })
        relay.set(.reset)
        let cutAt = Date()
        // While node2 is away: frank joins and bob leaves on node1; dave's seat is kept.
        let (frank, frankJoined) = try join("frank", room: "r", at: cluster.nodeURLs[0])
        XCTAssertEqual(Set(frankJoined.participants.map(\.user)), ["alice", "bob", "dave"])
        bob.send(.leave)
        XCTAssertNotNil(alice.next(timeout: 5) { $0 == .participantLeft(user: "bob", reason: .left) })
        relay.set(.forwarding)
        let healedAt = Date()
        XCTAssertEqual(dave.next(timeout: 10) { if case .participantJoined = $0 { true } else { false } }, .participantJoined(user: "frank", muted: false))
        XCTAssertEqual(dave.next(timeout: 5) { if case .participantLeft = $0 { true } else { false } }, .participantLeft(user: "bob", reason: .left))
        print(String(format: "node2 cut for %.0f ms: dave hears of frank's join and bob's leave %.2f s after the link healed",
                     healedAt.timeIntervalSince(cutAt) * 1000, Date().timeIntervalSince(healedAt)))
        XCTAssertNil(dave.waitClosed(timeout: 0.2), "dave kept his seat and his connection")
        XCTAssertNil(alice.next(timeout: 1) { if case .participantLeft = $0 { true } else { false } }, "nobody else left")
        frank.send(.offer(to: "dave", sdp: Self.sdp))
        XCTAssertEqual(dave.next(timeout: 5) { if case .offer = $0 { true } else { false } }, .offer(from: "frank", sdp: Self.sdp))
        dave.send(.answer(to: "frank", sdp: Self.sdp))
        XCTAssertEqual(frank.next(timeout: 5) { if case .answer = $0 { true } else { false } }, .answer(from: "dave", sdp: Self.sdp))
    }

    func testServeSaysWhatIsWrongWithItsRedisOptions() throws {
        let workspace = try ServiceCluster.Workspace()
        defer { workspace.remove() }
        // Nothing listens on the port: a clear message, exit 1, before the server listens.
        let dead = try ServiceCluster.freePort()
        let refused = try workspace.run(["serve", "--port", "0", "--web", "none", "--redis", "127.0.0.1:\(dead)", "--node-id", "a"])
        XCTAssertEqual(refused.status, 1)
        XCTAssertTrue(refused.stderr.contains("cannot connect to Redis at 127.0.0.1:\(dead)"), refused.stderr)
        XCTAssertTrue(refused.stderr.contains("redis-server"), refused.stderr)
        for (arguments, expected) in [(["--redis", "localhost"], "--redis must be HOST:PORT"),
                                      (["--redis", "127.0.0.1:0"], "--redis must be HOST:PORT"),
                                      (["--redis", "127.0.0.1:6379", "--node-id", "a b"], "--node-id must be"),
                                      (["--node-id", "a"], "give --redis HOST:PORT too")] {
            let run = try workspace.run(["serve", "--port", "0", "--web", "none"] + arguments)
            XCTAssertEqual(run.status, 2, arguments.joined(separator: " "))
            XCTAssertTrue(run.stderr.contains(expected), "\(arguments): \(run.stderr)")
        }
        XCTAssertTrue(try workspace.run(["help", "serve"]).stdout.contains("--redis HOST:PORT"))
    }

    func testTwoLiveNodesCannotShareAName() throws {
        cluster = try ServiceCluster(nodes: 1, balancer: false)
        let twin = try cluster.workspace.run(["serve", "--port", "0", "--web", "none", "--secret-file", cluster.secretFile.path,
                                              "--redis", "127.0.0.1:\(cluster.redisPort)", "--node-id", "node1"])
        XCTAssertEqual(twin.status, 1)
        XCTAssertTrue(twin.stderr.contains("refused node node1"), twin.stderr)
    }
}

/// redis-server, `veil serve` nodes and haproxy, started on free loopback ports for one test and
/// stopped (`stop()`) after it.
final class ServiceCluster {
    struct Failure: Error, CustomStringConvertible { let description: String }

    /// A temporary directory and the built `veil` run in it.
    struct Workspace {
        let directory: URL
        init() throws {
            directory = FileManager.default.temporaryDirectory.appendingPathComponent("veil-nodes-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        }
        func remove() { try? FileManager.default.removeItem(at: directory) }

        /// Runs `veil arguments` to its end.
        func run(_ arguments: [String]) throws -> TestProgram.Run {
            try TestProgram.run(try TestProgram.veil, arguments, in: directory)
        }
    }

    let workspace: Workspace
    let secretFile: URL
    let authority: TokenAuthority
    let redisPort: Int
    private(set) var redis: ChildProcess?
    private(set) var nodes: [ChildProcess] = []
    private(set) var nodeURLs: [URL] = []
    private(set) var balancer: ChildProcess?
    private(set) var balancerURL: URL?
    /// The relay between node `relayedNode` and Redis, which a test cuts (a network partition of that node alone).
    private(set) var redisRelay: TCPRelay?

    /// A free TCP port on 127.0.0.1 (bound and released: nothing else on this machine takes it in between, usually).
    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket() failed") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else { throw Failure(description: "cannot bind a loopback port") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    static func executable(_ name: String, package: String) throws -> URL {
        for directory in ["/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin"] {
            let url = URL(fileURLWithPath: directory).appendingPathComponent(name)
            if FileManager.default.isExecutableFile(atPath: url.path) { return url }
        }
        throw Failure(description: "\(name) is not installed: scripts/bootstrap installs Debian's \(package)")
    }

    /// The package root, where deploy/haproxy.cfg is.
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// Starts Redis, `nodes` nodes (`veil serve --redis … --node-id nodeN`, with `arguments`) and,
    /// with `balancer`, haproxy in front of them (deploy/haproxy.cfg takes three nodes). Node
    /// `relayedNode` (0-based), if given, reaches Redis through `redisRelay`; the others directly.
    init(nodes count: Int, arguments: [String] = [], balancer withBalancer: Bool = true, relayedNode: Int? = nil) throws {
        workspace = try Workspace()
        secretFile = workspace.directory.appendingPathComponent("secret")
        let secret = try ServerSecret.create(at: secretFile)
        authority = TokenAuthority(secret: secret)
        redisPort = try Self.freePort()
        do {
            try start(count, arguments: arguments, balancer: withBalancer, relayedNode: relayedNode)
        } catch {
            stop()
            throw error
        }
    }

    /// Starts redis-server on `redisPort`, without persistence (a restart loses everything).
    private func startRedis() throws {
        let redis = try ChildProcess(name: "redis", executable: try Self.executable("redis-server", package: "redis-server"),
                              arguments: ["--port", String(redisPort), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                                          "--dir", workspace.directory.path],
                              directory: workspace.directory)
        self.redis = redis
        guard redis.wait(timeout: 15, for: { $0.contains("Ready to accept connections") }) else {
            throw Failure(description: "redis-server did not start: \(redis.text)")
        }
    }

    /// Stops Redis (its data goes with it) and starts a new one on the same port.
    func restartRedis() throws {
        redis?.stop()
        try startRedis()
    }

    /// Sends `signal` to redis-server (SIGSTOP: it accepts connections and answers nothing; SIGCONT).
    func signalRedis(_ signal: Int32) {
        guard let process = redis?.process, process.isRunning else { return }
        Glibc.kill(process.processIdentifier, signal)
    }

    /// `http://127.0.0.1:PORT/health` of node `index` (0-based).
    func healthURL(node index: Int) -> URL {
        URL(string: "http://127.0.0.1:\(nodeURLs[index].port ?? 0)/health")!
    }

    private func start(_ count: Int, arguments: [String], balancer withBalancer: Bool, relayedNode: Int?) throws {
        try startRedis()
        let veil = try TestProgram.veil
        for index in 1...count {
            var port = redisPort
            if index - 1 == relayedNode {
                let relay = try TCPRelay(upstreamPort: redisPort)
                redisRelay = relay
                port = relay.port
            }
            let node = try ChildProcess(name: "node\(index)", executable: veil,
                                 arguments: ["serve", "--port", "0", "--web", "none", "--secret-file", secretFile.path,
                                             "--redis", "127.0.0.1:\(port)", "--node-id", "node\(index)"] + arguments,
                                 directory: workspace.directory)
            nodes.append(node)
            var url: URL?
            _ = node.wait(timeout: 20) { text in
                url = text.split(whereSeparator: \.isWhitespace).first { $0.hasPrefix("ws://") }
                    .map { String($0).trimmingCharacters(in: CharacterSet(charactersIn: ";,")) }.flatMap(URL.init(string:))
                return url != nil
            }
            guard let url else { throw Failure(description: "node\(index) did not start: \(node.text)") }
            nodeURLs.append(url)
        }
        print("redis on 127.0.0.1:\(redisPort); nodes at \(nodeURLs.map(\.absoluteString))")
        guard withBalancer else { return }
        precondition(count == 3, "deploy/haproxy.cfg names three nodes")
        let port = try Self.freePort()
        var environment: [String: String?] = ["VEIL_BIND": "127.0.0.1:\(port)"]
        for (index, url) in nodeURLs.enumerated() { environment["VEIL_NODE\(index + 1)"] = "127.0.0.1:\(url.port ?? 0)" }
        let haproxy = try ChildProcess(name: "haproxy", executable: try Self.executable("haproxy", package: "haproxy"),
                                arguments: ["-db", "-f", Self.root.appendingPathComponent("deploy/haproxy.cfg").path],
                                directory: workspace.directory, environment: environment)
        balancer = haproxy
        // Up once every node's health check has passed through it.
        let health = URL(string: "http://127.0.0.1:\(port)/health")!
        let deadline = Date().addingTimeInterval(20)
        var answered = 0
        while answered < 3, Date() < deadline, haproxy.process.isRunning {
            if (try? httpGet(health))?.status == 200 { answered += 1 } else { answered = 0 }
            Thread.sleep(forTimeInterval: 0.2)
        }
        guard answered >= 3 else { throw Failure(description: "haproxy did not come up: \(haproxy.text)") }
        balancerURL = URL(string: "ws://127.0.0.1:\(port)/ws")
        // Every node checked up (rise 1, checks every second): wait out one round so none is skipped.
        Thread.sleep(forTimeInterval: 1.2)
    }

    /// A token for `user` in `room`, valid for ten minutes (every node holds the secret).
    func token(room: String, user: String) throws -> String { try authority.issue(room: room, user: user, lifetime: 600) }

    /// The node whose log says `user` joined `room` (`join room=R user=U`), other than `excluded`.
    func node(ofJoin user: String, room: String, after excluded: String? = nil) -> String? {
        let line = "join room=\(room) user=\(user) "
        let deadline = Date().addingTimeInterval(5)
        while Date() < deadline {
            if let node = nodes.first(where: { $0.name != excluded && $0.text.contains(line) }) { return node.name }
            Thread.sleep(forTimeInterval: 0.05)
        }
        return nil
    }

    /// SIGKILL to node `index` (0-based): no goodbye to anyone.
    func kill(node index: Int) {
        let process = nodes[index].process
        guard process.isRunning else { return }
        Glibc.kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    func stop() {
        signalRedis(SIGCONT)
        balancer?.stop()
        nodes.forEach { $0.stop() }
        redisRelay?.stop()
        redis?.stop()
        workspace.remove()
    }
}
