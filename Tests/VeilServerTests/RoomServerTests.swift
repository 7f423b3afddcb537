import Foundation
import Synchronization
import VeilCore
import VeilGLib
import VeilServer
import XCTest

/// The room server on loopback with real libsoup WebSocket clients: joins, token attacks, relays,
/// mute, leave, drops, silence, health, logs, hostile input.
final class RoomServerTests: XCTestCase {
    private var server: RoomServer!
    private var url: URL!
    private var authority: TokenAuthority!
    private var clientLoop: GLibLoop!
    private var log: EventLog!

    override func setUpWithError() throws {
        try startServer()
    }

    override func tearDown() {
        server?.stop()
        server = nil
        clientLoop = nil // stops it (GLibLoop.stop() then deinit would wait 5 s)
    }

    private func startServer(rooms: RoomDirectory.Configuration = .init()) throws {
        server?.stop()
        let secret = ServerSecret.random()
        authority = TokenAuthority(secret: secret)
        server = RoomServer(configuration: .init(secret: secret, host: "127.0.0.1", port: 0, rooms: rooms))
        log = EventLog(server.events)
        url = try server.start()
        clientLoop = clientLoop ?? GLibLoop(name: "test-clients")
    }

    private func token(_ room: String, _ user: String, lifetime: TimeInterval = 600) throws -> String {
        try authority.issue(room: room, user: user, lifetime: lifetime)
    }

    private func connect(_ name: String = "client") throws -> WebSocketTestClient {
        try WebSocketTestClient.connect(to: url, name: name, loop: clientLoop)
    }

    /// Connects and joins; returns the client and its `joined`.
    private func join(_ room: String, _ user: String, file: StaticString = #filePath, line: UInt = #line) throws -> (WebSocketTestClient, ServerMessage.Joined) {
        let client = try connect(user)
        client.send(.join(room: room, user: user, token: try token(room, user)))
        guard case .joined(let joined)? = client.next(where: { if case .joined = $0 { true } else { false } }) else {
            XCTFail("\(user) was not admitted to \(room): \(client.pending)", file: file, line: line)
            throw WebSocketTestClient.ConnectError(description: "not joined")
        }
        return (client, joined)
    }

    // MARK: Admission

    func testValidTokenIsAdmittedAndJoinedListsTheOthers() throws {
        let (alice, aliceJoined) = try join("r1", "alice")
        XCTAssertEqual(aliceJoined, .init(you: "alice", room: "r1", participants: []))
        let (bob, bobJoined) = try join("r1", "bob")
        XCTAssertEqual(bobJoined.participants, [ParticipantInfo(user: "alice")])
        defer { withExtendedLifetime(bob) {} }
        XCTAssertEqual(alice.next(), .participantJoined(user: "bob", muted: false))
        XCTAssertEqual(server.status().participants, 2)
        XCTAssertEqual(server.status().rooms, 1)
        XCTAssertTrue(alice.undecodableMessages.isEmpty)
    }

    func testTokenAttacksAreRefusedWithTheirCodes() throws {
        let other = TokenAuthority(secret: ServerSecret.random())
        let valid = try token("r1", "mallory")
        let parts = valid.split(separator: ".")
        let attacks: [(String, String?, SignalingErrorCode)] = [
            ("forged", try other.issue(room: "r1", user: "mallory", lifetime: 600), .tokenForged),
            // The signature's first character changed (its last may carry unused bits, and the old
            // "last one to A" left a signature that ended in A valid).
            ("tampered", "v1.\(parts[1]).\(parts[2].first == "A" ? "B" : "A")\(String(parts[2].dropFirst()))", .tokenForged),
            ("expired", try authority.issue(room: "r1", user: "mallory", expiry: Date().addingTimeInterval(-1)), .tokenExpired),
            ("wrong room", try token("r2", "mallory"), .tokenWrongRoom),
            ("wrong user", try token("r1", "alice"), .tokenWrongUser),
            ("missing", nil, .tokenMissing),
            ("empty", "", .tokenMissing),
            ("malformed", "not-a-token", .tokenMalformed),
        ]
        for (what, attack, code) in attacks {
            let client = try connect(what)
            client.send(.join(room: "r1", user: "mallory", token: attack))
            XCTAssertEqual(client.nextError(), code, what)
            XCTAssertEqual(client.waitClosed(), WebSocketCloseCode.policyViolation.rawValue, what)
        }
        XCTAssertEqual(server.status().participants, 0)
        let (_, joined) = try join("r1", "mallory")
        XCTAssertEqual(joined.you, "mallory")
    }

