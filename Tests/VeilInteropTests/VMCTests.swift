import VeilCore
import VeilInterop
import XCTest
import VeilTestSupport

/// The VMC protocol as Veil sends and reads it: what a frame holds, how it is split into
/// datagrams, and a receiver that is indifferent to order and counts what it ignores.
final class VMCTests: XCTestCase {
    /// `/VMC/Ext/Blend/Val` "jawOpen" 0.5, written out from the OSC rules by hand.
    func testBlendValueMessageBytes() {
        XCTAssertEqual(OSCMessage(VMC.Address.blendValue, [.string("jawOpen"), .float32(0.5)]).encoded(), [
            0x2f, 0x56, 0x4d, 0x43, 0x2f, 0x45, 0x78, 0x74, 0x2f, 0x42, 0x6c, 0x65, 0x6e, 0x64, 0x2f, 0x56, // "/VMC/Ext/Blend/V"
            0x61, 0x6c, 0x00, 0x00, // "al" + 2 NULs: 20 bytes
            0x2c, 0x73, 0x66, 0x00, // ",sf"
            0x6a, 0x61, 0x77, 0x4f, 0x70, 0x65, 0x6e, 0x00, // "jawOpen" + NUL
            0x3f, 0x00, 0x00, 0x00, // 0.5
        ])
    }

    func testAFrameIsStatusTimeRootBonesEveryBlendshapeThenApply() throws {
        let expression = TestExpressions.random(seed: 1)
        let update = ExpressionUpdate(expression, time: 12.5)
        let messages = VMCEncoder().messages(for: update)
        XCTAssertEqual(messages.map(\.address).prefix(6), [VMC.Address.ok, VMC.Address.time, VMC.Address.root,
                                                           VMC.Address.bone, VMC.Address.bone, VMC.Address.bone])
        XCTAssertEqual(messages[0].arguments, [.int32(1)])
        XCTAssertEqual(messages[1].arguments, [.float32(12.5)])
        XCTAssertEqual(messages[2].arguments, [.string("root"), .float32(0), .float32(0), .float32(0), .float32(0), .float32(0), .float32(0), .float32(1)])
        XCTAssertEqual(messages[3...5].map { $0.arguments.first }, [.string("Head"), .string("LeftEye"), .string("RightEye")])
        XCTAssertEqual(messages[3].arguments.count, 8)
        let blends = messages[6..<58]
        XCTAssertEqual(blends.map { $0.arguments[0] }, BlendShape.allCases.map { .string($0.name) })
        XCTAssertEqual(blends.map { $0.arguments[1] }, BlendShape.allCases.map { .float32(expression[$0]) })
        XCTAssertEqual(messages.last, OSCMessage(VMC.Address.blendApply))
        XCTAssertEqual(messages.count, 59)
        // Without a gaze there are no eye bones.
        XCTAssertEqual(VMCEncoder().messages(for: ExpressionUpdate(VeilCore.Expression())).filter { $0.address == VMC.Address.bone }.count, 1)
    }

    func testAFrameIsSplitIntoDatagramsThatFitAndKeepTheirOrder() throws {
        let update = ExpressionUpdate(TestExpressions.random(seed: 2), time: 1)
        for limit in [512, 900, 1_400, 65_507] {
            let encoder = VMCEncoder(options: .init(maximumDatagramBytes: limit))
            let datagrams = encoder.datagrams(for: update)
            XCTAssertTrue(datagrams.allSatisfy { $0.count <= limit }, "\(limit): \(datagrams.map(\.count))")
            let decoded = try datagrams.flatMap { try OSCPacket(decoding: $0).messages }
            XCTAssertEqual(decoded, encoder.messages(for: update), "\(limit)")
        }
        XCTAssertEqual(VMCEncoder().datagrams(for: update).count, 3, "about 2.9 KB in 1 400-byte datagrams")
        XCTAssertEqual(VMCEncoder(options: .init(maximumDatagramBytes: 65_507)).datagrams(for: update).count, 1)
    }

    /// Veil → VMC → Veil keeps every coefficient exactly (they travel as Float32) and every angle
    /// within 1e-4 rad.
    func testRoundTripKeepsCoefficientsAndAngles() throws {
        for seed in 0..<200 as Range<UInt64> {
            let expression = TestExpressions.random(seed: seed)
            let sent = ExpressionUpdate(expression, time: Double(seed) / 30)
            var receiver = VMCReceiver()
            var received: ExpressionUpdate?
            for datagram in VMCEncoder().datagrams(for: sent) {
                received = try receiver.receive(datagram)
            }
            let update = try XCTUnwrap(received, "the last datagram holds the apply")
            XCTAssertEqual(update.coefficients, sent.coefficients)
            for (a, b) in [(update.head, sent.head), (update.leftEye, sent.leftEye), (update.rightEye, sent.rightEye)] {
                try Self.assertClose(XCTUnwrap(a), XCTUnwrap(b))
            }
            XCTAssertEqual(update.time ?? -1, Double(Float(Double(seed) / 30)))
            let back = update.expression
            XCTAssertEqual(back.coefficients, expression.coefficients)
            XCTAssertEqual(back.headPose.yaw, expression.headPose.yaw, accuracy: 1e-4 * 180 / .pi)
            XCTAssertEqual(back.headPose.pitch, expression.headPose.pitch, accuracy: 1e-4 * 180 / .pi)
            XCTAssertEqual(back.headPose.roll, expression.headPose.roll, accuracy: 1e-4 * 180 / .pi)
            XCTAssertEqual(back.gaze?.x ?? 9, expression.gaze?.x ?? 9, accuracy: 1e-3)
            XCTAssertEqual(back.gaze?.y ?? 9, expression.gaze?.y ?? 9, accuracy: 1e-3)
            XCTAssertEqual(receiver.statistics.unknownAddresses + receiver.statistics.malformedMessages, 0)
        }
    }

