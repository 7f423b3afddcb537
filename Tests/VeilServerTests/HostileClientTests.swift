import Foundation
import Synchronization
import VeilCore
import VeilGLib
import VeilServer
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Hostile clients against a real `RoomServer` on loopback (bounded counts and durations): the
/// limits of docs/protocol.md ("Limits"), what is left of item 4 of the hostile list that
/// `RoomServerTests` does not cover, and a flood from several offenders at once while two honest
/// clients keep talking. Malformed, unknown, oversized, binary and deeply nested input are in
/// `RoomServerTests.testHostileInputClosesOnlyThatConnection`.
final class HostileClientTests: LoopbackServerTestCase {
    private func isLeft(_ message: ServerMessage) -> Bool { if case .participantLeft = message { true } else { false } }

    // MARK: Before join, relays to nobody

    func testMessagesBeforeJoinAndRelaysToOtherRoomsOrNobodyDeliverNothing() throws {
        try startServer()
        let early = try connect("early")
        for message in [ClientMessage.offer(to: "alice", sdp: "v=0\r\n"), .answer(to: "alice", sdp: "v=0\r\n"),
                        .ice(to: "alice", mline: 0, candidate: ""), .mute(muted: true), .leave] {
            early.send(message)
            XCTAssertEqual(early.nextError(), .notJoined, "\(message)")
        }
        XCTAssertNil(early.waitClosed(timeout: 0.2), "not_joined keeps the connection open")

        let alice = try join("r1", "alice")
        let sam1 = try join("r1", "sam")
        let sam2 = try join("r2", "sam")   // the same name in another room
        let carol = try join("r2", "carol")
        _ = alice.next() // participantJoined(sam)
        _ = sam2.next(timeout: 0.1)
        _ = carol.next(timeout: 0.1)
        // The early connection joins after all, on the same connection.
        early.send(.join(room: "r1", user: "early", token: try token("r1", "early")))
        guard case .joined? = early.next(where: { if case .joined = $0 { true } else { false } }) else { return XCTFail("\(early.pending)") }
        for client in [alice, sam1] { _ = client.next(where: { if case .participantJoined = $0 { true } else { false } }) }

        for target in ["carol", "nobody", "alice"] { // another room, nobody, oneself
            alice.send(.offer(to: target, sdp: "v=0\r\n"))
            XCTAssertEqual(alice.nextError(), .unknownPeer, target)
        }
        alice.send(.ice(to: "sam", mline: 0, candidate: "candidate:1 1 UDP 1 10.0.0.1 9 typ host"))
        XCTAssertEqual(sam1.next(), .ice(from: "alice", mline: 0, candidate: "candidate:1 1 UDP 1 10.0.0.1 9 typ host"))
        // Nothing reached room r2, not even the sam who shares the name.
        XCTAssertNil(sam2.next(timeout: 0.4))
        XCTAssertNil(carol.next(timeout: 0.1))
        XCTAssertEqual(server.status().participants, 5)
    }

    // MARK: Half-open connections

    func testConnectionsThatNeverFinishTheirRequestAreShutDown() throws {
        try startServer(handshakeTimeout: 1)
        let silent = try (0..<5).map { _ in try RawWebSocket(port: port) }
        let halfRequests = try (0..<5).map { _ -> RawWebSocket in
            let socket = try RawWebSocket(port: port)
            try socket.write(Array("GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: webs".utf8))
            return socket
        }
        XCTAssertTrue(waitFor(1) { self.server.status().sockets == 10 }, "\(server.status())")
        let start = Date()
        for socket in silent + halfRequests {
            XCTAssertTrue(socket.drainUntilClosed(timeout: 3), "a connection that never finished its request stayed open")
        }
        let elapsed = Date().timeIntervalSince(start)
        XCTAssertLessThan(elapsed, 2.5)
        XCTAssertTrue(waitFor(1) { self.server.status().sockets == 0 }, "\(server.status())")
        // A WebSocket that finished its handshake is not touched by that deadline.
        let alice = try join("r1", "alice")
        Thread.sleep(forTimeInterval: 1.5)
        XCTAssertNil(alice.waitClosed(timeout: 0.1))
        XCTAssertEqual(server.status().sockets, 1)
    }

