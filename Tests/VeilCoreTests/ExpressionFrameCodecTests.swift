import Foundation
import XCTest
@testable import VeilCore

/// The golden vectors of docs/wire-format.md: the frames and the exact bytes they encode to.
enum GoldenVectors {
    static let lost = ExpressionFrame(sequence: 7, captureTimeMicros: 1_000_000, state: .lost)
    static let lostHex = "01 00 07 00 00 00 40 42 0F 00 00 00 63 70"

    static let typical: ExpressionFrame = {
        var e = Expression(headPose: HeadPose(yaw: 12.5, pitch: -5.25, roll: 3), gaze: Gaze(x: 0.25, y: -0.1))
        e[.eyeBlinkLeft] = 0.2; e[.eyeBlinkRight] = 0.2
        e[.jawOpen] = 0.6
        e[.mouthSmileLeft] = 0.8; e[.mouthSmileRight] = 0.75
        e[.mouthLowerDownLeft] = 0.25; e[.mouthLowerDownRight] = 0.25
        e[.browInnerUp] = 0.4; e[.browOuterUpLeft] = 0.35; e[.browOuterUpRight] = 0.35
        e[.cheekSquintLeft] = 0.15; e[.cheekSquintRight] = 0.15
        return ExpressionFrame(sequence: 1234, captureTimeMicros: 123_456_789, state: .tracked, expression: e)
    }()
    static let typicalHex = """
        01 03 D2 04 00 00 15 CD 5B 07 00 00 81 00 82 01
        60 B8 01 33 33 99 CC BF 40 40 66 59 59 26 26 E2
        04 F3 FD 2C 01 20 F3 5D 8F
        """

    static let full: ExpressionFrame = {
        var e = Expression(headPose: HeadPose(yaw: 180, pitch: -180, roll: -180), gaze: Gaze(x: -1, y: 1))
        for shape in BlendShape.allCases { e[shape] = 1 }
        return ExpressionFrame(sequence: .max, captureTimeMicros: (1 << 48) - 1, state: .tracked, expression: e)
    }()
    static let fullHex = """
        01 03 FF FF FF FF FF FF FF FF FF FF FF FF FF FF
        FF FF 0F FF FF FF FF FF FF FF FF FF FF FF FF FF
        FF FF FF FF FF FF FF FF FF FF FF FF FF FF FF FF
        FF FF FF FF FF FF FF FF FF FF FF FF FF FF FF FF
        FF FF FF FF FF FF FF 50 46 B0 B9 B0 B9 81 7F 4A
        90
        """

    static let voice: ExpressionFrame = {
        var e = Expression()
        e[.jawOpen] = 0.45
        e[.mouthFunnel] = 0.2
        e[.mouthClose] = 0.001 // quantises to 0: not sent
        return ExpressionFrame(sequence: 42, captureTimeMicros: 5_000_000, state: .tracked, expression: e,
                               isVoiceDriven: true)
    }()
    static let voiceHex = "01 05 2A 00 00 00 40 4B 4C 00 00 00 00 00 0A 00 00 00 00 73 33 00 00 00 00 00 00 58 C5"

    /// Name (as in the document's ```` ```hex vector=NAME ```` blocks) → frame and bytes.
    static let all: [String: (frame: ExpressionFrame, hex: String)] = [
        "lost": (lost, lostHex), "typical": (typical, typicalHex), "full": (full, fullHex), "voice": (voice, voiceHex),
    ]

    static func bytes(_ hex: String) -> [UInt8] {
        hex.split(whereSeparator: { $0 == " " || $0 == "\n" }).compactMap { UInt8($0, radix: 16) }
    }
}

final class ExpressionFrameCodecTests: XCTestCase {
    typealias DecodingError = ExpressionFrameDecodingError

    // MARK: Helpers

    private func decode(_ bytes: [UInt8]) throws -> ExpressionFrame {
        try ExpressionFrame(decoding: bytes)
    }

    /// `bytes` with its last two bytes replaced by the CRC of the rest, so that a crafted defect
    /// reaches the checks that come after the checksum.
    private func withValidChecksum(_ bytes: [UInt8]) -> [UInt8] {
        var out = Array(bytes.dropLast(2))
        let crc = WireFormat.crc16(out)
        out.append(UInt8(crc & 0xFF))
        out.append(UInt8(crc >> 8))
        return out
    }

