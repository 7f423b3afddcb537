import Foundation
import VeilCore
import XCTest
@testable import VeilBench
import VeilInterop

/// The pieces of `veil bench`'s bandwidth comparison: what Veil's VMC and Live Link senders send
/// (over loopback), and the header model.
final class BandwidthTests: XCTestCase {
    // MARK: VMC and Live Link, as Veil's senders send them (the formats are tested in VeilInteropTests)

    /// What the bench weighs is what arrives from Veil's own senders: for a tracked frame, VMC
    /// datagrams of at most 1 400 B that decode to all 52 blendshapes and carry exactly what
    /// `VMCEncoder` makes, and one Live Link packet of the published size; nothing for a lost frame.
    func testTheInteropWireWeighsWhatVeilsSendersSend() throws {
        let expression = VeilCore.Expression(headPose: HeadPose(yaw: 10, pitch: -5, roll: 2), gaze: Gaze(x: 0.2, y: -0.1))
        let frame = ExpressionFrame(sequence: 7, captureTimeMicros: 1_500_000, state: .tracked, expression: expression)
        let wire = try InteropWire()
        let sent = try wire.send(frame)
        let expected = VMCEncoder().datagrams(for: ExpressionUpdate(expression, time: 1.5))
        XCTAssertEqual(sent.vmc, expected.map(\.count))
        XCTAssertGreaterThanOrEqual(sent.vmc.count, 2, "52 blendshapes do not fit one 1 400-byte datagram")
        XCTAssertTrue(sent.vmc.allSatisfy { $0 <= 1_400 }, "\(sent.vmc)")
        var receiver = VMCReceiver()
        var update: ExpressionUpdate?
        for datagram in expected { update = try receiver.receive(datagram) ?? update }
        XCTAssertEqual(update?.coefficients.count, 52, "the apply completes the expression")
        // Live Link: the version byte, the sender's device id (a UUID, 36 B) and subject ("Veil"),
        // each after its length, the frame time (16 B), the count and 61 floats.
        XCTAssertEqual(sent.liveLink.count, 1)
        let liveLinkBytes = 1 + (4 + 36) + (4 + 4) + 16 + 1 + 61 * 4
        XCTAssertEqual(sent.liveLink.first, liveLinkBytes)
        let lost = try wire.send(ExpressionFrame(sequence: 8, captureTimeMicros: 1_533_333, state: .lost))
        XCTAssertEqual(lost, InteropWire.Datagrams(vmc: [], liveLink: []))
    }

    // MARK: Header model

    func testDataChannelMessageAddsIPUDPDTLSAndSCTPHeadersAndPadding() {
        let model = WireOverhead()
        XCTAssertEqual(model.perDTLSPacket, 20 + 8 + 13 + 24)
        // 44 B: 20 IP + 8 UDP + 37 DTLS + 12 SCTP + 16 DATA + 44 = 137 B.
        XCTAssertEqual(model.dataChannelMessage(payload: 44).packets, 1)
        XCTAssertEqual(model.dataChannelMessage(payload: 44).bytes, 137)
        XCTAssertEqual(model.dataChannelMessage(payload: 45).bytes, 141, "chunk data padded to 4")
        XCTAssertEqual(model.dataChannelMessage(payload: 14).bytes, 93 + 16)
        // 2000 B over 1200-byte SCTP packets: 1172 + 828 in two packets.
        XCTAssertEqual(model.maximumChunkData, 1172)
        XCTAssertEqual(model.dataChannelMessage(payload: 2000).packets, 2)
        XCTAssertEqual(model.dataChannelMessage(payload: 2000).bytes, 2 * 93 + 2000)
        XCTAssertEqual(model.sackPacketBytes, 65 + 12 + 16)
        var v6 = WireOverhead()
        v6.ip = .v6
        XCTAssertEqual(v6.dataChannelMessage(payload: 44).bytes, 157)
    }

    func testRTPAndPlainUDPOverheads() {
        let model = WireOverhead()
        XCTAssertEqual(model.srtpPacketBytes(rtpBytes: 1200), 1200 + 10 + 8 + 20)
        XCTAssertEqual(model.udpDatagram(payload: 100).packets, 1)
        XCTAssertEqual(model.udpDatagram(payload: 100).bytes, 128)
        XCTAssertEqual(model.udpDatagram(payload: 1472).packets, 1, "1472 + 8 + 20 = 1500 fits")
        // A 2768-byte VMC bundle: a 2776-byte datagram in fragments of 1480, each with its own IP header.
        XCTAssertEqual(model.udpDatagram(payload: 2768).packets, 2)
        XCTAssertEqual(model.udpDatagram(payload: 2768).bytes, 2776 + 2 * 20)
    }

    func testGroupedNumbers() {
        XCTAssertEqual(BenchReport.Bandwidth.grouped(1311), "1 311")
        XCTAssertEqual(BenchReport.Bandwidth.grouped(235_975.4), "235 975")
        XCTAssertEqual(BenchReport.Bandwidth.grouped(44), "44")
    }
}