    func testRoomFull() throws {
        try startServer(rooms: .init(maximumParticipants: 2))
        let a = try join("r1", "a"), b = try join("r1", "b")
        defer { withExtendedLifetime((a, b)) {} }
        let c = try connect()
        c.send(.join(room: "r1", user: "c", token: try token("r1", "c")))
        XCTAssertEqual(c.nextError(), .roomFull)
        XCTAssertEqual(c.waitClosed(), WebSocketCloseCode.roomFull.rawValue)
        _ = try join("r2", "c") // other rooms are not affected
    }

    // MARK: Relay, mute, leave

    func testOfferAnswerAndICEAreRelayedWithinARoomOnly() throws {
        let (alice, _) = try join("r1", "alice")
        let (bob, _) = try join("r1", "bob")
        let (carol, _) = try join("r2", "carol")
        _ = alice.next() // participantJoined(bob)
        let sdp = "v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\na=rtpmap:111 opus/48000/2\r\n"
        bob.send(.offer(to: "alice", sdp: sdp))
        XCTAssertEqual(alice.next(), .offer(from: "bob", sdp: sdp))
        alice.send(.answer(to: "bob", sdp: sdp))
        XCTAssertEqual(bob.next(), .answer(from: "alice", sdp: sdp))
        bob.send(.ice(to: "alice", mline: 0, candidate: "candidate:1 1 UDP 2122252543 192.168.1.2 40000 typ host"))
        XCTAssertEqual(alice.next(), .ice(from: "bob", mline: 0, candidate: "candidate:1 1 UDP 2122252543 192.168.1.2 40000 typ host"))
        alice.send(.ice(to: "bob", mline: 0, candidate: ""))
        XCTAssertEqual(bob.next(), .ice(from: "alice", mline: 0, candidate: ""))

        alice.send(.offer(to: "carol", sdp: sdp)) // carol is in another room
        XCTAssertEqual(alice.nextError(), .unknownPeer)
        carol.send(.ice(to: "bob", mline: 0, candidate: ""))
        XCTAssertEqual(carol.nextError(), .unknownPeer)
        XCTAssertNil(carol.next(timeout: 0.3))
        XCTAssertNil(bob.next(timeout: 0.1))
        bob.send(.offer(to: "alice", sdp: sdp + "m=video 9 UDP/TLS/RTP/SAVPF 96\r\n"))
        XCTAssertEqual(bob.nextError(), .videoNotAllowed)
        XCTAssertNil(alice.next(timeout: 0.3))
    }

    func testMuteIsBroadcastToTheOthers() throws {
        let (alice, _) = try join("r1", "alice")
        let (bob, _) = try join("r1", "bob")
        let (carol, _) = try join("r1", "carol")
        bob.send(.mute(muted: true))
        XCTAssertEqual(alice.next(where: { if case .muteChanged = $0 { true } else { false } }), .muteChanged(user: "bob", muted: true))
        XCTAssertEqual(carol.next(), .muteChanged(user: "bob", muted: true))
        let (_, dave) = try join("r1", "dave")
        XCTAssertEqual(dave.participants.first { $0.user == "bob" }?.muted, true)
        bob.send(.mute(muted: false))
        XCTAssertEqual(carol.next(where: { if case .muteChanged = $0 { true } else { false } }), .muteChanged(user: "bob", muted: false))
        XCTAssertNil(bob.next(timeout: 0.3, where: { if case .muteChanged = $0 { true } else { false } }))
    }

    func testLeaveIsReportedPromptly() throws {
        let (alice, _) = try join("r1", "alice")
        let (bob, _) = try join("r1", "bob")
        _ = alice.next()
        let start = Date()
        bob.send(.leave)
        XCTAssertEqual(alice.next(timeout: 1), .participantLeft(user: "bob", reason: .left))
        XCTAssertLessThan(Date().timeIntervalSince(start), 1)
        // The connection stays open and can join again.
        bob.send(.join(room: "r1", user: "bob", token: try token("r1", "bob")))
        guard case .joined(let again)? = bob.next() else { return XCTFail("rejoin failed") }
        XCTAssertFalse(again.resumed)
        XCTAssertEqual(alice.next(), .participantJoined(user: "bob", muted: false))
    }

    // MARK: Drops