    private func assertRejected(_ bytes: [UInt8], _ code: DecodingError.Code, field: DecodingError.Field? = nil,
                                _ message: String = "", file: StaticString = #filePath, line: UInt = #line) {
        do {
            let frame = try decode(bytes)
            XCTFail("accepted \(hex(bytes)) as \(frame); expected \(code). \(message)", file: file, line: line)
        } catch let error as DecodingError {
            XCTAssertEqual(error.code, code, "\(error) for \(hex(bytes)). \(message)", file: file, line: line)
            if let field { XCTAssertEqual(error.field, field, "\(error)", file: file, line: line) }
            XCTAssertFalse(error.description.isEmpty, file: file, line: line)
        } catch {
            XCTFail("threw \(type(of: error)) \(error), not ExpressionFrameDecodingError", file: file, line: line)
        }
    }

    private func hex(_ bytes: [UInt8]) -> String {
        bytes.map { String(format: "%02X", $0) }.joined(separator: " ")
    }

    private func randomFrame(using rng: inout SplitMix64) -> ExpressionFrame {
        let sequence = UInt32.random(in: .min ... .max, using: &rng)
        let time = UInt64.random(in: 0 ... (1 << 48) - 1, using: &rng)
        guard Int.random(in: 0..<10, using: &rng) != 0 else {
            return ExpressionFrame(sequence: sequence, captureTimeMicros: time, state: .lost)
        }
        var e = Expression()
        let density = Double.random(in: 0...1, using: &rng)
        for shape in BlendShape.allCases where Double.random(in: 0..<1, using: &rng) < density {
            switch Int.random(in: 0..<8, using: &rng) {
            case 0: e[shape] = Float.random(in: 0...(3 / 255), using: &rng) // around the dead zone
            case 1: e[shape] = 1
            default: e[shape] = Float.random(in: 0...1, using: &rng)
            }
        }
        func angle() -> Float {
            Int.random(in: 0..<20, using: &rng) == 0 ? [-180, 180, 0][Int.random(in: 0..<3, using: &rng)]
                : Float.random(in: -180...180, using: &rng)
        }
        e.headPose = HeadPose(yaw: angle(), pitch: angle(), roll: angle())
        if Bool.random(using: &rng) {
            e.gaze = Gaze(x: Float.random(in: -1...1, using: &rng), y: Float.random(in: -1...1, using: &rng))
        }
        return ExpressionFrame(sequence: sequence, captureTimeMicros: time, state: .tracked, expression: e,
                               isVoiceDriven: Int.random(in: 0..<4, using: &rng) == 0)
    }

    /// A valid tracked frame to corrupt: a handful of coefficients, pose and gaze.
    private var trackedSample: [UInt8] { GoldenVectors.bytes(GoldenVectors.typicalHex) }

    // MARK: Format basics

    func testCRC16CCITTFalseCheckValue() {
        XCTAssertEqual(WireFormat.crc16(Array("123456789".utf8)), 0x29B1)
        XCTAssertEqual(WireFormat.crc16([]), 0xFFFF)
    }

    func testBitmapCoversEveryBlendShape() {
        XCTAssertEqual(BlendShape.allCases.count, WireFormat.coefficientCount)
        XCTAssertEqual(WireFormat.coefficientCount + 4, WireFormat.bitmapSize * 8, "bits 52…55 reserved")
        XCTAssertEqual(ExpressionFrame.maximumEncodedSize, 128)
        XCTAssertEqual(ExpressionFrame.wireFormatVersion, 1)
    }

    // MARK: Golden vectors

    func testGoldenVectorsEncodeToDocumentedBytes() {
        for (name, vector) in GoldenVectors.all {
            XCTAssertEqual(hex(vector.frame.encoded()), hex(GoldenVectors.bytes(vector.hex)), name)
        }
    }

    func testGoldenVectorsDecodeToTheirFrames() throws {
        for (name, vector) in GoldenVectors.all {
            let decoded = try decode(GoldenVectors.bytes(vector.hex))
            assertClose(decoded, vector.frame, name)
            XCTAssertEqual(decoded.encoded(), GoldenVectors.bytes(vector.hex), "\(name) re-encodes identically")
        }
        let voice = try decode(GoldenVectors.bytes(GoldenVectors.voiceHex))
        XCTAssertTrue(voice.isVoiceDriven)
        XCTAssertEqual(voice.expression[.mouthClose], 0, "below the dead zone")
        XCTAssertNil(voice.expression.gaze)
        let full = try decode(GoldenVectors.bytes(GoldenVectors.fullHex))
        XCTAssertEqual(full.expression.coefficients, [Float](repeating: 1, count: 52))
        XCTAssertEqual(full.expression.headPose, HeadPose(yaw: 180, pitch: -180, roll: -180))
        XCTAssertEqual(full.expression.gaze, Gaze(x: -1, y: 1))
        XCTAssertEqual(full.captureTimeMicros, (1 << 48) - 1)
        XCTAssertEqual(full.sequence, .max)
        XCTAssertEqual(try decode(GoldenVectors.bytes(GoldenVectors.lostHex)), GoldenVectors.lost)
    }

