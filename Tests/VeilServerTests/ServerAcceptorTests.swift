import CGLib
import CSoup
import Foundation
import VeilCore
@testable import VeilServer
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// How the room server listens and accepts (`ServerAcceptor`), and what its HTTP answers do to the
/// connection: the problems `veil bench`'s server load found in libsoup 3.2's own listener.
final class ServerAcceptorTests: XCTestCase {
    /// A burst of connections is queued by the kernel even while nobody accepts: with GLib's default
    /// backlog of 10 the 12th SYN onwards would be dropped and wait out a 1 s retransmission.
    func testTheListeningSocketQueuesABurstOfConnectionsWithoutAccepting() throws {
        guard let address = g_inet_socket_address_new_from_string("127.0.0.1", 0) else { return XCTFail("no address") }
        defer { g_object_unref(UnsafeMutableRawPointer(address)) }
        let socket = try ServerAcceptor.listeningSocket(on: address, backlog: ServerAcceptor.backlog)
        defer { g_object_unref(UnsafeMutableRawPointer(socket)) }
        guard let local = g_socket_get_local_address(socket, nil) else { return XCTFail("no local address") }
        let port = g_inet_socket_address_get_port(UnsafeMutableRawPointer(local).assumingMemoryBound(to: GInetSocketAddress.self))
        g_object_unref(UnsafeMutableRawPointer(local))

        let burst = 100
        var clients: [Int32] = []
        defer { clients.forEach { _ = close($0) } }
        for _ in 0..<burst {
            let fd = try TCP.startConnecting(port: Int(port))
            clients.append(fd)
        }
        // Nobody calls accept: the handshakes complete in the kernel's queue, or not at all.
        let deadline = Date().addingTimeInterval(0.5)
        var connected = 0
        for fd in clients {
            let left = max(0, deadline.timeIntervalSinceNow)
            if TCP.waitConnected(fd, milliseconds: Int32(left * 1000)) { connected += 1 }
        }
        XCTAssertEqual(connected, burst, "connections completed within 0.5 s without an accept")
    }

    /// An HTTP/1.1 client that would keep the connection alive gets `Connection: close` and the
    /// server closes its end (libsoup 3.2 never notices an idle keep-alive connection closing, so
    /// each one would hold a descriptor in CLOSE_WAIT for good).
    func testHTTPAnswersCloseTheConnection() throws {
        let server = RoomServer(configuration: .init(secret: ServerSecret.random(), host: "127.0.0.1", port: 0))
        try server.start()
        defer { server.stop() }
        guard let port = server.port else { return XCTFail("no port") }
        for path in ["/health", "/nowhere"] {
            let fd = try TCP.startConnecting(port: port)
            defer { close(fd) }
            XCTAssertTrue(TCP.waitConnected(fd, milliseconds: 2000))
            let request = Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n\r\n".utf8)
            XCTAssertEqual(request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }, request.count)
            let (answer, closedByServer) = TCP.readUntilClosed(fd, timeoutMilliseconds: 2000)
            XCTAssertTrue(answer.lowercased().contains("connection: close"), answer)
            XCTAssertTrue(closedByServer, "the server kept \(path)'s connection open: \(answer)")
        }
    }

    /// Many short connections in a row all get through the acceptor, and the server stays healthy.
    func testConnectionChurnKeepsTheServerHealthy() throws {
        let server = RoomServer(configuration: .init(secret: ServerSecret.random(), host: "127.0.0.1", port: 0))
        try server.start()
        defer { server.stop() }
        guard let port = server.port else { return XCTFail("no port") }
        for _ in 0..<200 {
            let fd = try TCP.startConnecting(port: port)
            XCTAssertTrue(TCP.waitConnected(fd, milliseconds: 2000))
            close(fd)
        }
        let fd = try TCP.startConnecting(port: port)
        defer { close(fd) }
        XCTAssertTrue(TCP.waitConnected(fd, milliseconds: 2000))
        let request = Array("GET /health HTTP/1.0\r\n\r\n".utf8)
        _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
        let (answer, _) = TCP.readUntilClosed(fd, timeoutMilliseconds: 2000)
        XCTAssertTrue(answer.hasPrefix("HTTP/1.0 200") || answer.hasPrefix("HTTP/1.1 200"), answer)
        XCTAssertTrue(answer.contains(#""status":"ok""#), answer)
    }
}

/// Plain non-blocking TCP to 127.0.0.1, for watching the listening socket itself.
private enum TCP {
    struct Failure: Error, CustomStringConvertible { let description: String }

    static func startConnecting(port: Int) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: \(String(cString: strerror(errno)))") }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(truncatingIfNeeded: port).bigEndian)
        address.sin_addr.s_addr = in_addr_t(UInt32(0x7F00_0001).bigEndian)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 || errno == EINPROGRESS else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw Failure(description: "connect: \(reason)")
        }
        return fd
    }

    /// Whether the handshake completed (writable, no socket error) within `milliseconds`.
    static func waitConnected(_ fd: Int32, milliseconds: Int32) -> Bool {
        var entry = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        guard poll(&entry, 1, milliseconds) == 1 else { return false }
        var error: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
        return error == 0
    }

    /// Everything the server sends until it closes, or until the timeout; and whether it closed.
    static func readUntilClosed(_ fd: Int32, timeoutMilliseconds: Int32) -> (String, Bool) {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        let deadline = Date().addingTimeInterval(Double(timeoutMilliseconds) / 1000)
        while deadline.timeIntervalSinceNow > 0 {
            var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&entry, 1, Int32(deadline.timeIntervalSinceNow * 1000) + 1) == 1 else { break }
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count == 0 { return (String(decoding: received, as: UTF8.self), true) }
            if count < 0 { if errno == EAGAIN || errno == EINTR { continue } else { break } }
            received.append(contentsOf: buffer[0..<count])
        }
        return (String(decoding: received, as: UTF8.self), false)
    }
}
