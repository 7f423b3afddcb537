import Foundation
import VeilCore
import XCTest
@testable import VeilBench
import VeilInterop

/// The pieces of `veil bench`'s bandwidth comparison that are pure: the VMC frame (built on
/// VeilInterop's OSC encoder) and the header model.
final class BandwidthTests: XCTestCase {
    // MARK: VMC (OSC itself is tested in VeilInteropTests)

    /// A VMC frame is a well-formed bundle: element sizes chain to the end, the blendshape values
    /// are all 52 under ARKit's names, and the size is what the OSC rules give.
    func testVMCFrameCarriesEveryBlendshapeInAWellFormedBundle() throws {
        let expression = VeilCore.Expression(headPose: HeadPose(yaw: 10, pitch: -5, roll: 2), gaze: Gaze(x: 0.2, y: -0.1))
        let bytes = VMCFrame.bundle(for: expression, timeSeconds: 1.5).encoded()
        var offset = 16
        var addresses: [String] = []
        var blendNames: [String] = []
        while offset < bytes.count {
            let size = Int(bytes[offset]) << 24 | Int(bytes[offset + 1]) << 16 | Int(bytes[offset + 2]) << 8 | Int(bytes[offset + 3])
            XCTAssertEqual(size % 4, 0)
            let element = Array(bytes[(offset + 4)..<(offset + 4 + size)])
            let address = String(decoding: element.prefix { $0 != 0 }, as: UTF8.self)
            addresses.append(address)
            if address == "/VMC/Ext/Blend/Val" {
                // address (20) + ",sf" (4), then the name.
                blendNames.append(String(decoding: element[24...].prefix { $0 != 0 }, as: UTF8.self))
            }
            offset += 4 + size
        }
        XCTAssertEqual(offset, bytes.count, "sizes chain exactly to the end")
        XCTAssertEqual(addresses.first, "/VMC/Ext/T")
        XCTAssertEqual(addresses.last, "/VMC/Ext/Blend/Apply")
        XCTAssertEqual(addresses.filter { $0 == "/VMC/Ext/Bone/Pos" }.count, 3, "head and both eyes")
        XCTAssertEqual(blendNames, BlendShape.allCases.map(\.name))
        // Per Blend/Val: 4 (size) + 20 (address) + 4 (",sf") + padded name + 4 (float).
        let blendBytes = BlendShape.allCases.reduce(0) { $0 + 4 + 20 + 4 + ($1.name.utf8.count / 4 + 1) * 4 + 4 }
        // Bone/Pos: 4 + 20 (address) + 12 (",sfffffff") + name + 28 (7 floats); names "Head", "LeftEye", "RightEye".
        let boneBytes = [8, 8, 12].reduce(0) { $0 + 4 + 20 + 12 + $1 + 28 }
        XCTAssertEqual(bytes.count, 16 + (4 + 12 + 4 + 4) + boneBytes + blendBytes + (4 + 28))
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
