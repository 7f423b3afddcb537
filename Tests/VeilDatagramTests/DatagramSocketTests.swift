import Foundation
import VeilDatagram
import XCTest

/// UDP over the loopback interfaces, IPv4 and IPv6: datagrams arrive whole and in order, a closed
/// port is a count and not a failure, names resolve, a flood never blocks the sender.
final class DatagramSocketTests: XCTestCase {
    func testIPv4RoundTrip() throws {
        try roundTrip(listen: "127.0.0.1", connect: "127.0.0.1")
    }

    func testIPv6RoundTrip() throws {
        let receiver: DatagramSocket
        do { receiver = try DatagramSocket(bindingTo: "::1") } catch let error as DatagramError where error == .unreachable {
            throw XCTSkip("no IPv6 loopback on this machine: \(error)")
        }
        XCTAssertTrue(receiver.localAddress.isIPv6)
        try roundTrip(receiver: receiver, connect: "[::1]")
    }

    func testLocalhostResolvesToALoopbackAddress() throws {
        let addresses = try DatagramAddress.resolve(host: "localhost", port: 39539)
        XCTAssertFalse(addresses.isEmpty)
        XCTAssertTrue(addresses.allSatisfy { ["127.0.0.1", "::1"].contains($0.host) && $0.port == 39539 }, "\(addresses)")
        XCTAssertEqual(try DatagramAddress.resolve(host: "::1", port: 7).first?.description, "[::1]:7")
        XCTAssertEqual(try DatagramAddress.resolve(host: "127.0.0.1", port: 7).first?.description, "127.0.0.1:7")
    }

    func testAHostThatDoesNotResolveSaysSo() {
        XCTAssertThrowsError(try DatagramSocket(connectingTo: "no-such-host.invalid", port: 1)) { error in
            XCTAssertEqual(error as? DatagramError, .resolution)
            XCTAssertTrue("\(error)".contains("no-such-host.invalid"), "\(error)")
        }
    }

    func testAPortInUseSaysSo() throws {
        let first = try DatagramSocket(bindingTo: "127.0.0.1")
        XCTAssertThrowsError(try DatagramSocket(bindingTo: "127.0.0.1", port: first.localAddress.port)) { error in
            XCTAssertEqual(error as? DatagramError, .addressInUse)
        }
    }

    /// Nothing listens: the kernel's "port unreachable" comes back as `.refused` on a later send,
    /// never as an error or a wait.
    func testAClosedPortIsRefusedNotAFailure() throws {
        let port = try Self.closedPort()
        let sender = try DatagramSocket(connectingTo: "127.0.0.1", port: port)
        var outcomes: [DatagramSocket.SendOutcome] = []
        for _ in 0..<20 {
            outcomes.append(try sender.send([1, 2, 3]))
            Thread.sleep(forTimeInterval: 0.005)
        }
        XCTAssertEqual(outcomes.first, .sent)
        XCTAssertTrue(outcomes.contains(.refused), "\(outcomes)")
    }

    /// A receiver that never reads: the sender goes on at full speed and never waits.
    func testAFloodNeverBlocksTheSender() throws {
        let receiver = try DatagramSocket(bindingTo: "127.0.0.1")
        let sender = try DatagramSocket(connectingTo: "127.0.0.1", port: receiver.localAddress.port)
        let payload = [UInt8](repeating: 0x5a, count: 1_400)
        let start = Date()
        var counts: [DatagramSocket.SendOutcome: Int] = [:]
        for _ in 0..<20_000 {
            let outcome = try sender.send(payload)
            counts[outcome, default: 0] += 1
        }
        XCTAssertLessThan(Date().timeIntervalSince(start), 20, "20 000 sends took \(Date().timeIntervalSince(start)) s")
        XCTAssertEqual(counts.values.reduce(0, +), 20_000)
        XCTAssertGreaterThan(counts[.sent] ?? 0, 0)
        // The receiver's buffer held what it could; what arrived is whole.
        let first = try XCTUnwrap(try receiver.receive(timeout: 1))
        XCTAssertEqual(first.bytes, payload)
    }

    func testATooLongDatagramIsMarkedTruncated() throws {
        let receiver = try DatagramSocket(bindingTo: "127.0.0.1")
        let sender = try DatagramSocket(connectingTo: "127.0.0.1", port: receiver.localAddress.port)
        try sender.send(Array(0..<100))
        let datagram = try XCTUnwrap(try receiver.receive(timeout: 2, maximumBytes: 10))
        XCTAssertEqual(datagram.bytes, Array(0..<10))
        XCTAssertTrue(datagram.truncated)
        XCTAssertNil(try receiver.receive(timeout: 0.05), "nothing more came")
    }