    func testAKilledClientIsReportedAsTimeoutWithinFiveSeconds() throws {
        let (alice, _) = try join("r1", "alice")
        let (bob, _) = try join("r1", "bob")
        _ = alice.next()
        let start = Date()
        bob.dropAbruptly()
        let left = alice.next(timeout: 6, where: { if case .participantLeft = $0 { true } else { false } })
        let elapsed = Date().timeIntervalSince(start)
        XCTAssertEqual(left, .participantLeft(user: "bob", reason: .timeout))
        XCTAssertLessThanOrEqual(elapsed, 5)
        XCTAssertGreaterThan(elapsed, 2, "held for the reconnection grace first")
        XCTAssertEqual(server.status().participants, 1)
    }

    func testASilentClientIsReportedAsTimeoutWithinFiveSeconds() throws {
        let (alice, _) = try join("r1", "alice")
        let (bob, _) = try join("r1", "bob")
        _ = alice.next()
        bob.setPinging(false)
        let lastSign = bob.lastSentAt
        let left = alice.next(timeout: 7, where: { if case .participantLeft = $0 { true } else { false } })
        let elapsed = Date().timeIntervalSince(lastSign)
        XCTAssertEqual(left, .participantLeft(user: "bob", reason: .timeout))
        XCTAssertLessThanOrEqual(elapsed, 5)
        XCTAssertEqual(bob.nextError(timeout: 1), .pingTimeout)
        XCTAssertEqual(bob.waitClosed(), WebSocketCloseCode.timeout.rawValue)
    }

    func testAReconnectionWithinTheGraceResumesSilently() throws {
        let (alice, _) = try join("r1", "alice")
        let (bob, _) = try join("r1", "bob")
        _ = alice.next()
        bob.send(.mute(muted: true))
        _ = alice.next()
        bob.dropAbruptly()
        Thread.sleep(forTimeInterval: 0.5)
        let (bob2, joined) = try join("r1", "bob")
        defer { withExtendedLifetime(bob2) {} }
        XCTAssertTrue(joined.resumed)
        XCTAssertTrue(joined.muted)
        XCTAssertEqual(joined.participants, [ParticipantInfo(user: "alice")])
        XCTAssertNil(alice.next(timeout: 4), "alice sees neither a leave nor a join: \(log.lines)")
    }

    func testTheSameUserJoiningTwiceReplacesTheOldConnection() throws {
        let (alice, _) = try join("r1", "alice")
        let (old, _) = try join("r1", "bob")
        _ = alice.next()
        let (bob2, joined) = try join("r1", "bob")
        defer { withExtendedLifetime(bob2) {} }
        XCTAssertTrue(joined.resumed)
        XCTAssertEqual(old.nextError(), .replaced)
        XCTAssertEqual(old.waitClosed(), WebSocketCloseCode.replaced.rawValue)
        XCTAssertNil(alice.next(timeout: 0.5))
    }

    // MARK: HTTP, logs, hostile input, stop

