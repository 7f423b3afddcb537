import Foundation
import VeilCore
import VeilDatagram
import VeilInterop
import VeilInteropNetwork
import XCTest

/// `InteropSender` over loopback UDP: what arrives decodes to what was sent, a lost face sends
/// nothing, a receiver that is not there is counted and never stalls the sender.
final class InteropSenderTests: XCTestCase {
    static func expression(_ i: Int) -> VeilCore.Expression {
        var expression = VeilCore.Expression(headPose: HeadPose(yaw: Float(i), pitch: -Float(i) / 2, roll: 3), gaze: Gaze(x: 0.2, y: -0.1))
        for (n, shape) in BlendShape.allCases.enumerated() { expression[shape] = Float((n + i) % 10) / 10 }
        return expression
    }

    static func frames(_ count: Int, lostEvery: Int = 0) -> [ExpressionFrame] {
        (0..<count).map { i in
            let micros = UInt64(i) * 33_333
            if lostEvery > 0, i % lostEvery == lostEvery - 1 {
                return ExpressionFrame(sequence: UInt32(i), captureTimeMicros: micros, state: .lost)
            }
            return ExpressionFrame(sequence: UInt32(i), captureTimeMicros: micros, state: .tracked, expression: expression(i))
        }
    }

    func testVMCFramesArriveAndDecode() throws {
        let receiver = try DatagramSocket(bindingTo: "127.0.0.1")
        let sender = try InteropSender(endpoint: InteropEndpoint(kind: .vmc, host: "127.0.0.1", port: receiver.localAddress.port))
        let frames = Self.frames(12, lostEvery: 4)
        frames.forEach(sender.send)
        XCTAssertEqual(sender.statistics.framesSent, 9)
        XCTAssertEqual(sender.statistics.framesLost, 3)
        XCTAssertEqual(sender.statistics.datagramsDropped + sender.statistics.datagramsRefused + sender.statistics.datagramsFailed, 0)

        var vmc = VMCReceiver()
        var updates: [ExpressionUpdate] = []
        var bytes = 0
        while let datagram = try receiver.receive(timeout: 0.5) {
            bytes += datagram.bytes.count
            if let update = try vmc.receive(datagram.bytes) { updates.append(update) }
        }
        XCTAssertEqual(vmc.statistics.datagrams, sender.statistics.datagramsSent)
        XCTAssertEqual(bytes, sender.statistics.bytesSent)
        let tracked = frames.filter { $0.state == .tracked }
        XCTAssertEqual(updates.count, tracked.count)
        for (update, frame) in zip(updates, tracked) {
            XCTAssertEqual(update.coefficients, ExpressionUpdate(frame.expression).coefficients)
            XCTAssertEqual(try XCTUnwrap(update.time), Double(frame.captureTimeMicros) / 1e6, accuracy: 1e-6)
            XCTAssertEqual(try XCTUnwrap(update.head).yaw, frame.expression.headPose.yaw * .pi / 180, accuracy: 1e-4)
        }
    }

    func testLiveLinkFramesArriveAndDecode() throws {
        let receiver = try DatagramSocket(bindingTo: "127.0.0.1")
        let endpoint = try InteropEndpoint(parsing: "livelink://127.0.0.1:\(receiver.localAddress.port)")
        let sender = try InteropSender(endpoint: endpoint, framesPerSecond: 30, subjectName: "Alice")
        let frames = Self.frames(10, lostEvery: 5)
        frames.forEach(sender.send)
        var packets: [LiveLinkFacePacket] = []
        while let datagram = try receiver.receive(timeout: 0.5) { packets.append(try LiveLinkFacePacket(decoding: datagram.bytes)) }
        let tracked = frames.filter { $0.state == .tracked }
        XCTAssertEqual(packets.count, tracked.count)
        XCTAssertEqual(sender.statistics.datagramsSent, tracked.count)
        XCTAssertEqual(Set(packets.map(\.deviceID)).count, 1)
        for (packet, frame) in zip(packets, tracked) {
            XCTAssertEqual(packet.subjectName, "Alice")
            XCTAssertEqual(packet.frameTime.rateNumerator, 30)
            XCTAssertEqual(try XCTUnwrap(packet.update.time), Double(frame.captureTimeMicros) / 1e6, accuracy: 1e-4)
            XCTAssertEqual(packet.update.coefficients, ExpressionUpdate(frame.expression).coefficients)
        }
    }

    func testNothingListeningIsCountedAndNeverStalls() throws {
        let port = try DatagramSocket(bindingTo: "127.0.0.1").localAddress.port
        let sender = try InteropSender(endpoint: InteropEndpoint(kind: .vmc, host: "127.0.0.1", port: port))
        let frames = Self.frames(200)
        let datagrams = try frames.map { try InteropFrameEncoder(kind: .vmc).datagrams(for: $0).count }.reduce(0, +)
        let start = Date()
        for frame in frames {
            sender.send(frame)
            Thread.sleep(forTimeInterval: 0.001)
        }
        XCTAssertLessThan(Date().timeIntervalSince(start), 10)
        let s = sender.statistics
        XCTAssertEqual(s.framesSent, 200)
        XCTAssertGreaterThan(s.datagramsRefused, 0, "\(s)")
        XCTAssertEqual(s.datagramsSent + s.datagramsRefused + s.datagramsDropped + s.datagramsFailed, datagrams, "\(s)")
        XCTAssertNotNil(s.lastFailure)
    }

    func testAHostThatDoesNotResolveFailsAtOnce() {
        XCTAssertThrowsError(try InteropSender(endpoint: InteropEndpoint(kind: .liveLink, host: "no-such-host.invalid"))) { error in
            XCTAssertEqual(error as? DatagramError, .resolution)
        }
    }
}
