import Foundation
import Synchronization
@testable import VeilCall
import VeilCore
import VeilServer
import XCTest

/// Two participants in one room through a real room server on loopback and real WebRTC.
final class CallSessionTests: XCTestCase {
    /// Collects a session's events for polling assertions.
    final class Recorder: @unchecked Sendable {
        let events = Mutex<[CallSession.Event]>([])
        let frames = Mutex<[ExpressionFrame]>([])
        init(_ session: CallSession) {
            Task { for await e in session.events { self.events.withLock { $0.append(e) } } }
            Task { for await f in session.expressionFrames { self.frames.withLock { $0.append(f.frame.frame) } } }
        }
        func has(_ predicate: (CallSession.Event) -> Bool) -> Bool { events.withLock { $0.contains(where: predicate) } }
        func count(_ predicate: (CallSession.Event) -> Bool) -> Int { events.withLock { $0.filter(predicate).count } }
    }

    func waitUntil(_ what: String, timeout: TimeInterval, _ condition: () -> Bool) {
        let deadline = Date().addingTimeInterval(timeout)
        while !condition() {
            if Date() > deadline { XCTFail("timed out after \(timeout) s waiting for \(what)"); return }
            Thread.sleep(forTimeInterval: 0.02)
        }
    }

    func makeServer(secret: ServerSecret, port: Int = 0) throws -> (RoomServer, URL) {
        let server = RoomServer(configuration: .init(secret: secret, port: port))
        return (server, try server.start())
    }

    func session(_ user: String, url: URL, secret: ServerSecret, tone: Double,
                 expressionChannelTimeout: TimeInterval = 10) throws -> CallSession {
        let token = try TokenAuthority(secret: secret).issue(room: "lobby", user: user, lifetime: 600)
        var configuration = CallSession.Configuration(server: url, room: "lobby", user: user, token: token,
                                                      audioInput: .testTone(frequency: tone))
        configuration.expressionChannelTimeout = expressionChannelTimeout
        configuration.reconnection.initialDelayMicros = 100_000
        configuration.reconnection.maximumDelayMicros = 1_000_000
        return CallSession(configuration: configuration)
    }

    func frame(_ i: Int, at time: UInt64) -> ExpressionFrame {
        var e = VeilCore.Expression()
        e[.jawOpen] = Float(i % 10) / 10
        e[.eyeBlinkLeft] = i % 7 == 0 ? 1 : 0
        e.headPose = HeadPose(yaw: Float(i % 20) - 10, pitch: 2, roll: -1)
        return ExpressionFrame(sequence: UInt32(i), captureTimeMicros: time, state: .tracked, expression: e)
    }