    func testReceiverIgnoresOrderAndCountsWhatItDoesNotRead() throws {
        let head = EulerAngles(yaw: 0.3, pitch: -0.2, roll: 0.1)
        let headMessage = OSCMessage(VMC.Address.bone, [.string("Head"), .float32(0), .float32(0.1), .float32(0)]
            + Self.quaternionArguments(head.unityQuaternion))
        let messages: [OSCMessage] = [
            OSCMessage(VMC.Address.blendApply),                                       // apply first: read at the datagram's end
            OSCMessage(VMC.Address.blendValue, [.string("EyeBlinkLeft"), .float32(2)]), // any letter case; clamped to 1
            OSCMessage(VMC.Address.blendValue, [.string("jawOpen"), .int32(0)]),      // an int is a number too
            OSCMessage(VMC.Address.blendValue, [.string("A"), .float32(0.5)]),        // VRM's, not ARKit's
            OSCMessage(VMC.Address.blendValue, [.string("mouthClose"), .float32(.nan)]), // NaN is 0
            OSCMessage(VMC.Address.blendValue, [.string("cheekPuff")]),               // too few arguments
            OSCMessage(VMC.Address.bone, [.string("Hips")] + Array(repeating: .float32(0), count: 6) + [.float32(1)]),
            OSCMessage(VMC.Address.bone, [.string("LeftEye"), .float32(0)]),          // too few
            OSCMessage(VMC.Address.bone, [.string("RightEye")] + Array(repeating: .float32(0), count: 7)), // zero quaternion
            OSCMessage("/VMC/Ext/Cam", [.string("Camera")]),
            OSCMessage(VMC.Address.time, [.float32(3.5), .int32(1)]),                 // extra arguments are ignored
            headMessage,
        ]
        var receiver = VMCReceiver()
        let update = try XCTUnwrap(receiver.receive(OSCBundle(elements: messages.map { .message($0) }).encoded()))
        XCTAssertEqual(update.coefficients, ["eyeBlinkLeft": 1, "jawOpen": 0, "mouthClose": 0])
        try Self.assertClose(XCTUnwrap(update.head), head)
        XCTAssertNil(update.leftEye)
        XCTAssertNil(update.rightEye)
        XCTAssertEqual(update.time, 3.5)
        var expected = VMCReceiver.Statistics()
        expected.datagrams = 1; expected.updates = 1; expected.unknownAddresses = 1
        expected.malformedMessages = 3; expected.otherBones = 1; expected.unknownBlendShapes = 1
        XCTAssertEqual(receiver.statistics, expected)
        // No apply, no update; the values are kept for the next one.
        XCTAssertNil(try receiver.receive(OSCMessage(VMC.Address.blendValue, [.string("cheekPuff"), .float32(0.25)]).encoded()))
        let next = try XCTUnwrap(receiver.receive(OSCMessage(VMC.Address.blendApply).encoded()))
        XCTAssertEqual(next.coefficients["cheekPuff"], 0.25)
        XCTAssertEqual(next.coefficients["eyeBlinkLeft"], 1)
    }

    func testReceiverRefusesWhatIsNotOSCAndKeepsItsState() throws {
        var receiver = VMCReceiver()
        _ = try receiver.receive(OSCMessage(VMC.Address.blendValue, [.string("jawOpen"), .float32(0.75)]).encoded())
        XCTAssertThrowsError(try receiver.receive([1, 2, 3])) { XCTAssertEqual($0 as? InteropError, .malformed) }
        XCTAssertEqual(try receiver.receive(OSCMessage(VMC.Address.blendApply).encoded())?.coefficients, ["jawOpen": 0.75])
        XCTAssertEqual(receiver.statistics.datagrams, 2)
    }

    // MARK: Helpers

    static func assertClose(_ a: EulerAngles, _ b: EulerAngles, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(a.yaw, b.yaw, accuracy: 1e-4, "yaw of \(a) against \(b)", file: file, line: line)
        XCTAssertEqual(a.pitch, b.pitch, accuracy: 1e-4, "pitch of \(a) against \(b)", file: file, line: line)
        XCTAssertEqual(a.roll, b.roll, accuracy: 1e-4, "roll of \(a) against \(b)", file: file, line: line)
    }

    static func quaternionArguments(_ q: SIMD4<Float>) -> [OSCArgument] {
        [.float32(q.x), .float32(q.y), .float32(q.z), .float32(q.w)]
    }
}