    /// The document must show exactly the bytes this encoder produces, so it cannot drift.
    func testWireFormatDocumentShowsTheEncodersBytes() throws {
        let doc = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("docs/wire-format.md")
        let text = try String(contentsOf: doc, encoding: .utf8)
        var found: [String: [UInt8]] = [:]
        var current: String?
        var collected: [String] = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if let name = current {
                if trimmed.hasPrefix("```") {
                    XCTAssertNil(found[name], "vector \(name) appears twice")
                    found[name] = GoldenVectors.bytes(collected.joined(separator: " "))
                    current = nil
                } else {
                    collected.append(trimmed)
                }
            } else if trimmed.hasPrefix("```hex vector=") {
                current = String(trimmed.dropFirst("```hex vector=".count))
                collected = []
            }
        }
        XCTAssertNil(current, "unterminated hex block")
        XCTAssertEqual(Set(found.keys), Set(GoldenVectors.all.keys), "the document's vectors")
        for (name, bytes) in found {
            guard let vector = GoldenVectors.all[name] else { continue }
            XCTAssertEqual(hex(bytes), hex(vector.frame.encoded()), "docs/wire-format.md vector \(name)")
        }
    }

    // MARK: Round trips and sizes

    private func assertClose(_ decoded: ExpressionFrame, _ original: ExpressionFrame, _ message: String,
                             file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(decoded.sequence, original.sequence, message, file: file, line: line)
        XCTAssertEqual(decoded.captureTimeMicros, original.captureTimeMicros & ((1 << 48) - 1), message, file: file, line: line)
        XCTAssertEqual(decoded.state, original.state, message, file: file, line: line)
        XCTAssertEqual(decoded.isVoiceDriven, original.isVoiceDriven, message, file: file, line: line)
        for shape in BlendShape.allCases {
            let error = abs(decoded.expression[shape] - original.expression[shape])
            XCTAssertLessThanOrEqual(error, 0.5 / 255 + 1e-6, "\(shape) \(message)", file: file, line: line)
        }
        let (d, o) = (decoded.expression.headPose, original.expression.headPose)
        for (a, b) in [(d.yaw, o.yaw), (d.pitch, o.pitch), (d.roll, o.roll)] {
            XCTAssertLessThanOrEqual(abs(a - b), 0.005 + 2e-5, "angle \(message)", file: file, line: line)
        }
        XCTAssertEqual(decoded.expression.gaze == nil, original.expression.gaze == nil, message, file: file, line: line)
        if let dg = decoded.expression.gaze, let og = original.expression.gaze {
            XCTAssertLessThanOrEqual(abs(dg.x - og.x), 0.5 / 127 + 1e-6, message, file: file, line: line)
            XCTAssertLessThanOrEqual(abs(dg.y - og.y), 0.5 / 127 + 1e-6, message, file: file, line: line)
        }
    }

    func testRandomFramesRoundTripWithinQuantisation() throws {
        var rng = SplitMix64(seed: 0x5EED_C0DEC)
        for index in 0..<5_000 {
            let frame = randomFrame(using: &rng)
            let bytes = frame.encoded()
            XCTAssertLessThanOrEqual(bytes.count, ExpressionFrame.maximumEncodedSize)
            let decoded = try decode(bytes)
            assertClose(decoded, frame, "frame \(index)")
            XCTAssertEqual(decoded.encoded(), bytes, "frame \(index): decoding then encoding is the identity on bytes")
        }
    }

    func testSizes() {
        XCTAssertEqual(GoldenVectors.lost.encoded().count, 14, "a lost frame is header only")
        XCTAssertEqual(GoldenVectors.full.encoded().count, 81)
        XCTAssertLessThanOrEqual(GoldenVectors.full.encoded().count, ExpressionFrame.maximumEncodedSize)

        // Typical: 15 active coefficients, pose and gaze.
        var e = Expression(headPose: HeadPose(yaw: -33.3, pitch: 12, roll: 7.77), gaze: Gaze(x: 0.3, y: 0.1))
        for shape in BlendShape.allCases.prefix(15) { e[shape] = 0.42 }
        let typical = ExpressionFrame(sequence: 99, captureTimeMicros: 3_600_000_000, state: .tracked, expression: e)
        XCTAssertEqual(typical.encoded().count, 44)
        XCTAssertLessThanOrEqual(typical.encoded().count, 48)
        XCTAssertLessThanOrEqual(GoldenVectors.typical.encoded().count, 48)
    }

    func testLostFrameCarriesNoExpression() throws {
        var frame = ExpressionFrame(sequence: 1, captureTimeMicros: 2, state: .tracked, expression: GoldenVectors.typical.expression,
                                    isVoiceDriven: true)
        frame.state = .lost // expression and voice flag left behind on purpose
        let bytes = frame.encoded()
        XCTAssertEqual(bytes.count, 14)
        XCTAssertEqual(bytes[1], 0, "no flags")
        let decoded = try decode(bytes)
        XCTAssertEqual(decoded, ExpressionFrame(sequence: 1, captureTimeMicros: 2, state: .lost))
        XCTAssertEqual(decoded.expression, .neutral)
        XCTAssertFalse(decoded.isVoiceDriven)
        XCTAssertFalse(ExpressionFrame(sequence: 1, captureTimeMicros: 2, state: .lost, isVoiceDriven: true).isVoiceDriven)
    }

    func testEncoderSanitisesNonFiniteAndOutOfRangeInput() throws {
        // Expression's subscript already clamps; a decoded (Codable) Expression is not checked, so go through JSON.
        let json = """
            {"coefficients": ["nan", "+inf", "-inf", -0.5, 1.5, 0.5], "headPose": {"yaw": "nan", "pitch": "+inf", "roll": -500},
             "gaze": {"x": 2, "y": -3}}
            """
        let decoder = JSONDecoder()
        decoder.nonConformingFloatDecodingStrategy = .convertFromString(positiveInfinity: "+inf", negativeInfinity: "-inf", nan: "nan")
        let expression = try decoder.decode(Expression.self, from: Data(json.utf8))
        XCTAssertEqual(expression.coefficients.count, 6, "a short array must not crash the encoder")
        let frame = ExpressionFrame(sequence: 5, captureTimeMicros: (1 << 48) + 17, state: .tracked, expression: expression)
        let bytes = frame.encoded()
        let decoded = try decode(bytes)
        XCTAssertEqual(decoded.captureTimeMicros, 17, "capture time is sent modulo 2^48")
        let c = decoded.expression.coefficients
        XCTAssertEqual(Array(c.prefix(6)), [0, 1, 0, 0, 1, 128 / 255])
        XCTAssertEqual(Array(c.dropFirst(6)), [Float](repeating: 0, count: 46))
        XCTAssertEqual(decoded.expression.headPose, HeadPose(yaw: 0, pitch: 180, roll: -180))
        XCTAssertEqual(decoded.expression.gaze, Gaze(x: 1, y: -1))

        var nanGaze = GoldenVectors.typical
        nanGaze.expression.gaze = Gaze(x: .nan, y: 0.5)
        let withoutGaze = try decode(nanGaze.encoded())
        XCTAssertNil(withoutGaze.expression.gaze, "a gaze with a NaN axis is sent as no gaze")
        XCTAssertEqual(nanGaze.encoded().count, GoldenVectors.typical.encoded().count - 2)
    }

    func testDecodesAnyCollectionOfBytes() throws {
        let bytes = GoldenVectors.bytes(GoldenVectors.typicalHex)
        let fromData = try ExpressionFrame(decoding: Data(bytes))
        let fromSlice = try ExpressionFrame(decoding: ([0xAA] + bytes + [0xBB])[1...bytes.count])
        XCTAssertEqual(fromData, fromSlice)
        XCTAssertEqual(fromData.encoded(), bytes)
    }

    // MARK: Malformed input, one class at a time

    func testEveryTruncationIsRejectedAsTruncated() {
        var frames = GoldenVectors.all.values.map { $0.frame }
        var rng = SplitMix64(seed: 7)
        frames += (0..<50).map { _ in randomFrame(using: &rng) }
        for frame in frames {
            let bytes = frame.encoded()
            for length in 0..<bytes.count {
                assertRejected(Array(bytes.prefix(length)), .truncated, "prefix of \(length) of \(bytes.count)")
            }
        }
    }

    func testEverySingleBitFlipIsRejected() {
        var frames = GoldenVectors.all.values.map { $0.frame }
        var rng = SplitMix64(seed: 11)
        frames += (0..<50).map { _ in randomFrame(using: &rng) }
        var codes: [String: Int] = [:]
        for frame in frames {
            let bytes = frame.encoded()
            for bit in 0..<(bytes.count * 8) {
                var flipped = bytes
                flipped[bit / 8] ^= 1 << UInt8(bit % 8)
                do {
                    _ = try decode(flipped)
                    XCTFail("bit \(bit) flipped in \(hex(bytes)) was accepted")
                } catch let error as DecodingError {
                    codes[error.code.description, default: 0] += 1
                } catch {
                    XCTFail("unexpected \(error)")
                }
            }
        }
        XCTAssertGreaterThan(codes["checksumMismatch", default: 0], 0)
        print("single-bit flips rejected by code: \(codes.sorted { $0.key < $1.key })")
    }

    func testEveryDoubleBitFlipOfATypicalFrameIsRejected() {
        let bytes = trackedSample
        let bits = bytes.count * 8
        var accepted = 0
        for first in 0..<bits {
            for second in (first + 1)..<bits {
                var flipped = bytes
                flipped[first / 8] ^= 1 << UInt8(first % 8)
                flipped[second / 8] ^= 1 << UInt8(second % 8)
                if (try? decode(flipped)) != nil { accepted += 1 }
            }
        }
        XCTAssertEqual(accepted, 0, "CRC-16/CCITT has Hamming distance 4 at this length")
    }

    func testOversizedInputIsRejectedUnread() {
        var padded = trackedSample
        padded += [UInt8](repeating: 0, count: 129 - padded.count)
        assertRejected(padded, .oversized)
        assertRejected([UInt8](repeating: 0xFF, count: 100_000), .oversized)
        // A huge lazy collection: the decoder must not walk it.
        XCTAssertThrowsError(try ExpressionFrame(decoding: repeatElement(UInt8(1), count: 1 << 40))) { error in
            XCTAssertEqual((error as? DecodingError)?.code, .oversized)
        }
        // Exactly at the limit is not "oversized" (this one is a tracked frame with trailing bytes).
        var atLimit = trackedSample
        atLimit.insert(contentsOf: [UInt8](repeating: 0, count: 128 - atLimit.count), at: atLimit.count - 2)
        assertRejected(withValidChecksum(atLimit), .trailingBytes)
    }

    func testUnknownVersionIsRejected() {
        for version: UInt8 in [0, 2, 0x81, 0xFF] {
            var bytes = trackedSample
            bytes[0] = version
            for candidate in [bytes, withValidChecksum(bytes), [version]] {
                do {
                    _ = try decode(candidate)
                    XCTFail("version \(version) accepted")
                } catch let error as DecodingError {
                    XCTAssertEqual(error.code, .unsupportedVersion)
                    XCTAssertEqual(error.version, version)
                    XCTAssertTrue(error.description.contains("version \(version)"), error.description)
                } catch {
                    XCTFail("unexpected \(error)")
                }
            }
        }
        assertRejected([], .truncated)
    }

    func testChecksumMismatchIsRejected() {
        var bytes = trackedSample
        bytes[bytes.count - 1] ^= 0x40
        assertRejected(bytes, .checksumMismatch)
        bytes = trackedSample
        bytes[20] &+= 1 // a coefficient value
        assertRejected(bytes, .checksumMismatch)
    }

    func testReservedBitsAreRejected() {
        for bit in 3..<8 {
            var bytes = trackedSample
            bytes[1] |= 1 << UInt8(bit)
            assertRejected(withValidChecksum(bytes), .reservedBitsSet, "flag bit \(bit)")
        }
        for bit in 4..<8 { // bitmap bits 52…55
            var bytes = trackedSample
            bytes[18] |= 1 << UInt8(bit)
            assertRejected(withValidChecksum(bytes), .reservedBitsSet, "bitmap bit \(48 + bit)")
        }
    }

    func testOutOfRangeValuesAreRejected() throws {
        // Typical vector: 12 coefficient bytes at 19…30, yaw 31, pitch 33, roll 35, gaze x 37, y 38.
        let base = trackedSample
        func setInt16(_ value: Int16, at offset: Int) -> [UInt8] {
            var bytes = base
            let raw = UInt16(bitPattern: value)
            bytes[offset] = UInt8(raw & 0xFF)
            bytes[offset + 1] = UInt8(raw >> 8)
            return withValidChecksum(bytes)
        }
        for (offset, field) in [(31, DecodingError.Field.yaw), (33, .pitch), (35, .roll)] {
            for value: Int16 in [18_001, -18_001, .max, .min] {
                assertRejected(setInt16(value, at: offset), .valueOutOfRange, field: field, "\(field) = \(value)")
            }
            for value: Int16 in [18_000, -18_000] {
                XCTAssertNoThrow(try decode(setInt16(value, at: offset)), "\(field) = \(value) is in range")
            }
        }
        for (offset, field) in [(37, DecodingError.Field.gazeX), (38, .gazeY)] {
            var bytes = base
            bytes[offset] = 0x80 // -128
            assertRejected(withValidChecksum(bytes), .valueOutOfRange, field: field)
            bytes[offset] = 0x81 // -127 = -1.0
            XCTAssertEqual(try decode(withValidChecksum(bytes)).expression.gaze.map { field == .gazeX ? $0.x : $0.y }, -1)
        }
        var zeroCoefficient = base
        zeroCoefficient[21] = 0 // third present coefficient: jawOpen
        assertRejected(withValidChecksum(zeroCoefficient), .valueOutOfRange, field: .coefficient(.jawOpen))
    }

    func testTrailingBytesAreRejected() {
        var inside = trackedSample
        inside.insert(0x00, at: inside.count - 2)
        assertRejected(withValidChecksum(inside), .trailingBytes, "an extra byte covered by the checksum")
        assertRejected(trackedSample + [0x00], .trailingBytes, "an extra byte after the checksum")
    }

    func testLostFrameWithPayloadIsRejected() {
        let lost = GoldenVectors.bytes(GoldenVectors.lostHex)
        var extended = lost
        extended.insert(contentsOf: [0x01, 0x02], at: 12)
        assertRejected(withValidChecksum(extended), .lostFrameHasPayload, "bytes after a lost header")
        for flag: UInt8 in [WireFormat.gazeFlag, WireFormat.voiceDrivenFlag] {
            var flagged = lost
            flagged[1] |= flag
            assertRejected(withValidChecksum(flagged), .lostFrameHasPayload, "flag \(flag) on a lost frame")
        }
        // A tracked frame relabelled lost, checksum and all.
        var relabelled = trackedSample
        relabelled[1] &= ~WireFormat.trackedFlag
        assertRejected(withValidChecksum(relabelled), .lostFrameHasPayload)
    }

    /// Random bytes, and random edits of valid frames (with the checksum repaired so the later checks
    /// are exercised): never a crash, never anything but a decoding error, and whatever is accepted
    /// is exactly what the encoder produces for the decoded frame.
    func testFuzzedInputIsRejectedOrCanonical() {
        var rng = SplitMix64(seed: 0xF022)
        var accepted = 0
        for round in 0..<20_000 {
            var bytes: [UInt8]
            if round % 4 == 0 {
                bytes = (0..<Int.random(in: 0...140, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
                if !bytes.isEmpty && Bool.random(using: &rng) { bytes[0] = 1 }
            } else {
                bytes = randomFrame(using: &rng).encoded()
                for _ in 0..<Int.random(in: 1...3, using: &rng) {
                    let index = Int.random(in: 0..<bytes.count, using: &rng)
                    switch Int.random(in: 0..<3, using: &rng) {
                    case 0: bytes[index] = UInt8.random(in: 0...255, using: &rng)
                    case 1: bytes.remove(at: index)
                    default: bytes.insert(UInt8.random(in: 0...255, using: &rng), at: index)
                    }
                    if bytes.count < 3 { break }
                }
                if bytes.count >= 3 && round % 4 != 1 { bytes = withValidChecksum(bytes) }
            }
            do {
                let frame = try decode(bytes)
                accepted += 1
                XCTAssertEqual(frame.encoded(), bytes, "accepted non-canonical \(hex(bytes))")
            } catch is DecodingError {
            } catch {
                XCTFail("unexpected \(error)")
            }
        }
        print("fuzz: \(accepted) of 20000 edited inputs were valid frames (all canonical)")
    }
}