    // MARK: Connection caps

    func testBeyondTheConnectionCapsClientsGetServerFullAndHealthStillAnswers() throws {
        try startServer(rooms: .init(maximumConnections: 6, maximumUnjoinedConnections: 3))
        XCTAssertEqual(server.status().maximumConnections, 6)
        // Beyond the waiting allowance, the connection that has waited longest makes room.
        let idle = try connect("idle")
        XCTAssertTrue(waitFor(1) { self.server.status().connections == 1 })
        let waiting = try (0..<3).map { try connect("waiting\($0)") }
        XCTAssertEqual(idle.nextError(), .serverFull)
        XCTAssertEqual(idle.waitClosed(), WebSocketCloseCode.serverFull.rawValue)
        for (n, client) in waiting.enumerated() {
            client.send(.join(room: "r", user: "u\(n)", token: try token("r", "u\(n)")))
            XCTAssertNotNil(client.next(where: { if case .joined = $0 { true } else { false } }))
        }
        let more = try (3..<6).map { try join("r", "u\($0)") }
        let full = try connect("full")
        XCTAssertEqual(full.nextError(), .serverFull)
        XCTAssertEqual(full.waitClosed(), WebSocketCloseCode.serverFull.rawValue)
        let health = try httpGet(try XCTUnwrap(server.healthURL))
        XCTAssertEqual(health.status, 200, "health answers while the server is full")
        XCTAssertTrue(health.body.contains(#""participants":6"#), health.body)
        // One leaves: there is room again.
        more[0].send(.leave)
        XCTAssertEqual(waiting[0].next(where: isLeft), .participantLeft(user: "u3", reason: .left))
        XCTAssertTrue(waitFor(1) { self.server.status().participants == 5 })
        withExtendedLifetime(more) {}
    }

    func testTheConnectionCapNeverExceedsTheOpenFileLimit() throws {
        var limit = rlimit()
        XCTAssertEqual(getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit), 0)
        try startServer(rooms: .init(maximumConnections: 10_000_000))
        let taken = server.status().maximumConnections
        XCTAssertLessThanOrEqual(UInt64(taken + RoomServer.socketHeadroom), UInt64(limit.rlim_cur))
        XCTAssertGreaterThan(taken, 0)
    }

    // MARK: Rates

    func testAFloodingParticipantIsRateLimitedAndKickedAndAJoinFloodIsCut() throws {
        try startServer()
        let alice = try join("r1", "alice")
        let bob = try join("r1", "bob")
        _ = alice.next()
        for _ in 0..<600 { bob.send(.ping(t: nil)) }
        XCTAssertEqual(bob.nextError(), .rateLimited)
        XCTAssertEqual(bob.waitClosed(), WebSocketCloseCode.policyViolation.rawValue)
        XCTAssertEqual(alice.next(where: isLeft), .participantLeft(user: "bob", reason: .kicked))
        XCTAssertTrue(log.waitForLines(count: 4).contains { $0.hasSuffix("leave room=r1 user=bob reason=kicked code=rate_limited") }, "\(log.lines)")

        let churn = try connect("churn")
        for _ in 0..<10 {
            churn.send(.join(room: "r1", user: "churn", token: try token("r1", "churn")))
            churn.send(.leave)
        }
        XCTAssertEqual(churn.nextError(), .rateLimited)
        XCTAssertEqual(churn.waitClosed(), WebSocketCloseCode.policyViolation.rawValue)
        // alice saw at most the burst of 5 joins and leaves, never more
        var seen = 0
        while let message = alice.next(timeout: 0.3) {
            if case .participantJoined(user: "churn", _) = message { seen += 1 }
        }
        XCTAssertLessThanOrEqual(seen, 5)
        XCTAssertEqual(server.status().participants, 1)
    }

    // MARK: Slow readers

    /// A raw client joins, keeps pinging, and never reads; a room-mate sends it large offers. The
    /// server's queue for it passes the backlog limit and it is cut, long before the stall timeout.
    func testAClientThatNeverReadsIsCutWhenItsBacklogPassesTheLimit() throws {
        try startServer(rooms: .init(maximumBacklogBytes: 256 * 1024, stallTimeout: 30))
        let pusher = try join("r1", "pusher")
        let sloth = try RawWebSocket.open(port: port, receiveBuffer: 4096)
        try sloth.send(.join(room: "r1", user: "sloth", token: try token("r1", "sloth")))
        XCTAssertNotNil(pusher.next(where: { if case .participantJoined = $0 { true } else { false } }))
        let sdp = "v=0\r\n" + String(repeating: "a=x-padding:0123456789abcdef0123456789abcdef\r\n", count: 1300)
        XCTAssertLessThan(sdp.utf8.count, 60_000)
        let start = Date()
        for n in 0..<12 {
            pusher.send(.offer(to: "sloth", sdp: sdp))
            try sloth.send(.ping(t: Int64(n)))
            Thread.sleep(forTimeInterval: 0.05)
        }
        let left = pusher.next(timeout: 5, where: isLeft)
        let elapsed = Date().timeIntervalSince(start)
        XCTAssertEqual(left, .participantLeft(user: "sloth", reason: .kicked))
        XCTAssertLessThan(elapsed, 3)
        XCTAssertTrue(log.lines.contains { $0.hasSuffix("leave room=r1 user=sloth reason=kicked code=slow_consumer") }, "\(log.lines)")
        XCTAssertTrue(sloth.drainUntilClosed(timeout: 3), "the transport was cut")
        XCTAssertNil(pusher.waitClosed(timeout: 0.1), "the sender is not punished")
        XCTAssertEqual(server.status().connections, 1)
    }

    /// WebSocket ping frames count as messages, and the server reads one slice of a connection at
    /// a time: a participant streaming ping frames is kicked once past its message burst, and the
    /// other room-mates keep talking meanwhile.
    func testAPingFrameFloodIsCutByTheMessageRate() throws {
        try startServer()
        let alice = try join("r1", "alice")
        let bob = try join("r1", "bob")
        _ = alice.next()
        let mallory = try RawWebSocket.open(port: port, receiveBuffer: 4096)
        try mallory.send(.join(room: "r1", user: "mallory", token: try token("r1", "mallory")))
        XCTAssertNotNil(alice.next(where: { if case .participantJoined = $0 { true } else { false } }))
        XCTAssertNotNil(bob.next(where: { if case .participantJoined = $0 { true } else { false } }))
        let ping = RawWebSocket.frame([UInt8](repeating: 7, count: 125), opcode: 9)
        let batch = Array([[UInt8]](repeating: ping, count: 64).joined())
        let start = Date()
        let written = Mutex(0)
        let writerDone = DispatchSemaphore(value: 0)
        DispatchQueue.global().async { // 16 MB of ping frames (131 072 pings), as fast as loopback takes them
            for _ in 0..<(16 << 20) / batch.count where (try? mallory.write(batch)) == true {
                written.withLock { $0 += batch.count }
            }
            writerDone.signal()
        }
        var roundTrips: [Double] = []
        var lost = 0
        var left: ServerMessage?
        while Date().timeIntervalSince(start) < 2 {
            let began = Date()
            alice.send(.offer(to: "bob", sdp: "v=0\r\n"))
            guard bob.next(timeout: 3, where: { if case .offer = $0 { true } else { false } }) == .offer(from: "alice", sdp: "v=0\r\n") else {
                lost += 1; break
            }
            roundTrips.append(Date().timeIntervalSince(began) * 1000)
            while let message = alice.next(timeout: 0) {
                if isLeft(message), left == nil { left = message }
            }
            Thread.sleep(forTimeInterval: 0.025) // within alice's own message rate (50/s)
        }
        if left == nil { left = alice.next(timeout: 3, where: isLeft) }
        let writerStopped = writerDone.wait(timeout: .now() + 5) == .success
        let worst = roundTrips.max() ?? 0
        print(String(format: "ping-frame flood: %d honest round trips in 2 s (max %.1f ms), %d lost; mallory %@ after %d KiB of pings",
                     roundTrips.count, worst, lost, left.map { "\($0)" } ?? "still in the room", written.withLock { $0 } / 1024))
        XCTAssertEqual(lost, 0, "an honest offer was lost")
        XCTAssertGreaterThan(roundTrips.count, 20)
        XCTAssertLessThan(worst, 1000, "the server's loop stalled")
        XCTAssertEqual(left, .participantLeft(user: "mallory", reason: .kicked))
        XCTAssertTrue(log.waitForLines(count: 5).contains { $0.hasSuffix("leave room=r1 user=mallory reason=kicked code=rate_limited") }, "\(log.lines)")
        XCTAssertTrue(writerStopped, "the flooder's connection was never cut")
        XCTAssertNil(alice.waitClosed(timeout: 0))
        XCTAssertNil(bob.waitClosed(timeout: 0))
        XCTAssertTrue(waitFor(2) { let s = self.server.status(); return s.connections == 2 && s.sockets == 2 && s.participants == 2 },
                      "\(server.status())")
    }

    /// A client the server closes while it is still writing reads its error and close frame and
    /// then the end of the stream, not a reset: the server drains what follows instead of closing
    /// a socket with unread bytes in it (which resets the connection, and a client still writing
    /// fails before it reads why it was closed). One floods pings after joining, one sends a
    /// message far over the size limit; each writes everything before reading anything.
    func testAClientClosedWhileStillWritingReadsWhyAndAnOrderlyEnd() throws {
        try startServer()
        let flooder = try RawWebSocket.open(port: port)
        try flooder.send(.join(room: "r1", user: "flooder", token: try token("r1", "flooder")))
        let pings = Array([[UInt8]](repeating: RawWebSocket.frame(Array(SignalingMessage.encode(ClientMessage.ping(t: nil)).utf8)), count: 3000).joined())
        let giant = try RawWebSocket.open(port: port)
        let oversized = RawWebSocket.frame(Array(#"{"v":1,"type":"ping","pad":""#.utf8) + [UInt8](repeating: 0x78, count: 150_000) + Array(#""}"#.utf8))
        XCTAssertTrue(try flooder.write(pings), "the flooder's writes failed: the server reset the connection")
        XCTAssertTrue(try giant.write(oversized), "the oversized message's write failed: the server reset the connection")
        for (client, code, close) in [(flooder, SignalingErrorCode.rateLimited, WebSocketCloseCode.policyViolation),
                                      (giant, .messageTooLarge, .tooBig)] {
            let read = client.readUntilEnd(timeout: 8)
            let errors = read.texts.compactMap { text -> SignalingErrorCode? in
                guard case let .error(code, _)? = try? SignalingMessage.decode(ServerMessage.self, from: text) else { return nil }
                return code
            }
            print("closed while writing: \(errors), close \(read.closeCode.map { "\($0)" } ?? "none"), \(read.end) after \(pings.count / 1024) KiB / \(oversized.count / 1024) KiB written")
            XCTAssertEqual(errors, [code])
            XCTAssertEqual(read.closeCode, close.rawValue)
            XCTAssertEqual(read.end, .endOfStream, "the connection ended with a reset, not the server's end of stream")
            client.close()
        }
        XCTAssertTrue(waitFor(6) { self.server.status().connections == 0 && self.server.status().sockets == 0 }, "\(server.status())")
    }

    // MARK: Everything at once

    /// Offenders of every kind at once (message flood, oversized and malformed messages, a join
    /// flood with forged tokens and a join/leave churn, a client that never reads, connections that
    /// never finish their request), while alice and bob in another room keep exchanging offers and
    /// answers. Every offender gets its code and is disconnected; the honest pair's round trips stay
    /// short; afterwards /health answers and the descriptors are back where they were.
    func testAFloodFromSeveralOffendersLeavesAnotherRoomTalking() throws {
        try startServer(rooms: .init(stallTimeout: 2), handshakeTimeout: 2)
        let alice = try join("calm", "alice")
        let bob = try join("calm", "bob")
        _ = alice.next()
        let filesBefore = ProcessFootprint.openFiles
        let memoryBefore = ProcessFootprint.residentKiB

        let outcomes = Outcomes()
        let group = DispatchGroup()
        func offender(_ what: String, _ body: @escaping @Sendable () throws -> Void) {
            DispatchQueue.global().async(group: group) {
                do { try body() } catch { outcomes.record(what, "threw \(error)") }
            }
        }
        let issue = { @Sendable (room: String, user: String) throws -> String in try self.authority.issue(room: room, user: user, lifetime: 600) }
        let url = self.url!, loop = self.clientLoop!, port = self.port
        // A client that expects `code` and close `close` after `attack`.
        func expect(_ what: String, _ code: SignalingErrorCode, _ close: WebSocketCloseCode, join room: String? = nil,
                    attack: @escaping @Sendable (WebSocketTestClient) throws -> Void) {
            offender(what) {
                let client = try WebSocketTestClient.connect(to: url, name: what, loop: loop)
                if let room {
                    client.send(.join(room: room, user: what, token: try issue(room, what)))
                    _ = client.next(where: { if case .joined = $0 { true } else { false } })
                }
                try attack(client)
                let got = client.nextError(timeout: 8)
                let closed = client.waitClosed(timeout: 8)
                outcomes.record(what, got == code && closed == close.rawValue ? "ok" : "got \(got.map { "\($0)" } ?? "nothing") close \(closed.map { "\($0)" } ?? "none")")
            }
        }
        for n in 0..<3 {
            expect("flooder\(n)", .rateLimited, .policyViolation, join: "evil") { c in for _ in 0..<1000 { c.send(.ping(t: nil)) } }
            expect("giant\(n)", .messageTooLarge, .tooBig) { c in c.sendText(#"{"v":1,"type":"ping","pad":""# + String(repeating: "x", count: 100_000) + "\"}") }
            expect("garbage\(n)", .badMessage, .protocolError) { c in c.sendText("{nope") }
            expect("churn\(n)", .rateLimited, .policyViolation) { c in
                for _ in 0..<10 { c.send(.join(room: "evil", user: "churn\(n)", token: try issue("evil", "churn\(n)"))); c.send(.leave) }
            }
        }
        for n in 0..<40 {
            expect("forger\(n)", .tokenForged, .policyViolation) { c in
                c.send(.join(room: "calm", user: "mallory", token: try TokenAuthority(secret: .random()).issue(room: "calm", user: "mallory", lifetime: 60)))
            }
        }
        // Never reads: joined, pinging, its room-mate sends it 10 offers of 58 KB.
        offender("sloth") {
            let pusher = try WebSocketTestClient.connect(to: url, name: "pusher", loop: loop)
            pusher.send(.join(room: "slow", user: "pusher", token: try issue("slow", "pusher")))
            _ = pusher.next(where: { if case .joined = $0 { true } else { false } })
            let sloth = try RawWebSocket.open(port: port, receiveBuffer: 4096)
            try sloth.send(.join(room: "slow", user: "sloth", token: try issue("slow", "sloth")))
            _ = pusher.next(where: { if case .participantJoined = $0 { true } else { false } })
            let sdp = "v=0\r\n" + String(repeating: "a=x-padding:0123456789abcdef0123456789abcdef\r\n", count: 1300)
            for _ in 0..<10 { pusher.send(.offer(to: "sloth", sdp: sdp)) }
            var left: ServerMessage?
            for n in 0..<16 where left == nil {
                _ = try sloth.send(.ping(t: Int64(n)))
                left = pusher.next(timeout: 0.5, where: { if case .participantLeft = $0 { true } else { false } })
            }
            let cut = sloth.drainUntilClosed(timeout: 3)
            pusher.send(.leave)
            _ = pusher.waitClosed(timeout: 0.2)
            outcomes.record("sloth", left == .participantLeft(user: "sloth", reason: .kicked) && cut ? "ok" : "left \(String(describing: left)) cut \(cut)")
        }
        // Connections that never finish their request.
        offender("half-open") {
            let sockets = try (0..<30).map { n -> RawWebSocket in
                let socket = try RawWebSocket(port: port)
                if n % 2 == 1 { try socket.write(Array("GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\n".utf8)) }
                return socket
            }
            let closed = sockets.filter { $0.drainUntilClosed(timeout: 5) }.count
            outcomes.record("half-open", closed == sockets.count ? "ok" : "\(closed) of \(sockets.count) closed")
        }

        // Meanwhile alice and bob negotiate again and again: offer → bob, answer → alice.
        var roundTrips: [Double] = []
        var lost = 0
        let floodEnds = Date().addingTimeInterval(4)
        var n = 0
        while Date() < floodEnds || group.wait(timeout: .now()) == .timedOut {
            let sdp = "v=0\r\no=- \(n) 2 IN IP4 127.0.0.1\r\ns=-\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\n"
            let began = Date()
            alice.send(.offer(to: "bob", sdp: sdp))
            guard bob.next(timeout: 2) == .offer(from: "alice", sdp: sdp) else { lost += 1; continue }
            bob.send(.answer(to: "alice", sdp: sdp))
            guard alice.next(timeout: 2) == .answer(from: "bob", sdp: sdp) else { lost += 1; continue }
            roundTrips.append(Date().timeIntervalSince(began) * 1000)
            n += 1
            Thread.sleep(forTimeInterval: 0.05)
            if Date().timeIntervalSince(floodEnds) > 30 { break }
        }
        XCTAssertEqual(group.wait(timeout: .now() + 10), .success, "offenders did not finish")
        let duration = Date().timeIntervalSince(floodEnds) + 4

        let results = outcomes.all
        XCTAssertEqual(results.count, 3 * 4 + 40 + 2, "\(results)")
        for (what, outcome) in results.sorted(by: { $0.key < $1.key }) { XCTAssertEqual(outcome, "ok", what) }
        XCTAssertEqual(lost, 0)
        let sorted = roundTrips.sorted()
        let p50 = sorted.isEmpty ? 0 : sorted[sorted.count / 2]
        let p95 = sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, sorted.count * 95 / 100)]
        let worst = sorted.last ?? 0
        XCTAssertGreaterThan(sorted.count, 20)
        XCTAssertLessThan(p95, 250, "honest offer/answer round trips during the flood")
        XCTAssertLessThan(worst, 1000)
        XCTAssertNil(alice.waitClosed(timeout: 0), "an honest client was disconnected")
        XCTAssertNil(bob.waitClosed(timeout: 0), "an honest client was disconnected")
        XCTAssertTrue(alice.undecodableMessages.isEmpty && bob.undecodableMessages.isEmpty)

        // Afterwards: everyone but alice and bob gone, health answers, descriptors back.
        XCTAssertTrue(waitFor(6) { let s = self.server.status(); return s.connections == 2 && s.sockets == 2 && s.participants == 2 },
                      "\(server.status())")
        let health = try httpGet(try XCTUnwrap(server.healthURL))
        XCTAssertEqual(health.status, 200)
        XCTAssertTrue(health.body.contains(#""participants":2"#), health.body)
        XCTAssertTrue(waitFor(6) { ProcessFootprint.openFiles <= filesBefore + 2 }, "descriptors: \(filesBefore) before, \(ProcessFootprint.openFiles) after")
        let memoryAfter = ProcessFootprint.residentKiB
        XCTAssertLessThan(memoryAfter - memoryBefore, 64 * 1024, "resident memory grew by \(memoryAfter - memoryBefore) KiB")
        let codes = Dictionary(grouping: log.lines.compactMap { $0.split(separator: " ").first { $0.hasPrefix("code=") }?.dropFirst(5) }, by: { String($0) })
            .mapValues(\.count).sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        print(String(format: "hostile flood: %d offenders (logged: %@) over %.1f s; "
                     + "honest round trips %d, p50 %.1f ms, p95 %.1f ms, max %.1f ms, lost %d; "
                     + "descriptors %d → %d; RSS %d → %d KiB (test process, clients included)",
                     results.count, codes, duration, sorted.count, p50, p95, worst, lost,
                     filesBefore, ProcessFootprint.openFiles, memoryBefore, memoryAfter))
    }
}

/// What each offender of the flood test saw, collected from several threads.
private final class Outcomes: @unchecked Sendable {
    private let lock = NSLock()
    private var results: [String: String] = [:]
    func record(_ what: String, _ outcome: String) { lock.lock(); results[what] = outcome; lock.unlock() }
    var all: [String: String] { lock.lock(); defer { lock.unlock() }; return results }
}
