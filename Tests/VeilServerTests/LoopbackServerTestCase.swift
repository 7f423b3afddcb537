import Foundation
import VeilCore
import VeilGLib
import VeilServer
import XCTest

/// A test case with a real `RoomServer` on 127.0.0.1 (a free port, a fresh secret), its log, and a
/// loop for libsoup test clients; the server stops after each test.
class LoopbackServerTestCase: XCTestCase {
    var server: RoomServer!
    var url: URL!
    var port = 0
    var authority: TokenAuthority!
    var clientLoop: GLibLoop!
    var log: EventLog!
    /// The authorities clients trust for a server with TLS (`startServer(tls:)`).
    var certificateAuthorities: URL?

    override func tearDown() {
        server?.stop()
        server = nil
        clientLoop = nil
        super.tearDown()
    }

    func startServer(rooms: RoomDirectory.Configuration = .init(), handshakeTimeout: TimeInterval = 10,
                     tls: ServerCertificate? = nil) throws {
        let secret = ServerSecret.random()
        authority = TokenAuthority(secret: secret)
        server = RoomServer(configuration: .init(secret: secret, host: "127.0.0.1", port: 0, rooms: rooms, handshakeTimeout: handshakeTimeout,
                                                 tls: tls))
        log = EventLog(server.events)
        url = try server.start()
        port = try XCTUnwrap(server.port)
        clientLoop = GLibLoop(name: "test-clients")
    }

    /// A token for `user` in `room`, valid for 10 minutes.
    func token(_ room: String, _ user: String) throws -> String { try authority.issue(room: room, user: user, lifetime: 600) }

    /// A libsoup WebSocket client on the server, pinging every second.
    func connect(_ name: String = "client") throws -> WebSocketTestClient {
        try WebSocketTestClient.connect(to: url, name: name, loop: clientLoop, certificateAuthorities: certificateAuthorities)
    }

    /// A client that has joined `room` as `user` (a test failure, and a throw, if it was not admitted).
    func join(_ room: String, _ user: String, file: StaticString = #filePath, line: UInt = #line) throws -> WebSocketTestClient {
        let client = try connect(user)
        client.send(.join(room: room, user: user, token: try token(room, user)))
        guard case .joined? = client.next(where: { if case .joined = $0 { true } else { false } }) else {
            XCTFail("\(user) was not admitted to \(room): \(client.pending)", file: file, line: line)
            throw WebSocketTestClient.ConnectError(description: "not joined")
        }
        return client
    }

    /// Whether `condition` held within `timeout` (polled every 20 ms).
    func waitFor(_ timeout: TimeInterval, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while !condition() {
            if Date() > deadline { return false }
            Thread.sleep(forTimeInterval: 0.02) // a test's deadline poll; the server itself is callback-driven
        }
        return true
    }
}
