import Foundation
import VeilCore
import VeilServer
import XCTest

/// The directory's limits on hostile clients, without I/O: connection caps, message, byte and join
/// rates, and slow readers (from transport readings). Time is a number.
final class RoomDirectoryLimitsTests: XCTestCase {
    typealias Harness = RoomDirectoryTests.Harness
    typealias Action = RoomDirectory.Action

    private func errorCodes(_ actions: [Action]) -> [SignalingErrorCode] {
        actions.compactMap { if case .send(.error(let code, _), _) = $0 { code } else { nil } }
    }

    // MARK: Connections

    func testBeyondTheCapsTheLongestWaitingConnectionMakesRoomOrTheNewcomerIsRefused() {
        var h = Harness(.init(maximumConnections: 4, maximumUnjoinedConnections: 2))
        let a = h.open()
        h.time = h.time.adding(1)
        let b = h.open()
        // A third connection that has not joined is one too many waiting: the one waiting longest goes.
        let c = ConnectionID(100)
        XCTAssertEqual(h.handle(.connected(c)), [
            .send(.error(code: .serverFull, message: "the server is full and this connection had not joined a room: join right after connecting"), to: a),
            .close(a, code: .serverFull), .log(.closed(a, code: .serverFull))])
        XCTAssertEqual(h.send(.ping(t: nil), from: a), [], "an evicted connection is not kept")
        XCTAssertEqual(h.send(.ping(t: nil), from: c), [.send(.pong(t: nil), to: c)])
        // Once they join, others may wait; the total stays capped.
        for (id, user) in [(b, "bob"), (c, "carol")] {
            XCTAssertEqual(errorCodes(h.send(.join(room: "r", user: user, token: h.token("r", user)), from: id)), [])
        }
        let waiting = h.open()
        h.time = h.time.adding(1)
        let newer = h.open()
        XCTAssertEqual(h.directory.connectionCount, 4)
        let e = ConnectionID(101)
        XCTAssertEqual(errorCodes(h.handle(.connected(e))), [.serverFull], "the oldest of those waiting makes room")
        XCTAssertEqual(h.send(.ping(t: nil), from: waiting), [])
        XCTAssertEqual(errorCodes(h.send(.join(room: "r", user: "eve", token: h.token("r", "eve")), from: e)), [])
        XCTAssertEqual(errorCodes(h.send(.join(room: "r", user: "nina", token: h.token("r", "nina")), from: newer)), [])
        // Full of participants: a newcomer is refused, nobody in a room is pushed out.
        let f = ConnectionID(102)
        let refused = h.handle(.connected(f))
        XCTAssertEqual(errorCodes(refused), [.serverFull])
        XCTAssertEqual(refused.first, .send(.error(code: .serverFull, message: "the server has its maximum of 4 connections: try again later"), to: f))
        XCTAssertEqual(h.directory.participantCount, 4)
        // A closed connection frees its place.
        _ = h.handle(.disconnected(newer))
        XCTAssertEqual(h.handle(.connected(f)), [])
    }

    func testTheUnjoinedCapDefaultsToHalf() {
        XCTAssertEqual(RoomDirectory.Configuration().maximumConnections, 4096)
        XCTAssertEqual(RoomDirectory.Configuration().maximumUnjoinedConnections, 2048)
        XCTAssertEqual(RoomDirectory.Configuration(maximumConnections: 10).maximumUnjoinedConnections, 5)
    }

    // MARK: Message rate

    /// What a real client sends when joining a full default room (one offer and 25 candidates to
    /// each of 7 others at once, then a ping a second and a few mutes) stays within the limit.
    func testALegitimateCallStartStaysWithinTheMessageRate() {
        var h = Harness()
        var others: [ConnectionID] = []
        for n in 1...7 { others.append(h.join("r", "u\(n)").0) }
        let (me, _) = h.join("r", "newcomer")
        var actions: [Action] = []
        for n in 1...7 {
            actions += h.send(.offer(to: "u\(n)", sdp: "v=0"), from: me)
            for c in 0..<25 { actions += h.send(.ice(to: "u\(n)", mline: 0, candidate: "candidate:\(c)"), from: me) }
        }
        actions += h.advance(30) { h, elapsed in
            if elapsed.truncatingRemainder(dividingBy: 1) == 0 {
                for id in others + [me] { _ = h.send(.ping(t: nil), from: id) }
                if elapsed.truncatingRemainder(dividingBy: 5) == 0 { _ = h.send(.mute(muted: Int(elapsed) % 10 == 0), from: me) }
            }
        }.map(\.1)
        XCTAssertEqual(errorCodes(actions), [])
        XCTAssertEqual(h.directory.participantCount, 8)
    }

