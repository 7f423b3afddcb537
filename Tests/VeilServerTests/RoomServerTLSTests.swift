import Foundation
import VeilCore
import VeilServer
import VeilTestSupport
import XCTest

/// `RoomServer` with a certificate: WebSocket signaling over TLS, under the same limits as without.
final class RoomServerTLSTests: LoopbackServerTestCase {
    private var directory: URL!

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("veil-server-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        if let directory { try? FileManager.default.removeItem(at: directory) }
    }

    /// Joined WebSockets over TLS stay well past the handshake deadline and carry messages (the
    /// server finds each one's TCP socket beneath the TLS layer and marks it a WebSocket), while a
    /// connection that never starts its TLS handshake is cut at the deadline.
    func testTLSWebSocketsOutliveTheHandshakeDeadlineAndSilentConnectionsDoNot() throws {
        try startServer(handshakeTimeout: 1, tls: try makeCertificate())
        XCTAssertEqual(url.scheme, "wss")
        XCTAssertEqual(server.healthURL?.absoluteString, "https://127.0.0.1:\(port)/health")
        XCTAssertEqual(server.pageURL?.absoluteString, "https://127.0.0.1:\(port)/")
        let alice = try join("r", "alice"), bob = try join("r", "bob")
        let joinedAt = Date()

        let silent = try RawWebSocket(port: port)
        let end = silent.readUntilEnd(timeout: 15).end
        XCTAssertNotEqual(end, .open, "a connection without a TLS handshake was still open after 15 s")

        // Three deadlines after joining, both are still in the room and hear each other.
        let rest = 3 - Date().timeIntervalSince(joinedAt)
        if rest > 0 { Thread.sleep(forTimeInterval: rest) }
        alice.send(.mute(muted: true))
        guard case .muteChanged("alice", true)? = bob.next(timeout: 10, where: { if case .muteChanged = $0 { true } else { false } }) else {
            return XCTFail("bob heard nothing from alice over TLS: \(bob.pending)")
        }
        let status = server.status()
        XCTAssertEqual(status.participants, 2)
        XCTAssertEqual(status.connections, 2)
        XCTAssertTrue(waitFor(5) { self.server.status().sockets == 2 }, "sockets: \(server.status().sockets)")
    }

    /// A client that speaks plain WebSocket to the TLS port gets no WebSocket.
    func testAPlainClientGetsNothingFromTheTLSPort() throws {
        try startServer(tls: try makeCertificate())
        let plain = try XCTUnwrap(URL(string: "ws://127.0.0.1:\(port)/ws"))
        XCTAssertThrowsError(try WebSocketTestClient.connect(to: plain, loop: clientLoop, timeout: 10))
        // The server goes on serving TLS clients.
        _ = try join("r", "alice")
    }

    /// A self-signed certificate for 127.0.0.1 (openssl), which clients trust as its own authority.
    private func makeCertificate() throws -> ServerCertificate {
        let issued = try TestCertificateAuthority.selfSigned(in: directory, commonName: "127.0.0.1", subjectAltName: "IP:127.0.0.1,DNS:localhost")
        certificateAuthorities = issued.certificate
        return try ServerCertificate(certificateFile: issued.certificate, keyFile: issued.key)
    }
}
