import Foundation
import VeilCore
import VeilServer
import XCTest

/// The room state machine on its own: no sockets, no threads, no sleeping. Time is a number.
final class RoomDirectoryTests: XCTestCase {
    typealias Action = RoomDirectory.Action

    /// Drives a directory with an injected clock and opens connections.
    struct Harness {
        var directory: RoomDirectory
        let authority: TokenAuthority
        var time = SignalingTime(monotonic: 1000, date: Date(timeIntervalSince1970: 1_800_000_000))
        var nextID: UInt64 = 1

        init(_ configuration: RoomDirectory.Configuration = .init()) {
            authority = TokenAuthority(secret: .random())
            directory = RoomDirectory(configuration: configuration, tokens: authority)
        }

        mutating func handle(_ event: RoomDirectory.Event) -> [Action] { directory.handle(event, at: time) }

        mutating func open() -> ConnectionID {
            let id = ConnectionID(nextID)
            nextID += 1
            XCTAssertEqual(handle(.connected(id)), [])
            return id
        }

        mutating func send(_ message: ClientMessage, from id: ConnectionID) -> [Action] { handle(.received(message, from: id)) }

        func token(_ room: String, _ user: String, lifetime: TimeInterval = 600) -> String {
            (try? authority.issue(room: room, user: user, lifetime: lifetime, now: time.date)) ?? ""
        }

        /// Opens a connection and joins with a valid token.
        mutating func join(_ room: String, _ user: String) -> (ConnectionID, [Action]) {
            let id = open()
            return (id, send(.join(room: room, user: user, token: token(room, user)), from: id))
        }

        /// Lets `seconds` pass in 100 ms ticks; returns each action with the time it came at.
        mutating func advance(_ seconds: TimeInterval, each: (inout Harness, TimeInterval) -> Void = { _, _ in }) -> [(TimeInterval, Action)] {
            var out: [(TimeInterval, Action)] = []
            let steps = Int((seconds * 10).rounded())
            for step in 1...max(steps, 1) {
                time = time.adding(0.1)
                let elapsed = Double(step) / 10
                each(&self, elapsed)
                out += handle(.tick).map { (elapsed, $0) }
            }
            return out
        }
    }

    private func joined(_ actions: [Action]) -> ServerMessage.Joined? {
        for case let .send(.joined(j), _) in actions { return j }
        return nil
    }

    // MARK: Joining

    func testJoinListsTheOthersAndAnnouncesTheNewcomer() {
        var h = Harness()
        let (a, first) = h.join("r1", "alice")
        XCTAssertEqual(first, [.send(.joined(.init(you: "alice", room: "r1", participants: [])), to: a),
                               .log(.joined(room: "r1", user: "alice", participants: 1, resumed: false))])
        let (b, second) = h.join("r1", "bob")
        XCTAssertEqual(second, [.send(.joined(.init(you: "bob", room: "r1", participants: [ParticipantInfo(user: "alice")])), to: b),
                                .send(.participantJoined(user: "bob", muted: false), to: a),
                                .log(.joined(room: "r1", user: "bob", participants: 2, resumed: false))])
        let (_, third) = h.join("r1", "carol")
        XCTAssertEqual(joined(third)?.participants.map(\.user), ["alice", "bob"], "join order")
        XCTAssertEqual(h.directory.roomCount, 1)
        XCTAssertEqual(h.directory.participantCount, 3)
    }

    func testICEServersAreHandedOut() {
        let stun = ICEServer(urls: ["stun:stun.example.org:3478"])
        var h = Harness(.init(iceServers: [stun]))
        XCTAssertEqual(joined(h.join("r1", "alice").1)?.iceServers, [stun])
    }

