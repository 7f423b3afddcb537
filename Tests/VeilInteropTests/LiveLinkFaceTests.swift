import VeilCore
import VeilInterop
import XCTest
import VeilTestSupport

/// Live Link Face packets: a golden packet written out byte by byte from the published layout
/// (version 6: version byte, device id and subject name as big-endian Int32 length + UTF-8, the
/// frame time as Int32 frame, Float32 subframe, Int32 rate numerator and denominator, a count byte,
/// 61 big-endian Float32), both ways; a round trip; and everything a decoder must refuse.
final class LiveLinkFaceTests: XCTestCase {
    static let zero: [UInt8] = [0x00, 0x00, 0x00, 0x00]

    /// Device "AB", subject "iPhone", frame 1000 + 0.5 at 60/1 fps; eyeBlinkLeft 0.5, jawOpen 1,
    /// tongueOut 0.25; head yaw 0.5, pitch −0.25 (chin down on the wire), roll 0.125 rad; left eye
    /// yaw 0.25; right eye pitch −0.5.
    static let golden: [UInt8] = {
        var bytes: [UInt8] = [
            0x06,                                           // version 6
            0x00, 0x00, 0x00, 0x02, 0x41, 0x42,             // device id: 2 bytes, "AB"
            0x00, 0x00, 0x00, 0x06, 0x69, 0x50, 0x68, 0x6f, 0x6e, 0x65, // subject name: 6 bytes, "iPhone"
            0x00, 0x00, 0x03, 0xe8,                         // frame number 1000
            0x3f, 0x00, 0x00, 0x00,                         // subframe 0.5
            0x00, 0x00, 0x00, 0x3c,                         // rate numerator 60
            0x00, 0x00, 0x00, 0x01,                         // rate denominator 1
            0x3d,                                           // 61 values
        ]
        let values: [[UInt8]] = [
            [0x3f, 0x00, 0x00, 0x00], // 0 eyeBlinkLeft 0.5
            zero, zero, zero, zero, zero, zero,              // 1-6 eyeLookDownLeft … eyeWideLeft
            zero, zero, zero, zero, zero, zero, zero,        // 7-13 eyeBlinkRight … eyeWideRight
            zero, zero, zero,                                // 14-16 jawForward, jawLeft, jawRight
            [0x3f, 0x80, 0x00, 0x00], // 17 jawOpen 1.0
            zero, zero, zero, zero, zero,                    // 18-22 mouthClose … mouthRight
            zero, zero, zero, zero, zero, zero, zero, zero,  // 23-30 mouthSmileLeft … mouthStretchRight
            zero, zero, zero, zero,                          // 31-34 mouthRollLower … mouthShrugUpper
            zero, zero, zero, zero, zero, zero,              // 35-40 mouthPressLeft … mouthUpperUpRight
            zero, zero, zero, zero, zero,                    // 41-45 browDownLeft … browOuterUpRight
            zero, zero, zero, zero, zero,                    // 46-50 cheekPuff … noseSneerRight
            [0x3e, 0x80, 0x00, 0x00], // 51 tongueOut 0.25
            [0x3f, 0x00, 0x00, 0x00], // 52 head yaw 0.5
            [0xbe, 0x80, 0x00, 0x00], // 53 head pitch -0.25
            [0x3e, 0x00, 0x00, 0x00], // 54 head roll 0.125
            [0x3e, 0x80, 0x00, 0x00], // 55 left eye yaw 0.25
            zero, zero,                                      // 56-57 left eye pitch, roll
            zero,                                            // 58 right eye yaw
            [0xbf, 0x00, 0x00, 0x00], // 59 right eye pitch -0.5
            zero,                                            // 60 right eye roll
        ]
        precondition(values.count == 61)
        for value in values { bytes += value }
        return bytes
    }()

    static var goldenPacket: LiveLinkFacePacket {
        var update = ExpressionUpdate(head: EulerAngles(yaw: 0.5, pitch: 0.25, roll: 0.125),
                                      leftEye: EulerAngles(yaw: 0.25), rightEye: EulerAngles(pitch: 0.5),
                                      time: (1000 + 0.5) / 60)
        for shape in BlendShape.allCases { update[shape] = 0 }
        update[.eyeBlinkLeft] = 0.5
        update[.jawOpen] = 1
        update[.tongueOut] = 0.25
        return LiveLinkFacePacket(deviceID: "AB", subjectName: "iPhone",
                                  frameTime: .init(frameNumber: 1000, subframe: 0.5, rateNumerator: 60, rateDenominator: 1),
                                  update: update)
    }

    func testGoldenPacketDecodes() throws {
        XCTAssertEqual(Self.golden.count, 1 + 6 + 10 + 16 + 1 + 61 * 4)
        let packet = try LiveLinkFacePacket(decoding: Self.golden)
        XCTAssertEqual(packet, Self.goldenPacket)
        XCTAssertEqual(packet.update.expression.headPose.pitch, 0.25 * 180 / .pi, accuracy: 1e-4, "chin up in Veil")
    }

    func testGoldenPacketEncodes() throws {
        XCTAssertEqual(try Self.goldenPacket.encoded(), Self.golden)
    }