    func testTwoParticipantsTalkMuteSurviveAServerRestartAndLeave() throws {
        try PeerConnection.prepare()
        let secret = ServerSecret.random()
        var (server, url) = try makeServer(secret: secret)
        let alice = try session("alice", url: url, secret: secret, tone: 440)
        let bob = try session("bob", url: url, secret: secret, tone: 660)
        let a = Recorder(alice), b = Recorder(bob)
        alice.start()
        waitUntil("alice joined", timeout: 5) { a.has { if case .joined = $0 { return true }; return false } }
        bob.start()
        waitUntil("both peers connected", timeout: 10) {
            a.has { if case .peerState("bob", .connected) = $0 { return true }; return false }
                && b.has { if case .peerState("alice", .connected) = $0 { return true }; return false }
        }
        XCTAssertTrue(a.has { if case .participantJoined("bob") = $0 { return true }; return false })

        // Expressions flow and decode to what was sent.
        waitUntil("data channels open", timeout: 5) { alice.participants == ["bob"] && bob.participants == ["alice"] }
        Thread.sleep(forTimeInterval: 0.3)
        var sent: [ExpressionFrame] = []
        for i in 0..<60 {
            let f = frame(i, at: alice.mediaTimeMicros)
            sent.append(f)
            alice.send(f)
            Thread.sleep(forTimeInterval: 1.0 / 30)
        }
        waitUntil("bob receives alice's frames", timeout: 5) { b.frames.withLock { $0.count } >= 57 }
        // Bob receives them on the connection's clock; alice knows it.
        let aliceClock = try XCTUnwrap(alice.clock(for: "bob"))
        let received = b.frames.withLock { $0 }.map { aliceClock.original(of: $0) }
        for r in received {
            guard let s = sent.first(where: { $0.sequence == r.sequence }) else { XCTFail("unknown frame \(r.sequence)"); continue }
            XCTAssertEqual(r.expression[.jawOpen], s.expression[.jawOpen], accuracy: 1.0 / 255)
            XCTAssertEqual(r.expression.headPose.yaw, s.expression.headPose.yaw, accuracy: 0.01)
        }
        // The jitter buffer hands bob something to draw for alice.
        XCTAssertNotNil(bob.playout(for: "alice", at: bob.mediaTimeMicros))

        // Mute reaches the other side.
        alice.setMuted(true)
        waitUntil("bob hears that alice muted", timeout: 3) { b.has { if case .muteChanged("alice", true) = $0 { return true }; return false } }
        XCTAssertTrue(bob.isMuted("alice"))

        // The server restarts mid-call: both rejoin and expressions flow again within 10 s.
        server.stop()
        waitUntil("both notice", timeout: 5) {
            a.has { if case .connection(.reconnecting) = $0 { return true }; return false }
                && b.has { if case .connection(.reconnecting) = $0 { return true }; return false }
        }
        let port = url.port ?? 0
        let restartedAt = Date()
        (server, _) = try makeServer(secret: secret, port: port)
        waitUntil("both rejoin", timeout: 10) {
            a.count { if case .joined = $0 { return true }; return false } >= 2
                && b.count { if case .joined = $0 { return true }; return false } >= 2
        }
        let before = b.frames.withLock { $0.count }
        let flowing = Date().addingTimeInterval(10 - Date().timeIntervalSince(restartedAt))
        var i = 100
        while b.frames.withLock({ $0.count }) < before + 10, Date() < flowing {
            alice.send(frame(i, at: alice.mediaTimeMicros)); i += 1
            Thread.sleep(forTimeInterval: 1.0 / 30)
        }
        XCTAssertGreaterThanOrEqual(b.frames.withLock { $0.count }, before + 10, "expressions did not flow again within 10 s of the restart")

        // Leaving is reported as left.
        let left = DispatchSemaphore(value: 0)
        Task { await bob.leave(); left.signal() }
        XCTAssertEqual(left.wait(timeout: .now() + 5), .success)
        waitUntil("alice sees bob leave", timeout: 5) {
            a.has { if case .participantLeft("bob", .left) = $0 { return true }; return false }
        }
        let done = DispatchSemaphore(value: 0)
        Task { await alice.leave(); done.signal() }
        _ = done.wait(timeout: .now() + 5)
        server.stop()
    }

    /// alice and bob in one room of a real server, alice sending expressions at 30 fps from a
    /// thread of her own; returns once bob receives them. `end()` stops the sending and the server.
    final class TalkingCall: @unchecked Sendable {
        let server: RoomServer
        let alice: CallSession, bob: CallSession
        let a: Recorder, b: Recorder
        let sending = Mutex(true)
        init(server: RoomServer, alice: CallSession, bob: CallSession) {
            self.server = server; self.alice = alice; self.bob = bob
            a = Recorder(alice); b = Recorder(bob)
        }
        func end() {
            sending.withLock { $0 = false }
            server.stop()
        }
    }

    func talkingCall(expressionChannelTimeout: TimeInterval = 10) throws -> TalkingCall {
        try PeerConnection.prepare()
        let secret = ServerSecret.random()
        let (server, url) = try makeServer(secret: secret)
        let call = TalkingCall(server: server,
                               alice: try session("alice", url: url, secret: secret, tone: 440, expressionChannelTimeout: expressionChannelTimeout),
                               bob: try session("bob", url: url, secret: secret, tone: 660, expressionChannelTimeout: expressionChannelTimeout))
        let (alice, bob, a, b) = (call.alice, call.bob, call.a, call.b)
        alice.start()
        waitUntil("alice joined", timeout: 5) { a.has { if case .joined = $0 { return true }; return false } }
        bob.start()
        waitUntil("data channels open", timeout: 10) { alice.participants == ["bob"] && bob.participants == ["alice"] }
        Thread {
            var i = 0
            while call.sending.withLock({ $0 }) {
                alice.send(self.frame(i, at: alice.mediaTimeMicros)); i += 1
                Thread.sleep(forTimeInterval: 1.0 / 30)
            }
        }.start()
        waitUntil("bob receives alice's frames", timeout: 5) { b.frames.withLock { $0.count } >= 20 }
        return call
    }