    func testTokenAttacksAreRefusedWithTheirCodesAndNeverLogged() {
        var h = Harness()
        let other = TokenAuthority(secret: .random())
        let valid = h.token("r1", "mallory")
        let cases: [(String?, SignalingErrorCode)] = [
            (nil, .tokenMissing), ("", .tokenMissing), ("v1.abc", .tokenMalformed), ("garbage", .tokenMalformed),
            ((try? other.issue(room: "r1", user: "mallory", lifetime: 60, now: h.time.date)) ?? "", .tokenForged),
            ((try? h.authority.issue(room: "r1", user: "mallory", expiry: h.time.date.addingTimeInterval(-1))) ?? "", .tokenExpired),
            (h.token("r2", "mallory"), .tokenWrongRoom),
            (h.token("r1", "alice"), .tokenWrongUser),
        ]
        for (token, code) in cases {
            let id = h.open()
            let actions = h.send(.join(room: "r1", user: "mallory", token: token), from: id)
            XCTAssertEqual(actions.count, 3)
            guard case .send(.error(code, _), id)? = actions.first else { return XCTFail("\(code): \(actions)") }
            XCTAssertEqual(actions[1], .close(id, code: .policyViolation))
            XCTAssertEqual(actions[2], .log(.refused(room: "r1", user: "mallory", code: code)))
            if let token, !token.isEmpty {
                XCTAssertFalse(actions.contains { "\($0)".contains(token) }, "token leaked into \(actions)")
            }
            XCTAssertEqual(h.send(.ping(t: 1), from: id), [], "a refused connection is forgotten")
        }
        let (_, ok) = h.join("r1", "mallory")
        XCTAssertFalse("\(ok)".contains(valid))
        XCTAssertEqual(h.directory.participantCount, 1)
    }

    func testTokensExpireOnTheInjectedClock() {
        var h = Harness()
        let token = h.token("r1", "alice", lifetime: 60)
        h.time = h.time.adding(61)
        let id = h.open()
        XCTAssertEqual(h.send(.join(room: "r1", user: "alice", token: token), from: id).first,
                       .send(.error(code: .tokenExpired, message: TokenError.expired.message), to: id))
    }

    func testARoomHoldsEightByDefaultAndTheNinthGetsRoomFull() {
        var h = Harness()
        var held: ConnectionID?
        for n in 1...8 {
            let (id, _) = h.join("big", "u\(n)")
            if n == 8 { held = id }
        }
        _ = h.handle(.disconnected(held!)) // a held participant still takes a place
        let late = h.open()
        let actions = h.send(.join(room: "big", user: "u9", token: h.token("big", "u9")), from: late)
        XCTAssertEqual(actions, [.send(.error(code: .roomFull, message: "room big is full (8 participants)"), to: late),
                                 .close(late, code: .roomFull), .log(.refused(room: "big", user: "u9", code: .roomFull))])
        XCTAssertNotNil(joined(h.join("other", "u9").1), "other rooms are not affected")
        // The held participant may still come back to the full room.
        XCTAssertEqual(joined(h.join("big", "u8").1)?.resumed, true)
    }

    func testTheRoomSizeIsConfigurable() {
        var h = Harness(.init(maximumParticipants: 2))
        _ = h.join("r", "a"); _ = h.join("r", "b")
        let (_, third) = h.join("r", "c")
        guard case .send(.error(.roomFull, _), _)? = third.first else { return XCTFail("\(third)") }
    }

    func testJoiningTwiceOnOneConnectionIsRefused() {
        var h = Harness()
        let (a, _) = h.join("r1", "alice")
        XCTAssertEqual(h.send(.join(room: "r2", user: "alice", token: h.token("r2", "alice")), from: a),
                       [.send(.error(code: .alreadyJoined, message: "this connection is already in room r1; send leave first"), to: a)])
    }

    // MARK: Before joining

    func testMessagesBeforeJoinGetNotJoinedButPingIsAnswered() {
        var h = Harness()
        let id = h.open()
        for message in [ClientMessage.offer(to: "x", sdp: "v=0"), .answer(to: "x", sdp: "v=0"),
                        .ice(to: "x", mline: 0, candidate: ""), .mute(muted: true), .leave] {
            XCTAssertEqual(h.send(message, from: id), [.send(.error(code: .notJoined, message: "join a room first"), to: id)])
        }
        XCTAssertEqual(h.send(.ping(t: 42), from: id), [.send(.pong(t: 42), to: id)])
        XCTAssertEqual(h.send(.ping(t: nil), from: id), [.send(.pong(t: nil), to: id)])
    }

