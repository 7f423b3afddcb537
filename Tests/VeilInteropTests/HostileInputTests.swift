import VeilCore
import VeilInterop
import XCTest
import VeilTestSupport

/// Thousands of damaged packets (truncated, bit-flipped, spliced, random, with sizes made huge)
/// into every decoder: each returns a valid decode with values in range or throws an
/// `InteropError`, and nothing traps (a trap would end the test process). Each is decoded twice:
/// as an array of its own, and as a slice of a larger buffer with other bytes on either side, as
/// the receiving socket's buffer holds it; both give the same value or the same error, down to
/// the byte offsets it names.
final class HostileInputTests: XCTestCase {
    func testDamagedPacketsAreDecodedOrClassified() throws {
        var random = SplitMix64(seed: 0x7E11)
        let vmc = VMCEncoder(options: .init(maximumDatagramBytes: 65_507)).datagrams(for: ExpressionUpdate(TestExpressions.random(seed: 5), time: 2))[0]
        let split = VMCEncoder().datagrams(for: ExpressionUpdate(TestExpressions.random(seed: 6), time: 3))
        let nested = OSCBundle(elements: [.bundle(OSCBundle(elements: [.message(OSCMessage("/x", [.blob([1, 2, 3]), .string("é"), .int32(-7)]))]))]).encoded()
        let liveLink = try LiveLinkFacePacket(deviceID: "D", subjectName: "S", frameTime: .init(seconds: 1), update: ExpressionUpdate(TestExpressions.random(seed: 7))).encoded()
        let seeds = [vmc, nested, liveLink, LiveLinkFaceTests.golden] + split

        var kinds: [String: Int] = [:]
        var decoded = 0
        var receiver = VMCReceiver(), sliceReceiver = VMCReceiver()
        for round in 0..<6_000 {
            let packet = Self.damage(seeds[round % seeds.count], &random)
            let slice = Self.inBuffer(packet, &random)
            kinds["osc " + Self.outcome { _ = try OSCPacket(decoding: packet) }, default: 0] += 1
            kinds["vmc " + Self.outcome {
                if let update = try receiver.receive(packet) { Self.assertInRange(update) }
            }, default: 0] += 1
            kinds["livelink " + Self.outcome {
                let update = try LiveLinkFacePacket(decoding: packet).update
                Self.assertInRange(update)
                decoded += 1
            }, default: 0] += 1
            XCTAssertEqual(Self.result { try OSCPacket(decoding: slice).encoded() }, Self.result { try OSCPacket(decoding: packet).encoded() },
                           "round \(round)")
            XCTAssertEqual(Self.result { try LiveLinkFacePacket(decoding: slice).encoded() },
                           Self.result { try LiveLinkFacePacket(decoding: packet).encoded() }, "round \(round)")
            _ = try? sliceReceiver.receive(slice)
            XCTAssertEqual(sliceReceiver.statistics, receiver.statistics, "round \(round)")
        }
        XCTAssertNil(kinds.keys.first { $0.hasSuffix("unclassified") }, "\(kinds)")
        // The damage is varied enough to reach the decoders' insides, not only their first check.
        for kind in ["truncated", "malformed", "oversized", "unsupportedType"] {
            XCTAssertGreaterThan(kinds["osc \(kind)"] ?? 0, 0, "no OSC packet was refused as \(kind): \(kinds)")
        }
        for kind in ["truncated", "malformed", "unknownVersion", "wrongCount"] {
            XCTAssertGreaterThan(kinds["livelink \(kind)"] ?? 0, 0, "no Live Link packet was refused as \(kind): \(kinds)")
        }
        XCTAssertGreaterThan(kinds["osc ok"] ?? 0, 100)
        XCTAssertGreaterThan(decoded, 100)
        print("hostile input: \(kinds.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))")
    }

    /// What a decode gave: the packet encoded again (bytes compare where NaNs and dictionaries
    /// would not), or the error with its message.
    private static func result(_ body: () throws -> [UInt8]) -> String {
        do { return "\(try body())" } catch { return "error: \(error)" }
    }

    /// `packet` as a socket's receive buffer holds it: a slice, with other bytes before and after.
    private static func inBuffer(_ packet: [UInt8], _ random: inout SplitMix64) -> ArraySlice<UInt8> {
        let before = Int(random.next() % 9), after = Int(random.next() % 9)
        let buffer = [UInt8](repeating: 0x2f, count: before) + packet + [UInt8](repeating: 0, count: after)
        return buffer[before..<(before + packet.count)]
    }

    /// "ok", the error's kind, or "unclassified" for an error that is not an InteropError.
    private static func outcome(_ body: () throws -> Void) -> String {
        do { try body(); return "ok" } catch let error as InteropError { return error.kind } catch { return "unclassified" }
    }

    private static func assertInRange(_ update: ExpressionUpdate) {
        for (name, value) in update.coefficients where !(0...1).contains(value) {
            XCTFail("\(name) = \(value)")
        }
        for angles in [update.head, update.leftEye, update.rightEye].compactMap({ $0 }) where angles != angles.clamped {
            XCTFail("angles out of range: \(angles)")
        }
    }

    /// One kind of damage, chosen at random.
    private static func damage(_ packet: [UInt8], _ random: inout SplitMix64) -> [UInt8] {
        var bytes = packet
        switch random.next() % 7 {
        case 0: // truncated
            bytes = Array(bytes.prefix(Int(random.next() % UInt64(bytes.count + 1))))
        case 1: // a few bits flipped
            for _ in 0...(random.next() % 4) where !bytes.isEmpty {
                bytes[Int(random.next() % UInt64(bytes.count))] ^= 1 << (random.next() % 8)
            }
        case 2: // a 4-byte field made huge, negative or zero
            if bytes.count >= 4 {
                let at = Int(random.next() % UInt64(bytes.count - 3)) & ~3
                let values: [[UInt8]] = [[0x7f, 0xff, 0xff, 0xff], [0xff, 0xff, 0xff, 0xfc], [0, 0, 0, 0], [0x80, 0, 0, 0], [0, 0, 1, 0]]
                bytes[at..<(at + 4)] = values[Int(random.next() % 5)][...]
            }
        case 3: // random bytes of a random length
            bytes = (0..<Int(random.next() % 300)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        case 4: // spliced: the head of one packet, a word of garbage, the rest
            let at = Int(random.next() % UInt64(bytes.count + 1))
            bytes.insert(contentsOf: [UInt8(truncatingIfNeeded: random.next()), 0, 0, 0], at: at)
        case 5: // a type tag or byte swapped for another printable character
            if !bytes.isEmpty { bytes[Int(random.next() % UInt64(bytes.count))] = UInt8(33 + random.next() % 94) }
        default: // grown past the size limits
            bytes += [UInt8](repeating: UInt8(truncatingIfNeeded: random.next()), count: Int(random.next() % 2) == 0 ? 70_000 : 800)
        }
        return bytes
    }
}