    /// A connection whose expression channel is gone while the voice still flows (under loss the
    /// channel's opening message can be lost for good) is renegotiated: the voice alone would keep
    /// it looking alive, and the avatar would stay frozen.
    func testAConnectionWithoutAnExpressionChannelIsRenegotiated() throws {
        let call = try talkingCall(expressionChannelTimeout: 2)
        defer { call.end() }
        let (alice, bob, a, b) = (call.alice, call.bob, call.a, call.b)

        let closedAt = Date()
        XCTAssertTrue(alice.closeExpressionChannel(to: "bob"), "no expression channel to close")
        Thread.sleep(forTimeInterval: 0.5)
        let frozen = b.frames.withLock { $0.count }
        waitUntil("a side starts recovering", timeout: 6) {
            a.has { if case .peerRecovering("bob", _) = $0 { return true }; return false }
                || b.has { if case .peerRecovering("alice", _) = $0 { return true }; return false }
        }
        waitUntil("expressions flow again", timeout: 8) { b.frames.withLock { $0.count } >= frozen + 30 }
        let downtime = Date().timeIntervalSince(closedAt)
        print("recovered from a lost expression channel in \(String(format: "%.1f", downtime)) s")
        XCTAssertEqual(alice.participants, ["bob"]); XCTAssertEqual(bob.participants, ["alice"])
        for r in [a, b] {
            XCTAssertFalse(r.has { if case .participantLeft = $0 { return true }; return false })
        }
        call.sending.withLock { $0 = false }
        let done = DispatchSemaphore(value: 0)
        Task { await alice.leave(); await bob.leave(); done.signal() }
        _ = done.wait(timeout: .now() + 10)
    }

    /// A network path that dies while webrtcbin still says `connected` (GStreamer 1.22 does not
    /// check consent): both sides notice the silence, renegotiate a fresh connection, and the
    /// expressions flow again, with no signaling outage and nobody leaving.
    func testASilentlyDeadConnectionIsRenegotiated() throws {
        // Alice keeps talking and sending expressions at 30 fps for the whole test.
        let call = try talkingCall()
        defer { call.end() }
        let (alice, bob, a, b) = (call.alice, call.bob, call.a, call.b)

        let cutAt = Date()
        XCTAssertGreaterThan(bob.cutNetworkPath(to: "alice"), 0, "no transport to cut")
        Thread.sleep(forTimeInterval: 1)
        let frozen = b.frames.withLock { $0.count }
        Thread.sleep(forTimeInterval: 0.5)
        XCTAssertLessThanOrEqual(b.frames.withLock { $0.count }, frozen + 1, "frames still arrive through a cut path")

        // Whichever side notices first offers a fresh connection; the other answers it (and if
        // both offer at once, the side whose name sorts first keeps its offer).
        waitUntil("a side starts recovering", timeout: 8) {
            a.has { if case .peerRecovering("bob", _) = $0 { return true }; return false }
                || b.has { if case .peerRecovering("alice", _) = $0 { return true }; return false }
        }
        waitUntil("expressions flow again", timeout: 8) { b.frames.withLock { $0.count } >= frozen + 30 }
        let downtime = Date().timeIntervalSince(cutAt)
        XCTAssertLessThan(downtime, 10, "recovery took \(downtime) s")
        waitUntil("recovery reported", timeout: 3) {
            a.has { if case .peerRecovered("bob") = $0 { return true }; return false }
                || b.has { if case .peerRecovered("alice") = $0 { return true }; return false }
        }
        XCTAssertEqual(alice.participants, ["bob"]); XCTAssertEqual(bob.participants, ["alice"])

        // Both sides offer at the same moment (bob's offer is out first and crosses alice's): the
        // side whose name sorts first keeps its offer, the other answers it, the call carries on.
        let beforeGlare = b.frames.withLock { $0.count }
        func recoveries() -> Int {
            a.count { if case .peerRecovering = $0 { return true }; return false } + b.count { if case .peerRecovering = $0 { return true }; return false }
        }
        let recoveriesBeforeGlare = recoveries()
        bob.renegotiate(with: "alice")
        Thread.sleep(forTimeInterval: 0.005)
        alice.renegotiate(with: "bob")
        Thread.sleep(forTimeInterval: 0.5)
        waitUntil("expressions flow after simultaneous offers", timeout: 8) { b.frames.withLock { $0.count } >= beforeGlare + 45 }
        XCTAssertEqual(recoveries(), recoveriesBeforeGlare, "the crossed offers broke the connection")
        // Nobody left, nothing failed, and the signaling never dropped.
        for r in [a, b] {
            XCTAssertFalse(r.has { if case .participantLeft = $0 { return true }; return false })
            XCTAssertFalse(r.has { if case .error = $0 { return true }; return false },
                           "\(r.events.withLock { $0.compactMap { if case .error(let c, let m) = $0 { "\(c): \(m)" } else { nil } } })")
            XCTAssertFalse(r.has { if case .connection(.reconnecting) = $0 { return true }; return false })
        }
        // The jitter buffer follows the new connection.
        XCTAssertNotNil(bob.playout(for: "alice", at: bob.mediaTimeMicros))
        print("recovered from a dead network path in \(String(format: "%.1f", downtime)) s")

        call.sending.withLock { $0 = false }
        let done = DispatchSemaphore(value: 0)
        Task { await alice.leave(); await bob.leave(); done.signal() }
        _ = done.wait(timeout: .now() + 10)
    }