    func testAConnectionThatNeverJoinsIsClosed() {
        var h = Harness(.init(joinTimeout: 15))
        let id = h.open()
        let actions = h.advance(16) { h, elapsed in
            if elapsed.truncatingRemainder(dividingBy: 1) == 0 { _ = h.send(.ping(t: nil), from: id) } // pinging is not enough
        }
        XCTAssertEqual(actions.map(\.1), [.send(.error(code: .joinTimeout, message: "no join within 15 s"), to: id),
                                          .close(id, code: .timeout), .log(.closed(id, code: .joinTimeout))])
        XCTAssertEqual(actions.first?.0 ?? 0, 15.05, accuracy: 0.06)
    }

    func testMessagesFromUnknownConnectionsAreIgnored() {
        var h = Harness()
        let ghost = ConnectionID(999)
        XCTAssertEqual(h.send(.ping(t: nil), from: ghost), [])
        XCTAssertEqual(h.handle(.invalid(SignalingError(.badMessage, "x"), from: ghost)), [])
        XCTAssertEqual(h.handle(.disconnected(ghost)), [])
    }

    // MARK: Relay

    func testOfferAnswerAndICEGoOnlyToTheNamedPeerInTheSameRoom() {
        var h = Harness()
        let (a, _) = h.join("r1", "alice")
        let (b, _) = h.join("r1", "bob")
        let (c, _) = h.join("r2", "carol")
        XCTAssertEqual(h.send(.offer(to: "alice", sdp: "v=0\r\nm=audio 9 RTP/SAVPF 111\r\n"), from: b),
                       [.send(.offer(from: "bob", sdp: "v=0\r\nm=audio 9 RTP/SAVPF 111\r\n"), to: a)])
        XCTAssertEqual(h.send(.answer(to: "bob", sdp: "v=0"), from: a), [.send(.answer(from: "alice", sdp: "v=0"), to: b)])
        XCTAssertEqual(h.send(.ice(to: "bob", mline: 1, candidate: "candidate:x"), from: a),
                       [.send(.ice(from: "alice", mline: 1, candidate: "candidate:x"), to: b)])
        for (target, sender) in [("carol", a), ("nobody", a), ("alice", a), ("bob", c)] {
            let actions = h.send(.offer(to: target, sdp: "v=0"), from: sender)
            guard case .send(.error(.unknownPeer, _), sender)? = actions.first, actions.count == 1 else {
                return XCTFail("\(target): \(actions)")
            }
        }
    }

    func testSessionDescriptionsWithVideoAreRefused() {
        var h = Harness()
        let (_, _) = h.join("r1", "alice")
        let (b, _) = h.join("r1", "bob")
        // The plain spelling, and spellings a check for the text "m=video" misses but a lenient SDP
        // parser (trimming, lower-casing, splitting on any line separator) reads as video.
        let spellings = ["m=video", " m=video", "\tm=video", "M=video", "m= video", "m =video", "m=VIDEO", "a=x\rm=video", "a=x\u{2028}m=video"]
        let descriptions = ["v=0\nm=audio 9 RTP/AVP 0\nm=video 9 RTP/AVP 96\n", "m=video 0 RTP/AVP 96", "m=image 9 udptl t38\r\n"]
            + spellings.map { "v=0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\n\($0) 9 UDP/TLS/RTP/SAVPF 96\r\n" }
        for sdp in descriptions {
            XCTAssertEqual(h.send(.answer(to: "alice", sdp: sdp), from: b).map { action -> SignalingErrorCode? in
                if case .send(.error(let code, _), b) = action { code } else { nil }
            }, [.videoNotAllowed], sdp)
        }
        XCTAssertEqual(h.send(.offer(to: "alice", sdp: "v=0\r\na=x:m=video\r\nm=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\n"), from: b).count, 1)
    }

