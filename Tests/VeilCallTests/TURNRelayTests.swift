import Foundation
@testable import VeilCall
import VeilCore
import VeilBench
import VeilGLib
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// Media forced through a real TURN server (Debian's coturn, started by the test): the peers learn
/// the relay's address, never each other's.
final class TURNRelayTests: XCTestCase {
    /// This machine's first IPv4 address that is not loopback: libnice gathers no 127.0.0.1
    /// candidates, so the TURN server must listen where the host's own candidates live.
    static func hostAddress() -> String? { UDPRelay.hostAddress() }

    /// A free UDP port on `host` (bound and released).
    static func freeUDPPort(on host: String) -> Int? {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        inet_pton(AF_INET, host, &address.sin_addr)
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard bound == 0 else { return nil }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    func testRelayOnlyCallsGoThroughTheTURNServerAndHideThePeersAddresses() async throws {
        guard let turnserver = ["/usr/bin/turnserver", "/usr/sbin/turnserver"].first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw XCTSkip("coturn is not installed (apt-get install coturn; scripts/bootstrap does)")
        }
        let host = try XCTUnwrap(Self.hostAddress(), "this machine has no IPv4 address besides loopback")
        let port = try XCTUnwrap(Self.freeUDPPort(on: host))
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("veil-turn-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let log = directory.appendingPathComponent("turnserver.log").path
        let server = try ChildProcess(turnserver, [
            "-n", "--listening-ip=\(host)", "--relay-ip=\(host)", "--listening-port=\(port)",
            "--min-port=49152", "--max-port=65535", "--lt-cred-mech", "--user=veil:relay-secret", "--realm=veil.test",
            "--no-tls", "--no-dtls", "--no-cli", "--log-file=stdout", "--simple-log",
            "--pidfile=\(directory.appendingPathComponent("turn.pid").path)", "--userdb=\(directory.appendingPathComponent("turndb").path)",
        ], environment: ProcessInfo.processInfo.environment, standardError: log)
        defer { server.terminate() }
        Thread.sleep(forTimeInterval: 0.5)

        // The URL form the room server hands out (RTCIceServer), adopted as a client would.
        var configuration = PeerConfiguration(relayOnly: true)
        configuration.adopt([ICEServer(urls: ["turn:\(host):\(port)?transport=udp"], username: "veil", credential: "relay-secret")])
        XCTAssertEqual(configuration.turnServer, "turn://veil:relay-secret@\(host):\(port)")

        let pair = try PeerPair(configuration: configuration)
        try await pair.waitUntilConnected()
        for i in 0..<30 {
            pair.offerer.send(ExpressionFrame(sequence: UInt32(i), captureTimeMicros: pair.offerer.mediaTimeMicros, state: .tracked, expression: testExpression(i)))
            try await Task.sleep(nanoseconds: 20_000_000)
        }
        try await eventually("frames through the relay") { pair.answererSaw.frames.withLock { $0.count } >= 20 }
        try await eventually("voice through the relay", within: 5) { rms(pair.answererSaw.samples()) > 0.05 }

        for (name, peer) in [("offerer", pair.offerer), ("answerer", pair.answerer)] {
            let stats = await peer.statistics()
            let candidates = try XCTUnwrap(stats.candidatePair, "\(name) reports no candidate pair")
            print("\(name): \(candidates.local) ↔ \(candidates.remote)")
            XCTAssertEqual(candidates.local.type, .relay, "\(name)'s own candidate is not the relay")
            XCTAssertEqual(candidates.remote.type, .relay, "\(name) talks to something other than the relay")
            XCTAssertEqual(candidates.remote.address, host, "\(name)'s remote address is not the TURN server's")
        }
        // No host or server-reflexive candidate was ever offered to the other side, in a description
        // or trickled: nothing but the relay's address.
        let descriptions = pair.offererSaw.descriptions.withLock { $0 } + pair.answererSaw.descriptions.withLock { $0 }
        let candidates = descriptions.flatMap { $0.sdp.split(whereSeparator: \.isNewline).filter { $0.hasPrefix("a=candidate") }.map(String.init) }
            + pair.offererSaw.candidates.withLock { $0 } + pair.answererSaw.candidates.withLock { $0 }
        XCTAssertFalse(candidates.isEmpty, "no candidates were signaled")
        for candidate in candidates {
            XCTAssertTrue(candidate.contains("typ relay"), "a non-relay candidate was offered: \(candidate)")
        }
        await pair.assertPrivacyInvariants()
        try await pair.close()
    }

    func testRelayOnlyWithoutATURNServerIsRefused() throws {
        XCTAssertThrowsError(try PeerConnection(loop: GLibLoop(name: "veil-test-relay"), role: .offerer, audioSource: .silence,
                                                configuration: PeerConfiguration(relayOnly: true))) { error in
            XCTAssertEqual((error as? PeerError)?.code, .invalidArgument)
        }
    }

    func testServerProvidedICEServersBecomeWebrtcbinURLs() {
        var configuration = PeerConfiguration()
        configuration.adopt([
            ICEServer(urls: ["stun:stun.example.org:3478"]),
            ICEServer(urls: ["turn:turn.example.org:3478?transport=udp", "turns:turn.example.org:5349"], username: "a b", credential: "p@ss:w"),
        ])
        XCTAssertEqual(configuration.stunServer, "stun://stun.example.org:3478")
        XCTAssertEqual(configuration.turnServer, "turn://a%20b:p%40ss%3Aw@turn.example.org:3478")
        // A TURN URL without credentials, or a malformed one, is skipped; settings already made win.
        var own = PeerConfiguration(turnServer: "turn://me:x@own.example:3478")
        own.adopt([ICEServer(urls: ["turn:other.example:3478"], username: "u", credential: "c"),
                   ICEServer(urls: ["stun:bad host:1", "stun:"])])
        XCTAssertEqual(own.turnServer, "turn://me:x@own.example:3478")
        XCTAssertNil(own.stunServer)
    }
}