    /// Draining into one buffer: each datagram's length and sender, none waiting, a long one cut.
    func testReceiveIntoOneBufferDrainsWithoutWaiting() throws {
        let receiver = try DatagramSocket(bindingTo: "127.0.0.1")
        let sender = try DatagramSocket(connectingTo: "127.0.0.1", port: receiver.localAddress.port)
        var buffer = [UInt8](repeating: 0, count: 64)
        XCTAssertNil(try receiver.receive(into: &buffer), "nothing queued: nil at once")
        XCTAssertFalse(try receiver.waitUntilReadable(timeout: 0.01))
        for payload in [[1, 2, 3], Array(0..<100)] as [[UInt8]] { try sender.send(payload) }
        XCTAssertTrue(try receiver.waitUntilReadable(timeout: 2))
        var received: [DatagramSocket.Reception] = []
        let deadline = Date().addingTimeInterval(2)
        while received.count < 2, Date() < deadline {
            if let reception = try receiver.receive(into: &buffer) {
                received.append(reception)
                if reception.count == 3 { XCTAssertEqual(Array(buffer.prefix(3)), [1, 2, 3]) }
            }
        }
        XCTAssertEqual(received.map(\.count), [3, 100])
        XCTAssertEqual(received.map(\.truncated), [false, true])
        XCTAssertEqual(Array(buffer.prefix(64)), Array(0..<64))
        XCTAssertEqual(buffer.count, 64, "the buffer is the caller's and keeps its size")
        XCTAssertEqual(received.first?.source, sender.localAddress)
    }

    /// A sender's host whatever its port, IPv4-mapped IPv6 as IPv4: what a receiver bound to every
    /// address compares.
    func testHostAddressIgnoresThePortAndIPv4Mapping() throws {
        let v4 = try XCTUnwrap(DatagramAddress.resolve(host: "127.0.0.1", port: 5000).first)
        XCTAssertEqual(v4.hostAddress, try DatagramAddress.resolve(host: "127.0.0.1", port: 6000).first?.hostAddress)
        XCTAssertEqual(v4.hostAddress.port, 0)
        XCTAssertEqual(v4.hostAddress.host, "127.0.0.1")
        XCTAssertNotEqual(v4.hostAddress, try DatagramAddress.resolve(host: "127.0.0.2", port: 5000).first?.hostAddress)
        let mapped = try XCTUnwrap(DatagramAddress.resolve(host: "::ffff:127.0.0.1", port: 5000).first)
        XCTAssertTrue(mapped.isIPv6)
        XCTAssertEqual(mapped.hostAddress, v4.hostAddress)
        let v6 = try XCTUnwrap(DatagramAddress.resolve(host: "::1", port: 5000).first)
        XCTAssertEqual(v6.hostAddress.host, "::1")
        XCTAssertTrue(v6.hostAddress.isIPv6)
        // A socket bound to every address sees an IPv4 sender as mapped; its host address is the IPv4 one.
        let receiver = try DatagramSocket(bindingTo: "", port: 0)
        let sender = try DatagramSocket(connectingTo: "127.0.0.1", port: receiver.localAddress.port)
        try sender.send([1])
        let datagram = try XCTUnwrap(try receiver.receive(timeout: 2))
        XCTAssertEqual(datagram.source.hostAddress, v4.hostAddress, "\(datagram.source)")
    }

    // MARK: Helpers

    private func roundTrip(listen: String, connect: String) throws {
        try roundTrip(receiver: try DatagramSocket(bindingTo: listen), connect: connect)
    }

    private func roundTrip(receiver: DatagramSocket, connect: String) throws {
        let port = receiver.localAddress.port
        XCTAssertGreaterThan(port, 0)
        let sender = try DatagramSocket(connectingTo: connect, port: port)
        XCTAssertEqual(sender.peer?.port, port)
        let payloads: [[UInt8]] = [[], [0], Array(repeating: 7, count: 1_400), (0..<9_000).map { UInt8($0 % 251) }]
        for payload in payloads { XCTAssertEqual(try sender.send(payload), .sent) }
        for payload in payloads {
            let datagram = try XCTUnwrap(try receiver.receive(timeout: 2), "datagram of \(payload.count) bytes")
            XCTAssertEqual(datagram.bytes, payload)
            XCTAssertFalse(datagram.truncated)
            XCTAssertEqual(datagram.source, sender.localAddress)
        }
        XCTAssertNil(try receiver.receive(timeout: 0.05))
    }

    /// A UDP port on 127.0.0.1 that nothing listens on (bound, read, released).
    static func closedPort() throws -> UInt16 {
        try DatagramSocket(bindingTo: "127.0.0.1").localAddress.port
    }
}