    /// A gap between ticks beyond `pauseTolerance` is the server's own pause: nobody is dropped
    /// for it, and silences, join deadlines and grace periods resume where they were.
    func testTheServersOwnPauseIsNotCountedAgainstTheClients() {
        var h = Harness()
        let (a, _) = h.join("r", "alice")
        let (b, _) = h.join("r", "bob")
        let waiting = h.open()
        // A pause before the first tick counts from the first event.
        h.time = h.time.adding(6)
        XCTAssertEqual(h.handle(.tick), [], "a pause before any tick")
        for id in [a, b, waiting] { _ = h.send(.ping(t: nil), from: id) }
        _ = h.handle(.disconnected(b)) // bob drops: held for 3 s from now
        for pause in [5.0, 30.0] {
            h.time = h.time.adding(pause)
            XCTAssertEqual(h.handle(.tick), [], "after a \(pause) s pause")
        }
        XCTAssertTrue(h.directory.isHeld(user: "bob", in: "r"))
        // Of each pause, the tolerance (1 s) counts: 2 s of alice's 4 s silence and of bob's 3 s
        // grace are gone, and 3 s of the waiting connection's 15 s to join (6 s before the first pause).
        let after = h.advance(20) { h, elapsed in
            if elapsed.truncatingRemainder(dividingBy: 1) == 0 { _ = h.send(.ping(t: nil), from: waiting) }
        }
        func when(_ match: (RoomDirectory.Action) -> Bool) -> TimeInterval? { after.first { match($0.1) }?.0 }
        XCTAssertEqual(when { if case .send(.error(.pingTimeout, _), a) = $0 { true } else { false } } ?? 0, 2.1, accuracy: 0.01)
        XCTAssertEqual(when { $0 == .log(.left(room: "r", user: "bob", reason: .timeout)) } ?? 0, 1.05, accuracy: 0.06)
        XCTAssertEqual(when { if case .send(.error(.joinTimeout, _), waiting) = $0 { true } else { false } } ?? 0, 15 - 1 - 1 - 1 + 0.1, accuracy: 0.01)
        // Without a tolerance every gap counts.
        var strict = Harness(.init(pauseTolerance: nil))
        let (c, _) = strict.join("r", "carol")
        strict.time = strict.time.adding(5)
        XCTAssertTrue(strict.handle(.tick).contains(.close(c, code: .timeout)))
    }

    func testRelaysToAHeldParticipantAreDropped() {
        var h = Harness()
        let (a, _) = h.join("r1", "alice")
        let (b, _) = h.join("r1", "bob")
        _ = h.handle(.disconnected(b))
        XCTAssertTrue(h.directory.isHeld(user: "bob", in: "r1"))
        XCTAssertEqual(h.send(.ice(to: "bob", mline: 0, candidate: ""), from: a), [])
    }

    // MARK: Mute and leave

    func testMuteIsBroadcastToTheOthersWhenItChanges() {
        var h = Harness()
        let (a, _) = h.join("r1", "alice")
        let (b, _) = h.join("r1", "bob")
        let (c, _) = h.join("r1", "carol")
        let (d, _) = h.join("r2", "dave")
        XCTAssertEqual(h.send(.mute(muted: true), from: b), [.send(.muteChanged(user: "bob", muted: true), to: a),
                                                             .send(.muteChanged(user: "bob", muted: true), to: c)])
        XCTAssertEqual(h.send(.mute(muted: true), from: b), [], "no change, no news")
        XCTAssertEqual(h.directory.participants(in: "r1").first { $0.user == "bob" }?.muted, true)
        XCTAssertEqual(joined(h.join("r1", "erin").1)?.participants.first { $0.user == "bob" }?.muted, true)
        XCTAssertFalse(h.send(.mute(muted: false), from: b).contains { action in
            if case .send(_, d) = action { true } else { false }
        })
    }