    /// Veil → Live Link → Veil: every coefficient and angle exactly (Float32 both ways).
    func testRoundTripKeepsCoefficientsAndAngles() throws {
        for seed in 0..<200 as Range<UInt64> {
            let expression = TestExpressions.random(seed: seed)
            let sent = ExpressionUpdate(expression, time: Double(seed) / 30)
            let packet = LiveLinkFacePacket(deviceID: "5A1F2E3C-0000-4000-8000-000000000000", subjectName: "Veil",
                                            frameTime: .init(seconds: Double(seed) / 30), update: sent)
            let decoded = try LiveLinkFacePacket(decoding: packet.encoded())
            XCTAssertEqual(decoded.deviceID, packet.deviceID)
            XCTAssertEqual(decoded.subjectName, "Veil")
            XCTAssertEqual(decoded.update.coefficients, sent.coefficients)
            XCTAssertEqual(decoded.update.head, sent.head)
            XCTAssertEqual(decoded.update.leftEye, sent.leftEye)
            XCTAssertEqual(decoded.update.rightEye, sent.rightEye)
            XCTAssertEqual(decoded.update.time ?? -1, Double(seed) / 30, accuracy: 1e-6)
            let back = decoded.update.expression
            XCTAssertEqual(back.coefficients, expression.coefficients)
            XCTAssertEqual(back.headPose.yaw, expression.headPose.yaw, accuracy: 1e-4 * 180 / .pi)
            XCTAssertEqual(back.headPose.pitch, expression.headPose.pitch, accuracy: 1e-4 * 180 / .pi)
            XCTAssertEqual(back.headPose.roll, expression.headPose.roll, accuracy: 1e-4 * 180 / .pi)
        }
    }

    func testValuesAreClamped() throws {
        var bytes = Self.golden
        func put(_ value: Float, at index: Int) {
            let bits = value.bitPattern, at = 34 + index * 4
            bytes[at..<(at + 4)] = [UInt8(bits >> 24), UInt8(bits >> 16 & 0xff), UInt8(bits >> 8 & 0xff), UInt8(bits & 0xff)]
        }
        put(.nan, at: 0); put(7, at: 1); put(-.infinity, at: 2); put(-0.5, at: 3)
        put(10, at: 52); put(.nan, at: 53); put(-.infinity, at: 54); put(3, at: 59)
        let update = try LiveLinkFacePacket(decoding: bytes).update
        XCTAssertEqual([update[.eyeBlinkLeft], update[.eyeLookDownLeft], update[.eyeLookInLeft], update[.eyeLookOutLeft]], [0, 1, 0, 0])
        XCTAssertEqual(update.head, EulerAngles(yaw: .pi, pitch: 0, roll: -.pi))
        XCTAssertEqual(update.rightEye?.pitch, -.pi / 2, "wire pitch 3 is Veil's −3, clamped to −π/2")
    }

    func testRefusesMalformedPackets() {
        var wrongVersion = Self.golden
        wrongVersion[0] = 5
        assertRefused(wrongVersion, .unknownVersion)
        var wrongCount = Self.golden
        wrongCount[33] = 52
        assertRefused(wrongCount, .wrongCount)
        assertRefused(Array(wrongCount.prefix(34 + 52 * 4)), .wrongCount, "52 values, honestly counted")
        assertRefused([], .truncated)
        assertRefused(Array(Self.golden.dropLast()), .truncated)
        assertRefused(Array(Self.golden.prefix(20)), .truncated)
        assertRefused(Self.golden + [0], .malformed, "a byte after the values")
        var negative = Self.golden
        negative[1...4] = [0xff, 0xff, 0xff, 0xfe]
        assertRefused(negative, .malformed, "length −2")
        var huge = Self.golden
        huge[1...4] = [0x7f, 0xff, 0xff, 0xff]
        assertRefused(huge, .oversized, "a 2 GB device id")
        var longer = Self.golden
        longer[4] = 0x40
        assertRefused(Array(longer.prefix(40)), .truncated, "a 64-byte device id in a 40-byte packet")
        var badUTF8 = Self.golden
        badUTF8[5] = 0xff
        assertRefused(badUTF8, .malformed)
        assertRefused([UInt8](repeating: 6, count: 775), .oversized)
    }

    func testRefusesToEncodeOverlongNames() {
        var packet = Self.goldenPacket
        packet.subjectName = String(repeating: "s", count: 256)
        packet.deviceID = String(repeating: "d", count: 256)
        XCTAssertThrowsError(try packet.encoded()) { XCTAssertEqual($0 as? InteropError, .oversized, "\($0)") }
        packet.deviceID = String(repeating: "d", count: 248)
        XCTAssertEqual(try packet.encoded().count, LiveLinkFacePacket.maximumBytes)
        packet.subjectName = String(repeating: "s", count: 257)
        XCTAssertThrowsError(try packet.encoded()) { XCTAssertEqual($0 as? InteropError, .oversized, "\($0)") }
    }

    private func assertRefused(_ bytes: [UInt8], _ expected: InteropError, _ message: String = "",
                               file: StaticString = #filePath, line: UInt = #line) {
        do {
            let packet = try LiveLinkFacePacket(decoding: bytes)
            XCTFail("accepted \(packet); expected \(expected.kind). \(message)", file: file, line: line)
        } catch let error as InteropError {
            XCTAssertEqual(error, expected, "\(error). \(message)", file: file, line: line)
        } catch {
            XCTFail("threw \(error), not an InteropError", file: file, line: line)
        }
    }
}
