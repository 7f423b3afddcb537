import Foundation
import XCTest
@testable import VeilCore

/// web/wire.js in headless chromium against the Swift codec: the golden vectors of
/// docs/wire-format.md (read from the document, as VeilCoreTests does), random frames, and the
/// malformed inputs the Swift decoder rejects, each rejected by the JavaScript decoder with the
/// same reason.
final class BrowserWireTests: XCTestCase {
    /// The frames the document's golden vectors describe (as in its prose).
    static let goldenFrames: [String: ExpressionFrame] = {
        var typical = Expression(headPose: HeadPose(yaw: 12.5, pitch: -5.25, roll: 3), gaze: Gaze(x: 0.25, y: -0.1))
        typical[.eyeBlinkLeft] = 0.2; typical[.eyeBlinkRight] = 0.2; typical[.jawOpen] = 0.6
        typical[.mouthSmileLeft] = 0.8; typical[.mouthSmileRight] = 0.75
        typical[.mouthLowerDownLeft] = 0.25; typical[.mouthLowerDownRight] = 0.25
        typical[.browInnerUp] = 0.4; typical[.browOuterUpLeft] = 0.35; typical[.browOuterUpRight] = 0.35
        typical[.cheekSquintLeft] = 0.15; typical[.cheekSquintRight] = 0.15
        var full = Expression(headPose: HeadPose(yaw: 180, pitch: -180, roll: -180), gaze: Gaze(x: -1, y: 1))
        for shape in BlendShape.allCases { full[shape] = 1 }
        var voice = Expression()
        voice[.jawOpen] = 0.45; voice[.mouthFunnel] = 0.2; voice[.mouthClose] = 0.001
        return [
            "lost": ExpressionFrame(sequence: 7, captureTimeMicros: 1_000_000, state: .lost),
            "typical": ExpressionFrame(sequence: 1234, captureTimeMicros: 123_456_789, state: .tracked, expression: typical),
            "full": ExpressionFrame(sequence: .max, captureTimeMicros: (1 << 48) - 1, state: .tracked, expression: full),
            "voice": ExpressionFrame(sequence: 42, captureTimeMicros: 5_000_000, state: .tracked, expression: voice, isVoiceDriven: true),
        ]
    }()

