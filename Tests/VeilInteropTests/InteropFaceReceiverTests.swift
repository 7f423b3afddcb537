import VeilCore
import VeilInterop
import XCTest
import VeilTestSupport

/// `InteropFaceReceiver` without I/O: times are handed in, sources are names. One expression per
/// Live Link packet and per VMC apply, one sender, lost frames when the sender stops, one note per
/// kind of bad input, and no more tracked frames than about 60 a second.
final class InteropFaceReceiverTests: XCTestCase {
    typealias Receiver = InteropFaceReceiver<String>

    static func liveLink(_ expression: VeilCore.Expression, time: Double = 0) throws -> [UInt8] {
        try LiveLinkFacePacket(deviceID: "phone", subjectName: "iPhone", frameTime: .init(seconds: time),
                               update: ExpressionUpdate(expression)).encoded()
    }

    /// Every frame due up to `now`.
    static func frames(_ receiver: inout Receiver, at now: UInt64) -> [Receiver.Frame] {
        var frames: [Receiver.Frame] = []
        while let frame = receiver.frame(at: now) { frames.append(frame) }
        return frames
    }

    func testALiveLinkPacketIsOneTrackedFrameAtItsArrival() throws {
        var receiver = Receiver(.init(kind: .liveLink), at: 1_000_000)
        let expression = TestExpressions.random(seed: 3)
        let notes = receiver.receive(try Self.liveLink(expression), from: "phone", at: 1_010_000)
        XCTAssertEqual(notes.map(\.kind), ["source"])
        XCTAssertTrue(notes[0].description.contains("phone"), notes[0].description)
        let frames = Self.frames(&receiver, at: 1_012_000)
        XCTAssertEqual(frames.count, 1)
        guard case .tracked(let update, let at) = frames.first else { return XCTFail("\(frames)") }
        XCTAssertEqual(at, 1_010_000)
        XCTAssertEqual(update.coefficients, ExpressionUpdate(expression).coefficients)
        XCTAssertEqual(receiver.statistics.expressions, 1)
        XCTAssertEqual(receiver.statistics.source, "phone")
        XCTAssertTrue(Self.frames(&receiver, at: 1_050_000).isEmpty, "nothing new, not yet lost")
    }

    func testAVMCExpressionCompletesAtItsApply() throws {
        var receiver = Receiver(.init(kind: .vmc), at: 0)
        let update = ExpressionUpdate(TestExpressions.random(seed: 4), time: 1)
        let messages = VMCEncoder().messages(for: update)
        // Everything but the apply, then the apply alone, in separate datagrams.
        _ = receiver.receive(OSCBundle(elements: messages.dropLast().map { .message($0) }).encoded(), from: "performer", at: 10_000)
        XCTAssertTrue(Self.frames(&receiver, at: 20_000).isEmpty)
        _ = receiver.receive(OSCMessage(VMC.Address.blendApply).encoded(), from: "performer", at: 30_000)
        let frames = Self.frames(&receiver, at: 30_000)
        guard case .tracked(let received, 30_000) = frames.first, frames.count == 1 else { return XCTFail("\(frames)") }
        XCTAssertEqual(received.coefficients, update.coefficients)
        VMCTests.assertClose(try XCTUnwrap(received.head), try XCTUnwrap(update.head))
    }

