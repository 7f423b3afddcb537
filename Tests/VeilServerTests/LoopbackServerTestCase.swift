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

    override func tearDown() {
        server?.stop()
        server = nil
        clientLoop = nil
        super.tearDown()
    }

    func startServer(rooms: RoomDirectory.Configuration = .init(), handshakeTimeout: TimeInterval = 10) throws {
        let secret = ServerSecret.random()
        authority = TokenAuthority(secret: secret)
        server = RoomServer(configuration: .init(secret: secret, host: "127.0.0.1", port: 0, rooms: rooms, handshakeTimeout: handshakeTimeout))
        log = EventLog(server.events)
        url = try server.start()
        port = try XCTUnwrap(server.port)
        clientLoop = GLibLoop(name: "test-clients")
    }
}