    func testHealth() throws {
        let alice = try join("r1", "alice"), bob = try join("r2", "bob")
        defer { withExtendedLifetime((alice, bob)) {} }
        let health = try XCTUnwrap(server.healthURL)
        let (status, body) = try httpGet(health)
        XCTAssertEqual(status, 200)
        let json = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])
        XCTAssertEqual(json["status"] as? String, "ok")
        XCTAssertEqual(json["rooms"] as? Int, 2)
        XCTAssertEqual(json["participants"] as? Int, 2)
        XCTAssertNotNil(json["uptimeSeconds"] as? Int)
        let missing = try httpGet(URL(string: health.absoluteString.replacingOccurrences(of: "/health", with: "/nope"))!)
        XCTAssertEqual(missing.status, 404)
    }

    func testTokensNeverAppearInTheLogs() throws {
        let good = try token("r1", "alice")
        let alice = try connect()
        alice.send(.join(room: "r1", user: "alice", token: good))
        _ = alice.next()
        let expired = try authority.issue(room: "r1", user: "bob", expiry: Date().addingTimeInterval(-5))
        let bob = try connect()
        bob.send(.join(room: "r1", user: "bob", token: expired))
        _ = bob.waitClosed()
        alice.send(.leave)
        let lines = log.waitForLines(count: 4) // listen, join, refuse, leave
        XCTAssertTrue(lines.contains { $0.contains("join room=r1 user=alice") }, "\(lines)")
        XCTAssertTrue(lines.contains { $0.contains("refuse room=r1 user=bob code=token_expired") }, "\(lines)")
        XCTAssertTrue(lines.contains { $0.contains("leave room=r1 user=alice reason=left") }, "\(lines)")
        for secret in [good, expired] {
            for piece in secret.split(separator: ".") where piece != "v1" {
                XCTAssertFalse(lines.contains { $0.contains(piece) }, "a token part is in the log: \(lines)")
            }
        }
    }

    func testHostileInputClosesOnlyThatConnection() throws {
        let (alice, _) = try join("r1", "alice")
        let (bob, _) = try join("r1", "bob")
        let (carol, _) = try join("r2", "carol")
        _ = alice.next()
        let attacks: [(String, (WebSocketTestClient) -> Void, SignalingErrorCode, UInt16)] = [
            ("not JSON", { $0.sendText("{nope") }, .badMessage, 1002),
            ("unknown type", { $0.sendText(#"{"v":1,"type":"hack"}"#) }, .unknownType, 1002),
            ("binary", { $0.sendBinary([1, 2, 3]) }, .badMessage, 1002),
            ("huge", { $0.sendText(#"{"v":1,"type":"ping","pad":""# + String(repeating: "x", count: 100_000) + "\"}") }, .messageTooLarge, 1009),
            ("deep", { $0.sendText(String(repeating: "[", count: 2_000)) }, .badMessage, 1002),
            ("huge before joining", { $0.sendText(#"{"v":1,"type":"ping","pad":""# + String(repeating: "x", count: 5_000) + "\"}") }, .messageTooLarge, 1009),
        ]
        for (what, attack, code, close) in attacks {
            let mallory = try connect(what)
            attack(mallory)
            XCTAssertEqual(mallory.nextError(), code, what)
            XCTAssertEqual(mallory.waitClosed(), close, what)
        }
        // Far beyond the frame limit: libsoup cuts it; the server carries on.
        let giant = try connect("giant")
        giant.sendText(String(repeating: "x", count: 1_000_000))
        XCTAssertNotNil(giant.waitClosed(timeout: 5))
        // A joined participant who misbehaves is removed as kicked.
        bob.sendText("[]")
        XCTAssertEqual(bob.nextError(), .badMessage)
        XCTAssertEqual(alice.next(), .participantLeft(user: "bob", reason: .kicked))
        // Everyone else carries on.
        let (dave, _) = try join("r2", "dave")
        XCTAssertEqual(carol.next(), .participantJoined(user: "dave", muted: false))
        dave.send(.offer(to: "carol", sdp: "v=0\r\n"))
        XCTAssertEqual(carol.next(), .offer(from: "dave", sdp: "v=0\r\n"))
        XCTAssertEqual(server.status().participants, 3)
    }

    func testStopClosesEveryoneAndEndsTheEvents() throws {
        let (alice, _) = try join("r1", "alice")
        server.stop()
        XCTAssertEqual(alice.nextError(), .serverShutdown)
        XCTAssertEqual(alice.waitClosed(), WebSocketCloseCode.goingAway.rawValue)
        XCTAssertTrue(log.waitForEnd(timeout: 2))
        XCTAssertTrue(log.lines.last?.hasSuffix(" stop") ?? false, "\(log.lines)")
        XCTAssertThrowsError(try server.start())
    }

    func testBadHostAndBusyPortAreClearErrors() throws {
        let secret = ServerSecret.random()
        XCTAssertThrowsError(try RoomServer(configuration: .init(secret: secret, host: "not-an-ip", port: 0)).start()) {
            XCTAssertTrue("\($0)".contains("IP address"), "\($0)")
        }
        let busy = try XCTUnwrap(server.port)
        XCTAssertThrowsError(try RoomServer(configuration: .init(secret: secret, port: busy)).start()) {
            XCTAssertTrue("\($0)".contains("--port"), "\($0)")
        }
    }
}

/// Collects a server's log lines from its event stream.
final class EventLog: @unchecked Sendable {
    private let condition = NSCondition()
    private var collected: [String] = []
    private var ended = false

    init(_ events: AsyncStream<RoomServerEvent>) {
        Task.detached { [self] in
            for await event in events { append("\(event)") }
            finish()
        }
    }

    private func finish() {
        condition.lock(); ended = true; condition.broadcast(); condition.unlock()
    }

    private func append(_ line: String) {
        condition.lock(); collected.append(line); condition.broadcast(); condition.unlock()
    }

    var lines: [String] { condition.lock(); defer { condition.unlock() }; return collected }

    func waitForLines(count: Int, timeout: TimeInterval = 3) -> [String] {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock(); defer { condition.unlock() }
        while collected.count < count, condition.wait(until: deadline) {}
        return collected
    }

    func waitForEnd(timeout: TimeInterval) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock(); defer { condition.unlock() }
        while !ended, condition.wait(until: deadline) {}
        return ended
    }
}