    func testAFloodIsRateLimitedAndItsSenderKicked() {
        var h = Harness()
        let (a, _) = h.join("r", "alice")
        let (b, _) = h.join("r", "bob")
        let limit = RoomDirectory.RateLimit.messages(roomSize: 8)
        XCTAssertEqual(limit, .init(perSecond: 50, burst: 270))
        var actions: [Action] = []
        var sent = 0
        while errorCodes(actions).isEmpty, sent < 1000 {
            actions = h.send(.ping(t: nil), from: b)
            sent += 1
        }
        XCTAssertEqual(sent, 270 + 1, "the join was charged to the allowance before joining; a participant's burst starts full")
        XCTAssertEqual(actions, [
            .send(.error(code: .rateLimited, message: "more than 50/s, burst 270 messages: slow down"), to: b),
            .close(b, code: .policyViolation),
            .send(.participantLeft(user: "bob", reason: .kicked), to: a),
            .log(.kicked(room: "r", user: "bob", code: .rateLimited))])
        XCTAssertEqual(h.send(.ping(t: nil), from: b), [], "forgotten")
        // The bucket refills: 50 per second is fine for someone else, for ever.
        let quiet = h.advance(10) { h, _ in for _ in 0..<5 { _ = h.send(.ping(t: nil), from: a) } }
        XCTAssertEqual(errorCodes(quiet.map(\.1)), [])
    }

    func testAJoinFloodOnOneConnectionIsRateLimited() {
        var h = Harness()
        let (watcher, _) = h.join("r", "watcher")
        let id = h.open()
        var codes: [SignalingErrorCode] = []
        var joins = 0
        while !codes.contains(.rateLimited), joins < 50 {
            codes += errorCodes(h.send(.join(room: "r", user: "churn", token: h.token("r", "churn")), from: id))
            codes += errorCodes(h.send(.leave, from: id))
            joins += 1
        }
        XCTAssertEqual(joins, 6, "a burst of 5 joins, the 6th is refused")
        XCTAssertEqual(codes, [.rateLimited])
        XCTAssertEqual(h.directory.participants(in: "r").map(\.user), ["watcher"])
        // join after join without leave counts too (already_joined is not free)
        let other = h.open()
        var repeated: [SignalingErrorCode] = []
        for _ in 0..<6 { repeated += errorCodes(h.send(.join(room: "r2", user: "x", token: h.token("r2", "x")), from: other)) }
        XCTAssertEqual(repeated, [.alreadyJoined, .alreadyJoined, .alreadyJoined, .alreadyJoined, .rateLimited])
        withExtendedLifetime(watcher) {}
    }

    // MARK: Bytes and backlog

    func testBytesBeyondTheByteRateAreRateLimited() {
        var h = Harness(.init(byteRate: .init(perSecond: 1000, burst: 10_000)))
        let (a, _) = h.join("r", "alice")
        XCTAssertEqual(h.handle(.transport(a, .init(bytesReceived: 9_000, bytesAcknowledged: 0, backlogBytes: 0))), [])
        h.time = h.time.adding(1) // +1000 allowed
        XCTAssertEqual(h.handle(.transport(a, .init(bytesReceived: 11_000, bytesAcknowledged: 0, backlogBytes: 0))), [])
        let actions = h.handle(.transport(a, .init(bytesReceived: 11_500, bytesAcknowledged: 0, backlogBytes: 0)))
        XCTAssertEqual(errorCodes(actions), [.rateLimited])
        XCTAssertEqual(actions[1], .close(a, code: .policyViolation))
        XCTAssertEqual(h.directory.participantCount, 0)
    }