    func testLeaveTellsTheOthersAndTheConnectionMayJoinAgain() {
        var h = Harness()
        let (a, _) = h.join("r1", "alice")
        let (b, _) = h.join("r1", "bob")
        XCTAssertEqual(h.send(.leave, from: b), [.send(.participantLeft(user: "bob", reason: .left), to: a),
                                                 .log(.left(room: "r1", user: "bob", reason: .left))])
        XCTAssertEqual(h.directory.participantCount, 1)
        XCTAssertEqual(h.send(.leave, from: b).first, .send(.error(code: .notJoined, message: "join a room first"), to: b))
        let again = h.send(.join(room: "r2", user: "bob", token: h.token("r2", "bob")), from: b)
        XCTAssertEqual(joined(again)?.room, "r2")
        _ = h.send(.leave, from: a)
        XCTAssertEqual(h.directory.roomCount, 1, "an empty room disappears")
    }

    // MARK: Drops, silence, reconnection

    func testADroppedParticipantIsHeldThenReportedAsTimeoutWithinFiveSeconds() {
        var h = Harness()
        let (a, _) = h.join("r1", "alice")
        let (b, _) = h.join("r1", "bob")
        XCTAssertEqual(h.handle(.disconnected(b)), [.log(.dropped(room: "r1", user: "bob", grace: 3))])
        let later = h.advance(6) { h, elapsed in
            if elapsed.truncatingRemainder(dividingBy: 1) == 0 { _ = h.send(.ping(t: nil), from: a) }
        }
        XCTAssertEqual(later.map(\.1), [.send(.participantLeft(user: "bob", reason: .timeout), to: a),
                                        .log(.left(room: "r1", user: "bob", reason: .timeout))])
        let at = later.first?.0 ?? 99
        XCTAssertGreaterThanOrEqual(at, 3)
        XCTAssertLessThanOrEqual(at, 5)
    }

    func testASilentConnectionIsDroppedAndReportedWithinFiveSecondsOfItsLastMessage() {
        var h = Harness()
        let (a, _) = h.join("r1", "alice")
        let (b, _) = h.join("r1", "bob")
        // Both ping every second for a minute: nobody times out.
        let quiet = h.advance(60) { h, elapsed in
            if elapsed.truncatingRemainder(dividingBy: 1) == 0 {
                _ = h.send(.ping(t: nil), from: a)
                _ = h.send(.ping(t: nil), from: b)
            }
        }
        XCTAssertTrue(quiet.isEmpty, "\(quiet)")
        // Bob falls silent (half-open connection); alice keeps pinging.
        let actions = h.advance(6) { h, elapsed in
            if elapsed.truncatingRemainder(dividingBy: 1) == 0 { _ = h.send(.ping(t: nil), from: a) }
        }
        XCTAssertEqual(actions.map(\.1), [
            .send(.error(code: .pingTimeout, message: "nothing received for 4 s: send ping every second"), to: b),
            .close(b, code: .timeout),
            .log(.dropped(room: "r1", user: "bob", grace: 3)),
            .send(.participantLeft(user: "bob", reason: .timeout), to: a),
            .log(.left(room: "r1", user: "bob", reason: .timeout)),
        ])
        let at = actions.last?.0 ?? 99
        XCTAssertGreaterThan(at, 4)
        XCTAssertLessThanOrEqual(at, 5)
    }

    func testReconnectingWithinTheGraceResumesWithoutTellingTheOthers() {
        var h = Harness()
        let (a, _) = h.join("r1", "alice")
        let (b, _) = h.join("r1", "bob")
        _ = h.send(.mute(muted: true), from: b)
        _ = h.handle(.disconnected(b))
        _ = h.advance(2) { h, _ in _ = h.send(.ping(t: nil), from: a) }
        let (b2, actions) = h.join("r1", "bob")
        XCTAssertEqual(actions, [.send(.joined(.init(you: "bob", room: "r1", muted: true, resumed: true,
                                                     participants: [ParticipantInfo(user: "alice")])), to: b2),
                                 .log(.joined(room: "r1", user: "bob", participants: 2, resumed: true))])
        let later = h.advance(10) { h, elapsed in
            if elapsed.truncatingRemainder(dividingBy: 1) == 0 {
                _ = h.send(.ping(t: nil), from: a)
                _ = h.send(.ping(t: nil), from: b2)
            }
        }
        XCTAssertTrue(later.isEmpty, "\(later)")
        XCTAssertFalse(h.directory.isHeld(user: "bob", in: "r1"))
    }