    func testASenderThatStopsGivesLostFramesThirtyASecondUntilItComesBack() throws {
        var receiver = Receiver(.init(kind: .liveLink), at: 0)
        // Nothing yet: lost from 100 ms on, every 33 ms.
        XCTAssertTrue(Self.frames(&receiver, at: 99_000).isEmpty)
        XCTAssertEqual(Self.frames(&receiver, at: 100_000), [.lost(atMicros: 100_000)])
        XCTAssertTrue(Self.frames(&receiver, at: 120_000).isEmpty)
        XCTAssertEqual(Self.frames(&receiver, at: 133_333), [.lost(atMicros: 133_333)])
        // A sender at 30 frames/s for a second: tracked frames only.
        var tracked = 0
        for n in 0..<30 {
            let t = UInt64(200_000 + n * 33_333)
            _ = receiver.receive(try Self.liveLink(TestExpressions.random(seed: UInt64(n))), from: "phone", at: t)
            for frame in Self.frames(&receiver, at: t + 1_000) {
                guard case .tracked = frame else { return XCTFail("lost while the sender sends: \(frame)") }
                tracked += 1
            }
        }
        XCTAssertEqual(tracked, 30)
        // It stops: lost 100 ms after its last expression, then every 33 ms; a stall sends one, not a burst.
        let last = UInt64(200_000 + 29 * 33_333)
        XCTAssertTrue(Self.frames(&receiver, at: last + 99_000).isEmpty)
        XCTAssertEqual(Self.frames(&receiver, at: last + 100_000), [.lost(atMicros: last + 100_000)])
        XCTAssertEqual(Self.frames(&receiver, at: last + 140_000), [.lost(atMicros: last + 140_000)])
        XCTAssertEqual(Self.frames(&receiver, at: last + 2_000_000).count, 1, "after a stall, one lost frame")
        XCTAssertEqual(receiver.nextFrameMicros, last + 2_033_333)
        // It comes back: tracked again at once.
        _ = receiver.receive(try Self.liveLink(.neutral), from: "phone", at: last + 2_010_000)
        guard case .tracked = Self.frames(&receiver, at: last + 2_010_000).first else { return XCTFail("not tracked again") }
        XCTAssertEqual(receiver.statistics.framesTracked, 31)
        XCTAssertEqual(receiver.statistics.framesLost, 5)
    }

    func testTheFirstSenderIsKeptAndOthersAreCountedOnce() throws {
        var receiver = Receiver(.init(kind: .liveLink), at: 0)
        // Garbage from a scanner does not take the receiver.
        XCTAssertEqual(receiver.receive([1, 2, 3], from: "scanner", at: 1_000).map(\.kind), ["dropped:unknownVersion"])
        XCTAssertEqual(receiver.receive(try Self.liveLink(.neutral), from: "phone", at: 2_000).map(\.kind), ["source"])
        var notes: [Receiver.Note] = []
        for n in 0..<100 { notes += receiver.receive(try Self.liveLink(.neutral), from: n % 2 == 0 ? "scanner" : "laptop", at: 3_000) }
        XCTAssertEqual(notes.map(\.kind), ["otherSource"])
        XCTAssertTrue(notes[0].description.contains("scanner") && notes[0].description.contains("phone"), notes[0].description)
        XCTAssertEqual(receiver.statistics.fromOtherSources, 100)
        XCTAssertEqual(receiver.statistics.expressions, 1)
        XCTAssertEqual(receiver.acceptedSources, ["phone"])
    }

    func testANamedSenderIsTheOnlyOneRead() throws {
        var receiver = Receiver(.init(kind: .liveLink, expectedSources: ["phone", "phone6"]), at: 0)
        XCTAssertEqual(receiver.statistics.source, "phone or phone6")
        XCTAssertEqual(receiver.receive(try Self.liveLink(.neutral), from: "laptop", at: 1_000).map(\.kind), ["otherSource"])
        XCTAssertEqual(receiver.receive(try Self.liveLink(.neutral), from: "phone6", at: 2_000).map(\.kind), ["source"])
        _ = receiver.receive(try Self.liveLink(.neutral), from: "phone", at: 3_000)
        XCTAssertEqual(receiver.statistics.expressions, 2)
        XCTAssertEqual(receiver.statistics.fromOtherSources, 1)
    }

