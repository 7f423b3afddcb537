import Foundation
import VeilCore
import XCTest
@testable import VeilBench

/// The pieces of `veil bench`'s bandwidth comparison that are pure: the OSC encoder (against the
/// OSC 1.0 specification's own examples), the VMC frame built on it, and the header model.
final class BandwidthTests: XCTestCase {
    // MARK: OSC 1.0

    /// The specification's first example: `/oscillator/4/frequency` with the float 440.
    func testOSCMessageWithOneFloatMatchesTheSpecification() {
        let bytes = OSCMessage("/oscillator/4/frequency", [.float32(440)]).encoded()
        XCTAssertEqual(bytes, [
            0x2f, 0x6f, 0x73, 0x63, 0x69, 0x6c, 0x6c, 0x61, 0x74, 0x6f, 0x72, 0x2f, 0x34, 0x2f, 0x66, 0x72,
            0x65, 0x71, 0x75, 0x65, 0x6e, 0x63, 0x79, 0x00, // "/oscillator/4/frequency" + 1 NUL = 24
            0x2c, 0x66, 0x00, 0x00, // ",f" padded to 4
            0x43, 0xdc, 0x00, 0x00, // 440.0f big-endian
        ])
    }

    /// The specification's second example: `/foo` with 1000, -1, "hello", 1.234, 5.678.
    func testOSCMessageWithMixedArgumentsMatchesTheSpecification() {
        let bytes = OSCMessage("/foo", [.int32(1000), .int32(-1), .string("hello"), .float32(1.234), .float32(5.678)]).encoded()
        XCTAssertEqual(bytes, [
            0x2f, 0x66, 0x6f, 0x6f, 0x00, 0x00, 0x00, 0x00, // "/foo": a whole word of NULs after 4 characters
            0x2c, 0x69, 0x69, 0x73, 0x66, 0x66, 0x00, 0x00, // ",iisff"
            0x00, 0x00, 0x03, 0xe8, // 1000
            0xff, 0xff, 0xff, 0xff, // -1
            0x68, 0x65, 0x6c, 0x6c, 0x6f, 0x00, 0x00, 0x00, // "hello"
            0x3f, 0x9d, 0xf3, 0xb6, // 1.234
            0x40, 0xb5, 0xb2, 0x2d, // 5.678
        ])
    }

    func testOSCBlobIsSizedAndPadded() {
        let bytes = OSCMessage("/b", [.blob([1, 2, 3, 4, 5])]).encoded()
        XCTAssertEqual(bytes, [0x2f, 0x62, 0, 0, 0x2c, 0x62, 0, 0, 0, 0, 0, 5, 1, 2, 3, 4, 5, 0, 0, 0])
    }

    func testOSCBundleHasHeaderTimeTagAndSizedElements() {
        let inner = OSCMessage("/VMC/Ext/Blend/Apply")
        let bundle = OSCBundle(timeTag: .immediately, elements: [.message(inner), .message(inner)])
        let bytes = bundle.encoded()
        let innerBytes = inner.encoded()
        XCTAssertEqual(innerBytes.count, 28, "24-byte address (20 characters + 4 NULs), then \",\" padded to 4")
        XCTAssertEqual(Array(bytes[0..<8]), Array("#bundle".utf8) + [0])
        XCTAssertEqual(Array(bytes[8..<16]), [0, 0, 0, 0, 0, 0, 0, 1], "time tag 1 means immediately")
        XCTAssertEqual(Array(bytes[16..<20]), [0, 0, 0, 28])
        XCTAssertEqual(Array(bytes[20..<48]), innerBytes)
        XCTAssertEqual(bytes.count, 16 + 2 * (4 + 28))
    }

    func testOSCTimeTagCountsFrom1900WithABinaryFraction() {
        let tag = OSCTimeTag(unixMicros: 500_000)
        XCTAssertEqual(tag.seconds, 2_208_988_800, "1970 is 2 208 988 800 s after 1900")
        XCTAssertEqual(tag.fraction, 0x8000_0000, "half a second")
    }

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

    func testHeadQuaternionIsAUnitRotationAboutTheRightAxis() {
        let yaw = VMCFrame.quaternion(yawDegrees: 90, pitchDegrees: 0, rollDegrees: 0)
        XCTAssertEqual(yaw.y, sin(Float.pi / 4), accuracy: 1e-6)
        XCTAssertEqual(yaw.w, cos(Float.pi / 4), accuracy: 1e-6)
        let any = VMCFrame.quaternion(yawDegrees: 20, pitchDegrees: -35, rollDegrees: 12)
        XCTAssertEqual((any * any).sum(), 1, accuracy: 1e-5)
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
