import VeilCore
import VeilInterop
import XCTest
import VeilTestSupport

/// What each endpoint is sent for a frame of Veil's stream: decoded again by Veil's own decoders,
/// with the capture time carried; nothing for a lost face.
final class InteropFrameEncoderTests: XCTestCase {
    static func frame(seed: UInt64, micros: UInt64) -> ExpressionFrame {
        ExpressionFrame(sequence: UInt32(seed), captureTimeMicros: micros, state: .tracked, expression: TestExpressions.random(seed: seed))
    }

    func testVMCFrameCarriesTheExpressionAndCaptureTime() throws {
        let frame = Self.frame(seed: 5, micros: 1_250_000)
        let datagrams = try InteropFrameEncoder(kind: .vmc).datagrams(for: frame)
        XCTAssertGreaterThan(datagrams.count, 1, "a full frame is more than one 1 400-byte datagram")
        XCTAssertTrue(datagrams.allSatisfy { $0.count <= 1_400 })
        var receiver = VMCReceiver()
        let updates = try datagrams.compactMap { try receiver.receive($0) }
        XCTAssertEqual(updates.count, 1, "one apply per frame, in the last datagram")
        let sent = ExpressionUpdate(frame.expression, time: 1.25)
        XCTAssertEqual(updates[0].coefficients, sent.coefficients)
        XCTAssertEqual(updates[0].time, 1.25)
        VMCTests.assertClose(try XCTUnwrap(updates[0].head), try XCTUnwrap(sent.head))
        VMCTests.assertClose(try XCTUnwrap(updates[0].leftEye), try XCTUnwrap(sent.leftEye))
    }

    func testLiveLinkPacketCarriesTheExpressionAtTheTrackersFrameRate() throws {
        let encoder = InteropFrameEncoder(kind: .liveLink, deviceID: "dev", subjectName: "Face", framesPerSecond: 25)
        let frame = Self.frame(seed: 6, micros: 2_020_000)
        let datagrams = try encoder.datagrams(for: frame)
        XCTAssertEqual(datagrams.count, 1)
        let packet = try LiveLinkFacePacket(decoding: datagrams[0])
        XCTAssertEqual(packet.subjectName, "Face")
        XCTAssertEqual(packet.deviceID, "dev")
        XCTAssertEqual(packet.frameTime.frameNumber, 50)          // 2.02 s at 25 fps: frame 50.5
        XCTAssertEqual(packet.frameTime.subframe, 0.5, accuracy: 1e-4)
        XCTAssertEqual(packet.frameTime.rateNumerator, 25)
        XCTAssertEqual(try XCTUnwrap(packet.update.time), 2.02, accuracy: 1e-6)
        XCTAssertEqual(packet.update.coefficients, ExpressionUpdate(frame.expression).coefficients)
    }

    func testALostFaceSendsNothing() throws {
        let lost = ExpressionFrame(sequence: 1, captureTimeMicros: 33_000, state: .lost)
        for kind in InteropEndpoint.Kind.allCases {
            XCTAssertEqual(try InteropFrameEncoder(kind: kind).datagrams(for: lost), [], "\(kind)")
        }
    }

    func testLiveLinkSubjectNameTooLongIsRefused() {
        let encoder = InteropFrameEncoder(kind: .liveLink, subjectName: String(repeating: "x", count: 300))
        XCTAssertThrowsError(try encoder.datagrams(for: Self.frame(seed: 1, micros: 0))) { error in
            XCTAssertEqual(error as? InteropError, .oversized)
        }
    }
}