    func testTheSameUserOnANewConnectionReplacesTheOldOne() {
        var h = Harness()
        let (a, _) = h.join("r1", "alice")
        let (old, _) = h.join("r1", "bob")
        let (new, actions) = h.join("r1", "bob")
        XCTAssertEqual(actions, [.send(.error(code: .replaced, message: "another connection joined as bob in r1"), to: old),
                                 .close(old, code: .replaced),
                                 .send(.joined(.init(you: "bob", room: "r1", resumed: true, participants: [ParticipantInfo(user: "alice")])), to: new),
                                 .log(.joined(room: "r1", user: "bob", participants: 2, resumed: true))])
        XCTAssertEqual(h.handle(.disconnected(old)), [], "the old connection's close changes nothing")
        XCTAssertEqual(h.send(.offer(to: "bob", sdp: "v=0"), from: a), [.send(.offer(from: "alice", sdp: "v=0"), to: new)])
        XCTAssertEqual(h.send(.ping(t: nil), from: old), [])
    }

    // MARK: Hostile input, shutdown

    func testAnInvalidMessageClosesTheConnectionAndKicksItsParticipant() {
        var h = Harness()
        let (a, _) = h.join("r1", "alice")
        let (b, _) = h.join("r1", "bob")
        let error = SignalingError(.messageTooLarge, "too big")
        XCTAssertEqual(h.handle(.invalid(error, from: b)), [
            .send(.error(code: .messageTooLarge, message: "too big"), to: b), .close(b, code: .tooBig),
            .send(.participantLeft(user: "bob", reason: .kicked), to: a), .log(.kicked(room: "r1", user: "bob", code: .messageTooLarge)),
        ])
        let stranger = h.open()
        XCTAssertEqual(h.handle(.invalid(SignalingError(.unknownType, "?"), from: stranger)), [
            .send(.error(code: .unknownType, message: "?"), to: stranger), .close(stranger, code: .protocolError),
            .log(.closed(stranger, code: .unknownType)),
        ])
    }

    func testShutdownClosesEveryone() {
        var h = Harness()
        let (a, _) = h.join("r1", "alice")
        let idle = h.open()
        XCTAssertEqual(h.handle(.shutdown), [
            .send(.error(code: .serverShutdown, message: "the server is shutting down"), to: a), .close(a, code: .goingAway),
            .send(.error(code: .serverShutdown, message: "the server is shutting down"), to: idle), .close(idle, code: .goingAway),
        ])
        XCTAssertEqual(h.directory.participantCount, 0)
        XCTAssertEqual(h.directory.connectionCount, 0)
    }

    func testLogLinesAreConcise() {
        XCTAssertEqual("\(RoomActivity.joined(room: "r", user: "u", participants: 2, resumed: false))", "join room=r user=u participants=2")
        XCTAssertEqual("\(RoomActivity.left(room: "r", user: "u", reason: .timeout))", "leave room=r user=u reason=timeout")
        XCTAssertEqual("\(RoomActivity.refused(room: "r", user: "u", code: .tokenForged))", "refuse room=r user=u code=token_forged")
    }

    // MARK: Random walks

