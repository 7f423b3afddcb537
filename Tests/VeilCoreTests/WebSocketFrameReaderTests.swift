import VeilCore
import XCTest

/// `WebSocketFrameReader` on hand-made client frames: RFC 6455's own examples, every length
/// encoding, fragments with control frames between them, and each way a frame can break the rules,
/// caught before the payload is kept.
final class WebSocketFrameReaderTests: XCTestCase {
    typealias Reader = WebSocketFrameReader

    /// A masked client frame.
    static func frame(_ payload: [UInt8], opcode: UInt8 = 1, final: Bool = true, reserved: UInt8 = 0,
                      masked: Bool = true, length: [UInt8]? = nil) -> [UInt8] {
        var out: [UInt8] = [(final ? 0x80 : 0) | reserved | opcode]
        let mask: UInt8 = masked ? 0x80 : 0
        if let length {
            out += [mask | length[0]] + length.dropFirst()
        } else if payload.count < 126 {
            out.append(mask | UInt8(payload.count))
        } else if payload.count <= 0xFFFF {
            out += [mask | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        } else {
            out.append(mask | 127)
            out += (0..<8).reversed().map { UInt8((UInt64(payload.count) >> (8 * UInt64($0))) & 0xFF) }
        }
        let key: [UInt8] = [0xA1, 0x02, 0xC3, 0x44]
        if masked { out += key }
        return out + payload.enumerated().map { masked ? $0.element ^ key[$0.offset % 4] : $0.element }
    }

    private func events(_ bytes: [UInt8], limit: Int = 65536) throws -> [Reader.Event] {
        var reader = Reader(messageLimit: limit)
        reader.append(bytes)
        var out: [Reader.Event] = []
        while let event = try reader.next() { out.append(event) }
        return out
    }

    private func violation(_ bytes: [UInt8], limit: Int = 65536) -> Reader.Violation? {
        do { _ = try events(bytes, limit: limit); return nil } catch { return error as? Reader.Violation }
    }

    func testRFC6455sMaskedExamples() throws {
        // §5.7: a single-frame masked text message "Hello", and a masked ping "Hello".
        XCTAssertEqual(try events([0x81, 0x85, 0x37, 0xFA, 0x21, 0x3D, 0x7F, 0x9F, 0x4D, 0x51, 0x58]), [.text(Array("Hello".utf8))])
        XCTAssertEqual(try events([0x89, 0x85, 0x37, 0xFA, 0x21, 0x3D, 0x7F, 0x9F, 0x4D, 0x51, 0x58]), [.ping(Array("Hello".utf8))])
    }

    func testEveryLengthEncodingAndByteByByteArrival() throws {
        for size in [0, 1, 125, 126, 127, 65535, 65536, 200_000] {
            let payload = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7) }
            let bytes = Self.frame(payload, opcode: 2)
            XCTAssertEqual(try events(bytes, limit: 1 << 20), [.binary(payload)], "\(size) bytes")
        }
        // Two messages, a ping and a close, arriving one byte at a time.
        let stream = Self.frame(Array("one".utf8)) + Self.frame([1, 2], opcode: 9) + Self.frame(Array("two".utf8)) + Self.frame([0x03, 0xE8], opcode: 8)
        var reader = Reader(messageLimit: 100)
        var seen: [Reader.Event] = []
        for byte in stream {
            reader.append([byte])
            while let event = try reader.next() { seen.append(event) }
        }
        XCTAssertEqual(seen, [.text(Array("one".utf8)), .ping([1, 2]), .text(Array("two".utf8)), .close(code: 1000)])
        XCTAssertEqual(reader.bufferedBytes, 0)
    }

    func testFragmentsAreReassembledWithControlFramesBetweenThem() throws {
        let bytes = Self.frame(Array("{\"a\":".utf8), final: false) + Self.frame([], opcode: 9) + Self.frame(Array("1".utf8), opcode: 0, final: false)
            + Self.frame([], opcode: 10) + Self.frame(Array("}".utf8), opcode: 0)
        XCTAssertEqual(try events(bytes), [.ping([]), .pong, .text(Array("{\"a\":1}".utf8))])
        XCTAssertEqual(try events(Self.frame([0x03, 0xE9, 0x62, 0x79, 0x65], opcode: 8)), [.close(code: 1001)])
        XCTAssertEqual(try events(Self.frame([], opcode: 8)), [.close(code: nil)])
    }

    func testProtocolErrors() {
        let cases: [(String, [UInt8])] = [
            ("unmasked", Self.frame(Array("hi".utf8), masked: false)),
            ("compressed (RSV1)", Self.frame(Array("hi".utf8), reserved: 0x40)),
            ("RSV2", Self.frame(Array("hi".utf8), reserved: 0x20)),
            ("opcode 3", Self.frame([], opcode: 3)),
            ("opcode 0xB", Self.frame([], opcode: 0xB)),
            ("fragmented ping", Self.frame([], opcode: 9, final: false)),
            ("a 126-byte ping", Self.frame([UInt8](repeating: 0, count: 126), opcode: 9)),
            ("a continuation first", Self.frame(Array("x".utf8), opcode: 0)),
            ("a text inside a fragmented message", Self.frame(Array("a".utf8), final: false) + Self.frame(Array("b".utf8))),
            ("length 100 in 16 bits", Self.frame([UInt8](repeating: 0, count: 100), length: [126, 0, 100])),
            ("length 1000 in 64 bits", Self.frame([UInt8](repeating: 0, count: 1000), length: [127, 0, 0, 0, 0, 0, 0, 0x03, 0xE8])),
            ("64-bit length with its top bit", [0x81, 0xFF, 0x80, 0, 0, 0, 0, 0, 0, 1]),
            ("a one-byte close", Self.frame([3], opcode: 8)),
        ]
        for (what, bytes) in cases {
            XCTAssertEqual(violation(bytes)?.closeCode, 1002, what)
        }
        XCTAssertEqual(violation(Self.frame([0xC3, 0x28]))?.closeCode, 1007, "text that is not UTF-8")
        XCTAssertEqual(violation(Self.frame([0x03, 0xE8, 0xFF], opcode: 8))?.closeCode, 1007, "a close reason that is not UTF-8")
    }

    /// A message over the limit is refused when its header arrives: the payload is never awaited,
    /// never kept, and fragments count together.
    func testSizeIsCheckedWhenTheHeaderArrives() throws {
        var reader = Reader(messageLimit: 4096)
        reader.append(Array(Self.frame([UInt8](repeating: 0x20, count: 1 << 20)).prefix(14)))
        XCTAssertThrowsError(try reader.next()) { error in
            XCTAssertEqual((error as? Reader.Violation)?.closeCode, 1009)
            XCTAssertEqual((error as? Reader.Violation)?.announcedBytes, 1 << 20)
        }
        XCTAssertEqual(reader.bufferedBytes, 0, "nothing of it is kept")
        XCTAssertThrowsError(try reader.next(), "a spent reader stays spent")
        // 3 fragments of 1500 bytes: the third passes the limit of 4096.
        let fragment = [UInt8](repeating: 0x20, count: 1500)
        let fragments = Self.frame(fragment, final: false) + Self.frame(fragment, opcode: 0, final: false) + Self.frame(fragment, opcode: 0)
        XCTAssertEqual(violation(fragments, limit: 4096)?.announcedBytes, 4500)
        XCTAssertEqual(try events(fragments, limit: 4500), [.text([UInt8](repeating: 0x20, count: 4500))])
        // The limit may change between messages (the server raises it once a connection joins).
        var changing = Reader(messageLimit: 10)
        changing.append(Self.frame(Array("short".utf8)) + Self.frame([UInt8](repeating: 0x41, count: 50)))
        XCTAssertEqual(try changing.next(), .text(Array("short".utf8)))
        changing.messageLimit = 64
        XCTAssertEqual(try changing.next(), .text([UInt8](repeating: 0x41, count: 50)))
    }

    func testServerFramesAreUnmaskedAndCloseReasonsFit() {
        XCTAssertEqual(WebSocketFrame.encode(WebSocketFrame.text, Array("Hello".utf8)), [0x81, 0x05] + Array("Hello".utf8))
        XCTAssertEqual(Array(WebSocketFrame.encode(WebSocketFrame.text, [UInt8](repeating: 0, count: 256)).prefix(4)), [0x81, 126, 1, 0])
        XCTAssertEqual(Array(WebSocketFrame.encode(WebSocketFrame.text, [UInt8](repeating: 0, count: 65536)).prefix(10)), [0x81, 127, 0, 0, 0, 0, 0, 1, 0, 0])
        let close = WebSocketFrame.close(code: 4003, reason: String(repeating: "é", count: 100))
        XCTAssertEqual(close[0], 0x88)
        XCTAssertLessThanOrEqual(Int(close[1]), 125)
        XCTAssertEqual(Array(close[2...3]), [0x0F, 0xA3])
        XCTAssertNotNil(String(validating: close[4...], as: UTF8.self), "a reason cut at a character boundary")
    }
}