    func testBadInputIsCountedByKindWithOneNoteEach() throws {
        var liveLink = Receiver(.init(kind: .liveLink), at: 0)
        let good = try Self.liveLink(TestExpressions.random(seed: 5))
        var badVersion = good; badVersion[0] = 7
        var badCount = good; badCount[badCount.count - 61 * 4 - 1] = 60
        let oversized = good + [UInt8](repeating: 0, count: 1_000)
        let cases: [([UInt8], Bool, String)] = [(Array(good.prefix(40)), false, "truncated"), (badVersion, false, "unknownVersion"),
                                                (badCount, false, "wrongCount"), (oversized, false, "oversized"),
                                                (good + [0], false, "malformed"), (good, true, "oversized")]
        var notes: [Receiver.Note] = []
        _ = liveLink.receive(good, from: "phone", at: 0)
        for round in 0..<50 {
            for (bytes, truncated, _) in cases { notes += liveLink.receive(bytes, truncated: truncated, from: "phone", at: UInt64(round)) }
        }
        XCTAssertEqual(notes.map(\.kind).sorted(), ["dropped:malformed", "dropped:oversized", "dropped:truncated", "dropped:unknownVersion", "dropped:wrongCount"])
        XCTAssertEqual(liveLink.statistics.dropped, ["truncated": 50, "unknownVersion": 50, "wrongCount": 50, "oversized": 100, "malformed": 50])
        XCTAssertEqual(liveLink.statistics.expressions, 1)

        var vmc = Receiver(.init(kind: .vmc), at: 0)
        let messages = [OSCMessage("/VMC/Ext/Cam", [.string("cam")]), OSCMessage(VMC.Address.blendValue, [.string("A"), .float32(1)]),
                        OSCMessage(VMC.Address.bone, [.string("Hips")] + Array(repeating: OSCArgument.float32(0), count: 6) + [.float32(1)]),
                        OSCMessage(VMC.Address.blendValue, [.int32(3)]), OSCMessage(VMC.Address.blendValue, [.string("jawOpen"), .float32(7)]),
                        OSCMessage(VMC.Address.blendApply)]
        let datagram = OSCBundle(elements: messages.map { .message($0) }).encoded()
        notes = []
        for _ in 0..<20 { notes += vmc.receive(datagram, from: "performer", at: 0) }
        notes += vmc.receive([0x2f, 0x61, 0, 0, 0x2c, 0x64, 0, 0] + [UInt8](repeating: 0, count: 8), from: "performer", at: 0)
        XCTAssertEqual(notes.map(\.kind), ["source", "dropped:unknownAddress", "dropped:otherBone", "dropped:unknownBlendShape",
                                           "dropped:malformedMessage", "dropped:unsupportedType"])
        XCTAssertEqual(vmc.statistics.dropped, ["unknownAddress": 20, "otherBone": 20, "unknownBlendShape": 20, "malformedMessage": 20, "unsupportedType": 1])
        // The out-of-range value is clamped.
        guard case .tracked(let update, _) = Self.frames(&vmc, at: 0).first else { return XCTFail("no frame") }
        XCTAssertEqual(update[.jawOpen], 1)
    }

    func testAFloodOfValidPacketsGivesAtMostAFrameEvery16Milliseconds() throws {
        var receiver = Receiver(.init(kind: .liveLink), at: 0)
        var frames: [Receiver.Frame] = []
        // 20 000 packets a second for a second, the frames taken out every millisecond.
        let packets = try (0..<20).map { k -> [UInt8] in
            var expression = VeilCore.Expression()
            expression[.jawOpen] = Float(k) / 20
            return try Self.liveLink(expression)
        }
        for ms in 0..<1_000 {
            for packet in packets { _ = receiver.receive(packet, from: "phone", at: UInt64(ms * 1_000)) }
            frames += Self.frames(&receiver, at: UInt64(ms * 1_000))
        }
        XCTAssertEqual(receiver.statistics.expressions, 20_000)
        XCTAssertEqual(frames.count, 63, "one every 16 ms")
        // Each is the newest expression of its moment.
        XCTAssertTrue(frames.allSatisfy { if case .tracked(let u, _) = $0 { return u[.jawOpen] == 0.95 } else { return false } })
    }
}
