import Foundation
import Synchronization
import VeilCore
import VeilGLib
@testable import VeilServer
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// A determined stranger (no valid token) against a real `RoomServer` on loopback, one test per
/// class of attack in docs/reliability.md ("A determined stranger"), each a family of attacks with
/// sizes and counts varied, while a canary pair in another room relays an offer every 200 ms.
/// Each test asserts that the canary stays in its room, that its relays stay fast (p95 under
/// `noticeableMilliseconds`, none lost) and that the server's memory comes back; each prints its
/// figures, the server loop's CPU time among them.
final class StrangerAttackTests: LoopbackServerTestCase {
    /// A signaling relay slower than this would be noticed: a call's set-up (offer, answer, ICE)
    /// takes a few relays, and people notice a join that takes more than about a second.
    static let noticeableMilliseconds = 250.0

    // MARK: The canary

    /// Two participants of room "canary": alice relays an offer to bob every 200 ms and times it;
    /// both ping every second (the test client does that by itself).
    private final class Canary: @unchecked Sendable {
        let alice: WebSocketTestClient, bob: WebSocketTestClient
        private let state = Mutex((latencies: [Double](), lost: 0, running: true))
        private let done = DispatchSemaphore(value: 0)

        init(alice: WebSocketTestClient, bob: WebSocketTestClient) {
            self.alice = alice
            self.bob = bob
            _ = alice.next(where: { if case .participantJoined = $0 { true } else { false } })
            Thread.detachNewThread { [self] in
                var n = 0
                while state.withLock({ $0.running }) {
                    n += 1
                    let sdp = "v=0\r\ns=canary-\(n)\r\n"
                    let began = Date()
                    alice.send(.offer(to: "bob", sdp: sdp))
                    let got = bob.next(timeout: 3) { if case .offer(_, sdp) = $0 { true } else { false } }
                    let elapsed = Date().timeIntervalSince(began) * 1000
                    state.withLock { if got == nil { $0.lost += 1 } else { $0.latencies.append(elapsed) } }
                    Thread.sleep(forTimeInterval: max(0, 0.2 - elapsed / 1000))
                }
                done.signal()
            }
        }

        /// Stops relaying; the round trips (ms) and the relays lost.
        func stop() -> (latencies: [Double], lost: Int) {
            state.withLock { $0.running = false }
            _ = done.wait(timeout: .now() + 5)
            return state.withLock { ($0.latencies, $0.lost) }
        }

        /// Messages that would mean the canary was hurt: someone left, an error, a close.
        var harm: [String] {
            var found: [String] = []
            for (name, client) in [("alice", alice), ("bob", bob)] {
                for message in client.pending {
                    switch message {
                    case .participantLeft, .error: found.append("\(name) got \(message)")
                    default: break
                    }
                }
                if let code = client.waitClosed(timeout: 0) { found.append("\(name) was closed with \(code)") }
            }
            return found
        }
    }