    /// WebSocket control frames (pings and pongs) are signs of life and count as messages.
    func testControlFramesAreSignsOfLifeAndCountAsMessages() {
        var h = Harness(.init(messageRate: .init(perSecond: 1, burst: 3)))
        let (a, _) = h.join("r", "alice")
        let (m, _) = h.join("r", "mallory")
        _ = h.advance(6) { h, elapsed in
            if elapsed.truncatingRemainder(dividingBy: 1) == 0 { XCTAssertEqual(h.handle(.controlFrame(m)), []) }
            if elapsed.truncatingRemainder(dividingBy: 1) == 0 { _ = h.send(.ping(t: nil), from: a) }
        }
        XCTAssertEqual(h.directory.participants(in: "r").count, 2, "with control frames only, mallory is not silent after 6 s (the silence timeout is 4 s)")
        var actions: [RoomDirectory.Action] = []
        for _ in 0..<5 { actions += h.handle(.controlFrame(m)) }
        XCTAssertEqual(errorCodes(actions), [.rateLimited])
        XCTAssertEqual(h.directory.participants(in: "r").map(\.user), ["alice"])
        XCTAssertEqual(h.handle(.controlFrame(m)), [], "news only once")
    }

    func testABacklogBeyondTheLimitClosesAtOnceAndCutsTheTransport() {
        var h = Harness(.init(maximumBacklogBytes: 100_000))
        let (a, _) = h.join("r", "alice")
        let (b, _) = h.join("r", "bob")
        XCTAssertEqual(h.handle(.transport(b, .init(bytesReceived: 10, bytesAcknowledged: 500, backlogBytes: 100_000))), [])
        let actions = h.handle(.transport(b, .init(bytesReceived: 10, bytesAcknowledged: 500, backlogBytes: 100_001)))
        XCTAssertEqual(errorCodes(actions), [.slowConsumer])
        XCTAssertEqual(Array(actions.dropFirst()), [
            .close(b, code: .policyViolation), .abort(b),
            .send(.participantLeft(user: "bob", reason: .kicked), to: a), .log(.kicked(room: "r", user: "bob", code: .slowConsumer))])
    }

    func testAReaderThatStallsIsClosedAfterTheStallTimeoutButOneThatDrainsIsNot() {
        var h = Harness(.init(stallTimeout: 5))
        let (slow, _) = h.join("r", "slow")
        let (fine, _) = h.join("r", "fine")
        var acknowledged: UInt64 = 0
        var closedAt: TimeInterval?
        let actions = h.advance(8) { h, elapsed in
            // Both ping; both have 50 KB waiting; only `fine` acknowledges something each time.
            if elapsed.truncatingRemainder(dividingBy: 1) == 0 {
                _ = h.send(.ping(t: nil), from: slow); _ = h.send(.ping(t: nil), from: fine)
            }
            acknowledged += 1000
            let outcome = h.handle(.transport(slow, .init(bytesReceived: 0, bytesAcknowledged: 7, backlogBytes: 50_000)))
                + h.handle(.transport(fine, .init(bytesReceived: 0, bytesAcknowledged: acknowledged, backlogBytes: 50_000)))
            if closedAt == nil, !outcome.isEmpty { closedAt = elapsed }
            XCTAssertTrue(outcome.allSatisfy { action in
                if case .send(.error, fine) = action { return false }
                if case .close(fine, _) = action { return false }
                return true
            }, "\(outcome)")
        }
        withExtendedLifetime(actions) {}
        XCTAssertEqual(closedAt ?? 0, 5.1, accuracy: 0.11, "5 s after the first stalled reading")
        XCTAssertEqual(h.directory.participants(in: "r").map(\.user), ["fine"])
        // An idle connection with nothing waiting never stalls.
        let (idle, _) = h.join("r", "idle")
        let later = h.advance(10) { h, elapsed in
            if elapsed.truncatingRemainder(dividingBy: 1) == 0 { _ = h.send(.ping(t: nil), from: idle); _ = h.send(.ping(t: nil), from: fine) }
            _ = h.handle(.transport(idle, .init(bytesReceived: 0, bytesAcknowledged: 3, backlogBytes: 0)))
        }
        XCTAssertEqual(errorCodes(later.map(\.1)), [])
    }
}