    /// The ```` ```hex vector=NAME ```` blocks of docs/wire-format.md.
    static func documentVectors() throws -> [String: [UInt8]] {
        let doc = HeadlessChromium.webDirectory.deletingLastPathComponent().appendingPathComponent("docs/wire-format.md")
        let text = try String(contentsOf: doc, encoding: .utf8)
        var found: [String: [UInt8]] = [:]
        var current: String?
        var collected: [String] = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if let name = current {
                if trimmed.hasPrefix("```") {
                    found[name] = bytes(hex: collected.joined(separator: " "))
                    current = nil
                } else {
                    collected.append(trimmed)
                }
            } else if trimmed.hasPrefix("```hex vector=") {
                current = String(trimmed.dropFirst("```hex vector=".count))
                collected = []
            }
        }
        return found
    }

    // MARK: frames as the page's JSON

    private static func number(_ v: Float) -> Any {
        if v.isNaN { return "nan" }
        if v.isInfinite { return v > 0 ? "inf" : "-inf" }
        return Double(v)
    }

    private static func json(_ frame: ExpressionFrame) -> [String: Any] {
        let e = frame.expression
        var gaze: Any = NSNull()
        if let g = e.gaze { gaze = ["x": number(g.x), "y": number(g.y)] }
        return [
            "sequence": Double(frame.sequence), "captureTimeMicros": Double(frame.captureTimeMicros),
            "state": frame.state == .tracked ? "tracked" : "lost", "isVoiceDriven": frame.isVoiceDriven,
            "expression": ["coefficients": e.coefficients.map(number),
                           "headPose": ["yaw": number(e.headPose.yaw), "pitch": number(e.headPose.pitch), "roll": number(e.headPose.roll)],
                           "gaze": gaze] as [String: Any],
        ]
    }

    private static let pageBody = """
        const hex = (b) => Array.from(b, (x) => x.toString(16).toUpperCase().padStart(2, '0')).join(' ');
        const fromHex = (h) => Uint8Array.from(h.split(' ').filter((s) => s.length).map((s) => parseInt(s, 16)));
        const num = (v) => (v === 'nan' ? NaN : v === 'inf' ? Infinity : v === '-inf' ? -Infinity : v);
        const frame = (f) => ({ ...f, expression: { coefficients: f.expression.coefficients.map(num),
          headPose: { yaw: num(f.expression.headPose.yaw), pitch: num(f.expression.headPose.pitch), roll: num(f.expression.headPose.roll) },
          gaze: f.expression.gaze && { x: num(f.expression.gaze.x), y: num(f.expression.gaze.y) } } });
        const plain = (d) => ({ ...d, expression: { ...d.expression, coefficients: Array.from(d.expression.coefficients) } });
        const encoded = input.encode.map((f) => hex(encodeFrame(frame(f))));
        const decoded = input.decode.map((h) => {
          try {
            const d = decodeFrame(fromHex(h));
            return { ok: true, frame: plain(d), reencoded: hex(encodeFrame(d)) };
          } catch (e) {
            return { ok: false, wireError: e instanceof WireError, reason: e.reason ?? String(e), field: e.field ?? null,
                     version: e.version ?? null, message: e.message };
          }
        });
        return { encoded, decoded, names: BLEND_SHAPES, crcCheck: crc16(new TextEncoder().encode('123456789')),
                 neutral: plain({ expression: neutralExpression() }).expression };
        """

    private struct Expected {
        var bytes: [UInt8]
        var what: String
    }

    /// `bytes` with its last two bytes replaced by the CRC of the rest, so that a crafted defect
    /// reaches the checks after the checksum.
    private func withValidChecksum(_ bytes: [UInt8]) -> [UInt8] {
        var out = Array(bytes.dropLast(2))
        let crc = WireFormat.crc16(out)
        out += [UInt8(crc & 0xFF), UInt8(crc >> 8)]
        return out
    }

    private func randomFrame(_ rng: inout SplitMix64) -> ExpressionFrame {
        let sequence = UInt32.random(in: .min ... .max, using: &rng)
        let time = UInt64.random(in: 0 ... (1 << 48) - 1, using: &rng)
        guard Int.random(in: 0..<10, using: &rng) != 0 else {
            return ExpressionFrame(sequence: sequence, captureTimeMicros: time, state: .lost)
        }
        var e = Expression()
        let density = Double.random(in: 0...1, using: &rng)
        for shape in BlendShape.allCases where Double.random(in: 0..<1, using: &rng) < density {
            switch Int.random(in: 0..<8, using: &rng) {
            case 0: e[shape] = Float.random(in: 0...(3 / 255), using: &rng)
            case 1: e[shape] = Float(Int.random(in: 0...255, using: &rng)) / 255 + 0.5 / 255 // near a rounding tie
            default: e[shape] = Float.random(in: 0...1, using: &rng)
            }
        }
        func angle() -> Float {
            Int.random(in: 0..<10, using: &rng) == 0 ? Float(Int.random(in: -36000...36000, using: &rng)) / 200
                : Float.random(in: -180...180, using: &rng)
        }
        e.headPose = HeadPose(yaw: angle(), pitch: angle(), roll: angle())
        if Bool.random(using: &rng) {
            e.gaze = Gaze(x: Float.random(in: -1...1, using: &rng), y: Float.random(in: -1...1, using: &rng))
        }
        return ExpressionFrame(sequence: sequence, captureTimeMicros: time, state: .tracked, expression: e,
                               isVoiceDriven: Int.random(in: 0..<4, using: &rng) == 0)
    }

    func testJavaScriptCodecMatchesTheSwiftCodec() throws {
        let chromium = try HeadlessChromium.require()
        let vectors = try Self.documentVectors()
        XCTAssertEqual(Set(vectors.keys), Set(Self.goldenFrames.keys), "the document's vectors")

        // Frames to encode: the golden frames, random frames, and values the encoder must repair.
        var toEncode: [(frame: ExpressionFrame, what: String)] = Self.goldenFrames.sorted { $0.key < $1.key }
            .map { ($0.value, "golden \($0.key)") }
        var rng = SplitMix64(seed: 0xB20_55E2)
        for i in 0..<300 { toEncode.append((randomFrame(&rng), "random \(i)")) }
        let repairs = """
            {"coefficients": ["nan", "+inf", "-inf", -0.5, 1.5, 0.5], "headPose": {"yaw": "nan", "pitch": "+inf", "roll": -500},
             "gaze": {"x": 2, "y": -3}}
            """
        let decoder = JSONDecoder()
        decoder.nonConformingFloatDecodingStrategy = .convertFromString(positiveInfinity: "+inf", negativeInfinity: "-inf", nan: "nan")
        let repaired = try decoder.decode(Expression.self, from: Data(repairs.utf8))
        toEncode.append((ExpressionFrame(sequence: 5, captureTimeMicros: (1 << 48) + 17, state: .tracked, expression: repaired), "repairs"))
        var nanGaze = try XCTUnwrap(Self.goldenFrames["typical"])
        nanGaze.expression.gaze = Gaze(x: .nan, y: 0.5)
        toEncode.append((nanGaze, "NaN gaze"))

        // Bytes to decode: the vectors, random frames, and every malformed class, each with what
        // the Swift decoder says about it.
        var toDecode: [Expected] = vectors.sorted { $0.key < $1.key }.map { Expected(bytes: $0.value, what: "golden \($0.key)") }
        toDecode += toEncode.dropFirst(4).prefix(300).enumerated().map { Expected(bytes: $1.frame.encoded(), what: "random \($0)") }
        let sources = vectors.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
            + toEncode.dropFirst(4).prefix(20).enumerated().map { ("random \($0)", $1.frame.encoded()) }
        for (name, frame) in sources {
            for length in 0..<frame.count { toDecode.append(Expected(bytes: Array(frame.prefix(length)), what: "\(name) cut to \(length)")) }
            for bit in 0..<(frame.count * 8) {
                var flipped = frame
                flipped[bit / 8] ^= 1 << UInt8(bit % 8)
                toDecode.append(Expected(bytes: flipped, what: "\(name) bit \(bit) flipped"))
            }
        }
        let typical = try XCTUnwrap(vectors["typical"]), lost = try XCTUnwrap(vectors["lost"])
        for bit in 3..<8 {
            var b = typical
            b[1] |= 1 << UInt8(bit)
            toDecode.append(Expected(bytes: withValidChecksum(b), what: "reserved flag bit \(bit)"))
        }
        var reservedBitmap = typical
        reservedBitmap[18] |= 0x10
        toDecode.append(Expected(bytes: withValidChecksum(reservedBitmap), what: "reserved bitmap bit 52"))
        var trailing = typical
        trailing.insert(0, at: trailing.count - 2)
        toDecode.append(Expected(bytes: withValidChecksum(trailing), what: "trailing byte, valid CRC"))
        toDecode.append(Expected(bytes: typical + [0], what: "trailing byte"))
        toDecode.append(Expected(bytes: lost + [0, 0], what: "lost frame with payload"))
        for flag: UInt8 in [0x02, 0x04] {
            var b = lost
            b[1] = flag
            toDecode.append(Expected(bytes: withValidChecksum(b), what: "lost frame with flag \(flag)"))
        }
        for version: UInt8 in [0, 2, 0x81, 0xFF] {
            var b = typical
            b[0] = version
            toDecode.append(Expected(bytes: withValidChecksum(b), what: "version \(version)"))
            toDecode.append(Expected(bytes: [version], what: "version \(version) alone"))
        }
        toDecode.append(Expected(bytes: [UInt8](repeating: 1, count: 129), what: "129 bytes"))
        toDecode.append(Expected(bytes: [UInt8](repeating: 0xFF, count: 5000), what: "5000 bytes"))
        let poseOffset = 19 + 12
        for (i, field) in ["yaw", "pitch", "roll"].enumerated() {
            for value: Int16 in [18_001, -18_001, .max, .min] {
                var b = typical
                let raw = UInt16(bitPattern: value)
                b[poseOffset + 2 * i] = UInt8(raw & 0xFF); b[poseOffset + 2 * i + 1] = UInt8(raw >> 8)
                toDecode.append(Expected(bytes: withValidChecksum(b), what: "\(field) \(value)"))
            }
        }
        for axis in 0..<2 {
            var b = typical
            b[poseOffset + 6 + axis] = 0x80
            toDecode.append(Expected(bytes: withValidChecksum(b), what: "gaze axis \(axis) -128"))
        }
        var zeroCoefficient = typical
        zeroCoefficient[19 + 2] = 0
        toDecode.append(Expected(bytes: withValidChecksum(zeroCoefficient), what: "coefficient byte 0"))

        let input: [String: Any] = ["encode": toEncode.map { Self.json($0.frame) }, "decode": toDecode.map { hexString($0.bytes) }]
        let page = HeadlessChromium.page(imports: ["{ encodeFrame, decodeFrame, neutralExpression, WireError, BLEND_SHAPES, crc16 } from 'wire.js'"],
                                         input: try JSONSerialization.data(withJSONObject: input), body: Self.pageBody)
        let result = try XCTUnwrap(try chromium.run(page) as? [String: Any])

        XCTAssertEqual(result["names"] as? [String], BlendShape.allCases.map(\.name), "BLEND_SHAPES is Veil's raw order")
        XCTAssertEqual(result["crcCheck"] as? Int, 0x29B1, "CRC-16/CCITT-FALSE check value")
        let neutral = try XCTUnwrap(result["neutral"] as? [String: Any])
        XCTAssertEqual(neutral["coefficients"] as? [Double], [Double](repeating: 0, count: 52))
        XCTAssertEqual(neutral["headPose"] as? [String: Double], ["yaw": 0, "pitch": 0, "roll": 0])
        XCTAssertTrue(neutral["gaze"] is NSNull, "neutralExpression() has no gaze")

        // Encoding: the same bytes as Swift, and as the document for the golden frames.
        let encoded = try XCTUnwrap(result["encoded"] as? [String])
        XCTAssertEqual(encoded.count, toEncode.count)
        for (index, item) in toEncode.enumerated() where index < encoded.count {
            XCTAssertEqual(encoded[index], hexString(item.frame.encoded()), "encodeFrame, \(item.what)")
            if item.what.hasPrefix("golden "), let doc = vectors[String(item.what.dropFirst(7))] {
                XCTAssertEqual(encoded[index], hexString(doc), "docs/wire-format.md vector \(item.what)")
            }
        }

        // Decoding: the same frames, or the same rejection.
        let decoded = try XCTUnwrap(result["decoded"] as? [[String: Any]])
        XCTAssertEqual(decoded.count, toDecode.count)
        var rejected: [String: Int] = [:], accepted = 0
        for (index, item) in toDecode.enumerated() where index < decoded.count {
            let js = decoded[index]
            do {
                let swift = try ExpressionFrame(decoding: item.bytes)
                accepted += 1
                guard js["ok"] as? Bool == true else {
                    XCTFail("\(item.what): Swift decodes it, wire.js rejects it: \(js["message"] ?? "")")
                    continue
                }
                XCTAssertEqual(js["reencoded"] as? String, hexString(item.bytes), "\(item.what) re-encodes to its bytes")
                assertSameFrame(try XCTUnwrap(js["frame"] as? [String: Any]), swift, item.what)
            } catch let error as ExpressionFrameDecodingError {
                rejected[error.code.description, default: 0] += 1
                guard js["ok"] as? Bool == false else { XCTFail("\(item.what): wire.js accepts what Swift rejects (\(error))"); continue }
                XCTAssertEqual(js["wireError"] as? Bool, true, "\(item.what) throws a WireError")
                XCTAssertEqual(js["reason"] as? String, error.code.description, "\(item.what): \(js["message"] ?? "")")
                XCTAssertEqual(js["field"] as? String, error.field?.description, item.what)
                XCTAssertEqual((js["version"] as? Int).map(UInt8.init), error.version, item.what)
            }
        }
        print("wire.js: \(encoded.count) frames encoded; \(accepted) byte strings decoded and \(rejected.values.reduce(0, +)) rejected, by reason: \(rejected.sorted { $0.key < $1.key })")
        for code in ["truncated", "oversized", "unsupportedVersion", "checksumMismatch", "reservedBitsSet", "valueOutOfRange",
                     "trailingBytes", "lostFrameHasPayload"] {
            XCTAssertGreaterThan(rejected[code, default: 0], 0, "a malformed input of kind \(code) was tried")
        }
    }

    private func assertSameFrame(_ js: [String: Any], _ swift: ExpressionFrame, _ what: String,
                                 file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual((js["sequence"] as? NSNumber)?.uint32Value, swift.sequence, what, file: file, line: line)
        XCTAssertEqual((js["captureTimeMicros"] as? NSNumber)?.uint64Value, swift.captureTimeMicros, what, file: file, line: line)
        XCTAssertEqual(js["state"] as? String, swift.state == .tracked ? "tracked" : "lost", what, file: file, line: line)
        XCTAssertEqual(js["isVoiceDriven"] as? Bool, swift.isVoiceDriven, what, file: file, line: line)
        guard let e = js["expression"] as? [String: Any], let c = e["coefficients"] as? [Double],
              let pose = e["headPose"] as? [String: Double] else {
            return XCTFail("\(what): no expression", file: file, line: line)
        }
        XCTAssertEqual(c.map { Float($0) }, swift.expression.coefficients, "\(what) coefficients", file: file, line: line)
        let p = swift.expression.headPose
        XCTAssertEqual([pose["yaw"], pose["pitch"], pose["roll"]].map { $0.map(Float.init) }, [p.yaw, p.pitch, p.roll], "\(what) pose", file: file, line: line)
        let gaze = e["gaze"] as? [String: Double]
        XCTAssertEqual(gaze.map { Gaze(x: Float($0["x"] ?? .nan), y: Float($0["y"] ?? .nan)) }, swift.expression.gaze, "\(what) gaze", file: file, line: line)
    }
}