    /// Runs `attack` beside a canary pair and checks the canary and the server's memory afterwards.
    /// Returns the figures line it printed.
    @discardableResult
    private func withCanary(_ name: String, file: StaticString = #filePath, line: UInt = #line,
                            attack: () throws -> String) throws -> String {
        let canary = Canary(alice: try join("canary", "alice"), bob: try join("canary", "bob"))
        Thread.sleep(forTimeInterval: 0.4)
        let memoryBefore = ProcessFootprint.residentKiB
        let cpuBefore = ProcessFootprint.cpuSeconds(ofThreadsNamed: "veil-server")
        let peak = Mutex(memoryBefore)
        let sampling = Mutex(true)
        let sampler = Thread { while sampling.withLock({ $0 }) { let now = ProcessFootprint.residentKiB; peak.withLock { $0 = max($0, now) }; Thread.sleep(forTimeInterval: 0.05) } }
        sampler.start()
        let started = Date()
        let what = try attack()
        let seconds = Date().timeIntervalSince(started)
        Thread.sleep(forTimeInterval: 0.6) // the canary goes on a little after the attack
        let (latencies, lost) = canary.stop()
        sampling.withLock { $0 = false }
        let cpu = ProcessFootprint.cpuSeconds(ofThreadsNamed: "veil-server") - cpuBefore
        // The server lets go of what the attack made it hold once its connections are gone.
        XCTAssertTrue(waitFor(6) { self.server.status().connections == 2 }, "\(name): \(server.status())", file: file, line: line)
        let memoryAfter = ProcessFootprint.residentKiB
        let sorted = latencies.sorted()
        let p50 = sorted.isEmpty ? .infinity : sorted[sorted.count / 2]
        let p95 = sorted.isEmpty ? .infinity : sorted[min(sorted.count - 1, sorted.count * 95 / 100)]
        let figures = String(format: "%@: %@; %.1f s, server loop CPU %.2f s; canary %d relays p50 %.1f ms p95 %.1f ms max %.1f ms lost %d; RSS %d → peak %d → %d KiB (test process)",
                             name, what, seconds, cpu, latencies.count, p50, p95, sorted.last ?? 0, lost, memoryBefore, peak.withLock { $0 }, memoryAfter)
        print(figures)
        XCTAssertEqual(canary.harm, [], "\(name): the canary was hurt", file: file, line: line)
        XCTAssertEqual(lost, 0, "\(name): a canary relay was lost", file: file, line: line)
        XCTAssertGreaterThan(latencies.count, Int(seconds * 2), "\(name): the canary relayed too little", file: file, line: line)
        XCTAssertLessThan(p95, Self.noticeableMilliseconds, "\(name): canary relays were slow", file: file, line: line)
        XCTAssertEqual(server.status().participants, 2, file: file, line: line)
        XCTAssertLessThan(peak.withLock { $0 } - memoryBefore, 96 * 1024, "\(name): the server held too much memory during the attack", file: file, line: line)
        XCTAssertLessThan(memoryAfter - memoryBefore, 48 * 1024, "\(name): memory did not come back", file: file, line: line)
        return figures
    }

    /// Runs `body(i)` for i in 0..<count on as many threads, and waits for all of them.
    private func concurrently(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
        let group = DispatchGroup()
        for index in 0..<count {
            group.enter()
            Thread.detachNewThread { body(index); group.leave() }
        }
        group.wait()
    }

    // MARK: 1. Compression bombs and unfinished fragments

    /// No extension is negotiated whatever the client offers; a compressed frame (RSV1) is a
    /// protocol error, never inflated; a message in fragments that never ends is cut when its
    /// announced size passes the limit, before its bytes are kept. Sizes and counts varied.
    func testCompressionBombsAndEndlessFragmentsAreRefusedBeforeAnyByteIsKept() throws {
        try startServer()
        try withCanary("compression and fragments") {
            for offer in ["permessage-deflate", "permessage-deflate; client_max_window_bits", "x-webkit-deflate-frame",
                          "permessage-deflate; server_no_context_takeover, permessage-deflate"] {
                let socket = try RawWebSocket.open(port: port, headers: "Sec-WebSocket-Extensions: \(offer)\r\n")
                XCTAssertFalse(socket.handshakeAnswer.lowercased().contains("sec-websocket-extensions"), "\(offer): \(socket.handshakeAnswer)")
            }
            let outcomes = Mutex([String: Int]())
            // Compressed frames of every size (a deflate stream of zeros inflates ~1000×; these are
            // never inflated), from 10 connections at once.
            let compressed: [Int] = [16, 1024, 64 * 1024, 248 * 1024]
            concurrently(10) { index in
                let size = compressed[index % compressed.count]
                guard let socket = try? RawWebSocket.open(port: self.port, headers: "Sec-WebSocket-Extensions: permessage-deflate\r\n") else { return }
                let bomb = [UInt8](repeating: 0, count: size)
                _ = try? socket.write(RawWebSocket.frame(bomb, reserved: 0x40))
                let (_, code) = socket.readUntilClose(timeout: 3)
                outcomes.withLock { $0["compressed \(code.map(String.init) ?? "none")", default: 0] += 1 }
            }
            // Messages in fragments of 1 KiB to 256 KiB that never end: 1 MiB each if the server read on.
            let fragments: [Int] = [1024, 16 * 1024, 60 * 1024, 256 * 1024]
            concurrently(12) { index in
                let size = fragments[index % fragments.count]
                guard let socket = try? RawWebSocket.open(port: self.port) else { return }
                var sent = 0
                let first = RawWebSocket.frame([UInt8](repeating: 0x20, count: size), opcode: 1, final: false)
                let more = RawWebSocket.frame([UInt8](repeating: 0x20, count: size), opcode: 0, final: false)
                guard (try? socket.write(first)) == true else { return }
                sent += size
                while sent < 1 << 20, (try? socket.write(more)) == true { sent += size }
                let (texts, code) = socket.readUntilClose(timeout: 3)
                let tooLarge = texts.contains { $0.contains("message_too_large") }
                outcomes.withLock { $0["fragments \(code.map(String.init) ?? "none")\(tooLarge ? " message_too_large" : "")", default: 0] += 1 }
            }
            let seen = outcomes.withLock { $0 }
            XCTAssertEqual(seen["compressed 1002"], 10, "every compressed frame is a protocol error: \(seen)")
            // A fragmented message is refused when its size passes 4 KiB, or, when the server read
            // more than 16 KiB of it in one go before joining, for its byte rate: never read on.
            XCTAssertEqual((seen["fragments 1009 message_too_large"] ?? 0) + (seen["fragments 1008"] ?? 0), 12, "\(seen)")
            return "10 compressed frames of 16 B–248 KiB, 12 endless fragmented messages of 1–256 KiB fragments: \(seen.sorted { $0.key < $1.key })"
        }
    }