    /// The same user joining from a second device takes the seat over; the first session ends
    /// instead of reconnecting (which would evict the second in turn, back and forth).
    func testASessionReplacedByTheSameUserEndsWithoutReconnecting() throws {
        let secret = ServerSecret.random()
        let (server, url) = try makeServer(secret: secret)
        defer { server.stop() }
        let first = try session("alice", url: url, secret: secret, tone: 440)
        let r1 = Recorder(first)
        first.start()
        waitUntil("the first device joined", timeout: 5) { r1.has { if case .joined = $0 { return true }; return false } }
        let second = try session("alice", url: url, secret: secret, tone: 440)
        let r2 = Recorder(second)
        second.start()
        waitUntil("the second device joined", timeout: 5) { r2.has { if case .joined = $0 { return true }; return false } }
        waitUntil("the first device is told", timeout: 5) { r1.has { if case .error("replaced", _) = $0 { return true }; return false } }
        waitUntil("the first session ends", timeout: 5) { r1.has { if case .connection(.left) = $0 { return true }; return false } }
        Thread.sleep(forTimeInterval: 1.5)
        XCTAssertFalse(r1.has { if case .connection(.reconnecting) = $0 { return true }; return false }, "the replaced session tried to come back")
        XCTAssertEqual(r2.count { if case .joined = $0 { return true }; return false }, 1, "the second device was evicted")
        XCTAssertEqual(server.status().participants, 1)
        let done = DispatchSemaphore(value: 0)
        Task { await second.leave(); done.signal() }
        _ = done.wait(timeout: .now() + 5)
    }

    func testABadTokenIsRefusedAndNotRetried() throws {
        let secret = ServerSecret.random()
        let (server, url) = try makeServer(secret: secret)
        let forged = try TokenAuthority(secret: ServerSecret.random()).issue(room: "lobby", user: "mallory", lifetime: 60)
        let session = CallSession(configuration: .init(server: url, room: "lobby", user: "mallory", token: forged))
        let r = Recorder(session)
        session.start()
        waitUntil("refusal", timeout: 5) { r.has { if case .error("token_forged", _) = $0 { return true }; return false } }
        waitUntil("failed", timeout: 2) { r.has { if case .connection(.failed) = $0 { return true }; return false } }
        Thread.sleep(forTimeInterval: 0.5)
        XCTAssertFalse(r.has { if case .connection(.reconnecting) = $0 { return true }; return false })
        server.stop()
    }
}