    /// Thousands of random events; after each, every open joined connection's picture of its room
    /// (from `joined`, `participantJoined`, `participantLeft`) must match the directory, rooms stay
    /// within size, and nothing is sent to a connection that is closed.
    func testRandomWalksKeepEveryClientsViewOfItsRoomTrue() {
        var seen: [String: Int] = [:]
        defer {
            // The walks must have gone everywhere worth going.
            for kind in ["joined", "resumed", "room_full", "token_wrong_user", "left", "timeout", "kicked", "ping_timeout", "replaced", "offer"] {
                XCTAssertGreaterThan(seen[kind, default: 0], 0, "never saw \(kind): \(seen)")
            }
        }
        for seed in 1...20 as ClosedRange<UInt64> {
            var random = SplitMix(seed: seed)
            var h = Harness(.init(maximumParticipants: 3))
            var open: Set<ConnectionID> = []
            var views: [ConnectionID: (room: String, user: String, others: Set<String>)] = [:]
            let rooms = ["r1", "r2"], users = ["ann", "ben", "cat", "dan", "eve"]

            for step in 0..<400 {
                var actions: [Action] = []
                let pick = random.next(below: 100)
                let id = open.isEmpty ? nil : open.sorted()[random.next(below: open.count)]
                switch pick {
                case 0..<15:
                    let new = h.open(); open.insert(new)
                case 15..<45:
                    guard let id else { continue }
                    let room = rooms[random.next(below: rooms.count)], user = users[random.next(below: users.count)]
                    let token = random.next(below: 10) == 0 ? h.token(room, "zed") : h.token(room, user)
                    actions = h.send(.join(room: room, user: user, token: token), from: id)
                case 45..<55:
                    guard let id else { continue }
                    actions = h.send(.leave, from: id)
                    if case .send(.error(.notJoined, _), _)? = actions.first {} else { views[id] = nil }
                case 55..<65:
                    guard let id else { continue }
                    actions = h.send(.mute(muted: random.next(below: 2) == 0), from: id)
                case 65..<75:
                    guard let id else { continue }
                    actions = h.send(.offer(to: users[random.next(below: users.count)], sdp: "v=0"), from: id)
                case 75..<82:
                    guard let id else { continue }
                    actions = h.handle(.disconnected(id)); open.remove(id); views[id] = nil
                case 82..<85:
                    guard let id else { continue }
                    actions = h.handle(.invalid(SignalingError(.badMessage, "x"), from: id))
                case 85..<95:
                    for other in open where random.next(below: 4) != 0 { _ = h.send(.ping(t: nil), from: other) }
                    h.time = h.time.adding(Double(random.next(below: 20)) / 10)
                    actions = h.handle(.tick)
                default:
                    h.time = h.time.adding(Double(random.next(below: 60)) / 10)
                    actions = h.handle(.tick)
                }

                for action in actions {
                    switch action {
                    case .send(.joined(let j), _): seen[j.resumed ? "resumed" : "joined", default: 0] += 1
                    case .send(.error(let code, _), _): seen[code.rawValue, default: 0] += 1
                    case .send(.participantLeft(_, let reason), _): seen[reason.rawValue, default: 0] += 1
                    case .send(.offer, _): seen["offer", default: 0] += 1
                    default: break
                    }
                    switch action {
                    case let .send(message, to):
                        XCTAssertTrue(open.contains(to), "seed \(seed) step \(step): send to closed \(to): \(message)")
                        switch message {
                        case .joined(let j): views[to] = (j.room, j.you, Set(j.participants.map(\.user)))
                        case let .participantJoined(user, _): views[to]?.others.insert(user)
                        case let .participantLeft(user, _): views[to]?.others.remove(user)
                        default: break
                        }
                    case let .close(closed, _):
                        XCTAssertTrue(open.contains(closed), "seed \(seed) step \(step): double close \(closed)")
                        open.remove(closed); views[closed] = nil
                    case .abort(let cut):
                        XCTAssertFalse(open.contains(cut), "seed \(seed) step \(step): abort before close \(cut)")
                    case .log:
                        break
                    case .broker(let command):
                        XCTFail("seed \(seed) step \(step): a directory without a broker asked one: \(command)")
                    }
                }
                for (connection, view) in views {
                    let actual = Set(h.directory.participants(in: view.room).map(\.user)).subtracting([view.user])
                    XCTAssertEqual(view.others, actual, "seed \(seed) step \(step): \(connection) as \(view.user) in \(view.room)")
                }
                for room in rooms { XCTAssertLessThanOrEqual(h.directory.participants(in: room).count, 3) }
                XCTAssertEqual(h.directory.connectionCount, open.count, "seed \(seed) step \(step)")
            }
        }
    }
}

/// The random walks' generator: VeilCore's SplitMix64, drawing the same numbers as before.
typealias SplitMix = SplitMix64

extension SplitMix64 {
    mutating func nextUInt64() -> UInt64 { next() }
    mutating func next(below n: Int) -> Int { Int(next() % UInt64(n)) }
}