    // MARK: 2. CPU amplification before join

    /// Offers made of JSON escapes (the costliest text to decode per byte), of 1–64 KiB, from many
    /// connections that never join, as fast as the server takes them. Before `join` a connection
    /// may send 4 KiB messages, 10 of them at once and 2 a second after; all of them together share
    /// 1 MiB/s of the server's reading.
    func testOffersBeforeJoinCannotMakeTheServerDecodeMuchOrStarveTheCanary() throws {
        try startServer()
        try withCanary("JSON before join") {
            let outcomes = Mutex([String: Int]())
            let sizes = [1024, 4000, 16 * 1024, 64 * 1024 - 100]
            let sent = Mutex(0)
            concurrently(20) { index in
                let size = sizes[index % sizes.count]
                let escapes = String(repeating: #"\u0041"#, count: (size - 64) / 6)
                let frame = RawWebSocket.frame(Array(#"{"v":1,"type":"offer","to":"bob","sdp":"\#(escapes)"}"#.utf8))
                let deadline = Date().addingTimeInterval(3)
                var written = 0
                guard let socket = try? RawWebSocket.open(port: self.port) else { return }
                while Date() < deadline, (try? socket.write(frame)) == true {
                    written += frame.count
                    Thread.sleep(forTimeInterval: 0.025) // 40 a second
                }
                sent.withLock { $0 += written }
                let (texts, code) = socket.readUntilClose(timeout: 3)
                let codes = Set(texts.compactMap { text -> String? in
                    guard case let .error(code, _)? = try? SignalingMessage.decode(ServerMessage.self, from: text) else { return nil }
                    return code.rawValue
                }).sorted().joined(separator: "+")
                outcomes.withLock { $0["\(codes) \(code.map(String.init) ?? "open")", default: 0] += 1 }
            }
            let seen = outcomes.withLock { $0 }
            XCTAssertEqual(seen.values.reduce(0, +), 20)
            XCTAssertTrue(seen.keys.allSatisfy { $0.hasSuffix(" 1008") || $0.hasSuffix(" 1009") }, "every attacker was closed: \(seen)")
            return "20 connections, offers of 1–64 KiB of JSON escapes at 40/s each for 3 s (\(sent.withLock { $0 } / 1024) KiB sent): \(seen.sorted { $0.key < $1.key })"
        }
    }

    // MARK: 3. Ping floods

    /// Ping frames (empty and full 125-byte ones) and unsolicited pongs, as fast as loopback takes
    /// them, from 1, 10 and 30 connections that never read. Each control frame is a message: a
    /// connection not in a room has a burst of 10.
    func testPingFloodsFromManyConnectionsAreCutAndTheLoopKeepsTurning() throws {
        try startServer()
        var summary: [String] = []
        for connections in [1, 10, 30] {
            try withCanary("ping flood ×\(connections)") {
                let cut = Mutex(0), written = Mutex(0)
                concurrently(connections) { index in
                    guard let socket = try? RawWebSocket.open(port: self.port, receiveBuffer: 4096) else { return }
                    let frame = RawWebSocket.frame([UInt8](repeating: 7, count: [0, 125, 3][index % 3]), opcode: index % 5 == 4 ? 10 : 9)
                    let batch = Array([[UInt8]](repeating: frame, count: 256).joined())
                    let deadline = Date().addingTimeInterval(5)
                    var total = 0
                    while Date() < deadline, (try? socket.write(batch)) == true { total += batch.count }
                    written.withLock { $0 += total }
                    if Date() < deadline { cut.withLock { $0 += 1 } }
                }
                XCTAssertEqual(cut.withLock { $0 }, connections, "every flooder was cut within 5 s")
                let line = "\(connections) flooders, \(written.withLock { $0 } / 1024) KiB of control frames written before the cut"
                summary.append(line)
                return line
            }
        }
        withExtendedLifetime(summary) {}
    }

    // MARK: 4. The server's own stalls

    /// The server's loop held for longer than the silence timeout (4 s), as a flood, a busy machine
    /// or a stop signal would: the clients' pings wait in the kernel meanwhile, and the server does
    /// not blame them for its own lateness. Nobody is removed; relays resume at once.
    func testAStallOfTheServerItselfRemovesNobody() throws {
        try startServer()
        let canary = Canary(alice: try join("canary", "alice"), bob: try join("canary", "bob"))
        let others = try (0..<4).map { try join("other", "u\($0)") }
        for seconds in [5.0, 8.0] {
            let began = Date()
            server.holdLoop(for: seconds)
            XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(began), seconds)
            Thread.sleep(forTimeInterval: 1.5) // ticks after the stall, where a mass removal would come
            XCTAssertEqual(server.status().participants, 6, "after a \(seconds) s stall: \(server.status())")
        }
        let (latencies, lost) = canary.stop()
        print(String(format: "server stalls of 5 s and 8 s: %d canary relays, %d lost (relays in flight during a stall wait for it), participants still %d",
                     latencies.count, lost, server.status().participants))
        XCTAssertEqual(canary.harm, [])
        for client in others {
            XCTAssertFalse(client.pending.contains { if case .participantLeft = $0 { true } else { false } }, "\(client.name): \(client.pending)")
        }
        XCTAssertFalse(log.lines.contains { $0.contains(" drop ") || $0.contains(" leave ") }, "\(log.lines)")
    }

    // MARK: 5. Silent sockets and idle WebSockets

    /// With a cap of 60 connections (124 sockets, 64 of them for requests in progress, 30 waiting
    /// to join): 120 connections that send nothing, 30 that send half a request, then 80 WebSockets
    /// that never join. Newcomers push the longest-waiting of them out: `/health` answers, a
    /// participant who drops reconnects and resumes, and a new one joins.
    func testSilentAndIdleConnectionsCannotLockNewcomersOut() throws {
        try startServer(rooms: .init(maximumConnections: 60))
        try withCanary("silent sockets") {
            var held: [RawWebSocket] = []
            for _ in 0..<120 { if let socket = try? RawWebSocket(port: port) { held.append(socket) } }
            for _ in 0..<30 {
                guard let socket = try? RawWebSocket(port: port) else { continue }
                _ = try? socket.write(Array("GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: webs".utf8))
                held.append(socket)
            }
            var idle: [RawWebSocket] = []
            for _ in 0..<80 { if let socket = try? RawWebSocket.open(port: port) { idle.append(socket) } }
            XCTAssertEqual(idle.count, 80, "every upgrade got through")
            let health = try httpGet(try XCTUnwrap(server.healthURL))
            XCTAssertEqual(health.status, 200, "health answers")
            let status = server.status()
            XCTAssertLessThanOrEqual(status.sockets, status.maximumConnections + RoomServer.socketHeadroom)
            // A participant drops and comes back; another joins for the first time.
            let carol = try join("third", "carol")
            carol.dropAbruptly()
            let carolAgain = try join("third", "carol")
            let dave = try join("third", "dave")
            XCTAssertNotNil(carolAgain.next(where: { if case .participantJoined(user: "dave", _) = $0 { true } else { false } }))
            let line = "120 silent + 30 half requests + 80 idle WebSockets against a cap of 60: health 200, reconnection and join fine; sockets held \(status.sockets) of \(status.maximumConnections + RoomServer.socketHeadroom)"
            for socket in held + idle { socket.close() }
            carolAgain.send(.leave)
            dave.send(.leave)
            XCTAssertTrue(waitFor(2) { self.server.status().participants == 2 })
            carolAgain.dropAbruptly()
            dave.dropAbruptly()
            return line
        }
    }

    // MARK: 6. Video in disguise

    /// Offers whose video section is spelled so that a check for the text `m=video` misses it but a
    /// lenient SDP parser reads it: none is relayed, each is refused with `video_not_allowed`.
    func testVideoSectionsInAnySpellingAreNotRelayed() throws {
        try startServer()
        let alice = try join("r", "alice"), bob = try join("r", "bob")
        _ = alice.next(where: { if case .participantJoined = $0 { true } else { false } })
        let base = "v=0\r\no=- 1 0 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\n"
        let spellings = ["m=video", " m=video", "\tm=video", "M=video", "m= video", "m =video", "m=VIDEO", "m=Video",
                         "a=x\rm=video", "a=x\u{2028}m=video", "a=x\u{85}m=video", "a=x\u{0}m=video"]
        for spelling in spellings {
            bob.send(.offer(to: "alice", sdp: base + spelling + " 9 UDP/TLS/RTP/SAVPF 96\r\n"))
            XCTAssertEqual(bob.nextError(), .videoNotAllowed, spelling.debugDescription)
        }
        bob.send(.offer(to: "alice", sdp: base))
        XCTAssertEqual(alice.next(where: { if case .offer = $0 { true } else { false } }), .offer(from: "bob", sdp: base),
                       "only the voice-only offer reached alice")
        XCTAssertNil(alice.next(timeout: 0.2, where: { if case .offer = $0 { true } else { false } }))
    }

    // MARK: 7. Log floods

    /// Forged, malformed, expired and missing tokens, each on a fresh connection, from 1 and 5
    /// attackers at once for 2 s. The log writes a burst, then a few lines a second, and a
    /// `held-back` line counting the rest by error code: written plus held back is every refusal.
    func testForgedJoinFloodsAreLoggedInBriefWithoutLosingTheCount() throws {
        try startServer()
        let refusals = Mutex(0)
        try withCanary("forged joins") {
            let expired = try authority.issue(room: "r", user: "eve", lifetime: 1, now: Date().addingTimeInterval(-10))
            let forged = try TokenAuthority(secret: .random()).issue(room: "r", user: "eve", lifetime: 600)
            let tokens: [String?] = [forged, "nonsense", expired, nil, try authority.issue(room: "other-room", user: "eve", lifetime: 60)]
            for attackers in [1, 5] {
                concurrently(attackers) { index in
                    let deadline = Date().addingTimeInterval(2)
                    var n = index
                    while Date() < deadline {
                        guard let socket = try? RawWebSocket.open(port: self.port) else { continue }
                        n += 1
                        _ = try? socket.send(.join(room: "r", user: "eve", token: tokens[n % tokens.count]))
                        let (texts, _) = socket.readUntilClose(timeout: 2)
                        if texts.contains(where: { $0.contains(#""type":"error""#) }) { refusals.withLock { $0 += 1 } }
                    }
                }
            }
            return "\(refusals.withLock { $0 }) forged joins"
        }
        server.stop() // writes the last summary
        XCTAssertTrue(log.waitForEnd(timeout: 5))
        let refused = refusals.withLock { $0 }
        let lines = log.lines
        let written = lines.filter { $0.contains(" refuse ") }.count
        let heldBack = lines.filter { $0.contains(" held-back kind=refuse ") }.compactMap { line -> Int? in
            line.split(separator: " ").first { $0.hasPrefix("lines=") }.flatMap { Int($0.dropFirst(6)) }
        }.reduce(0, +)
        print("forged-join flood: \(refused) refusals; \(written) refuse lines written, \(heldBack) held back in \(lines.filter { $0.contains("held-back") }.count) summary lines")
        XCTAssertGreaterThan(refused, 200, "the attack was a flood")
        XCTAssertEqual(written + heldBack, refused, "every refusal is either written or counted")
        XCTAssertLessThan(written, 50 + 5 * 10, "at most the burst and 5 a second were written")
        XCTAssertTrue(lines.contains { $0.contains("held-back kind=refuse") && $0.contains("token_forged:") }, "the summary says why")
    }
}
