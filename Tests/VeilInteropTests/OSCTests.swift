import VeilInterop
import XCTest

/// OSC 1.0: the encoder against the specification's own examples, and the decoder on the same
/// bytes, on nested bundles and on what it must refuse.
final class OSCTests: XCTestCase {
    // MARK: Encoding

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

    // MARK: Decoding

    func testDecodesTheSpecificationsExamplesBackToTheirMessages() throws {
        let messages = [OSCMessage("/oscillator/4/frequency", [.float32(440)]),
                        OSCMessage("/foo", [.int32(1000), .int32(-1), .string("hello"), .float32(1.234), .float32(5.678)]),
                        OSCMessage("/b", [.blob([1, 2, 3, 4, 5])]),
                        OSCMessage("/empty"),
                        OSCMessage("/abc", [.string(""), .string("abc"), .string("abcd"), .blob([]), .blob([9, 8, 7, 6])])]
        for message in messages {
            XCTAssertEqual(try OSCPacket(decoding: message.encoded()), .message(message))
        }
    }

    func testDecodesNestedBundlesInOrder() throws {
        let a = OSCMessage("/a", [.int32(1)]), b = OSCMessage("/b", [.string("x")]), c = OSCMessage("/c")
        let inner = OSCBundle(timeTag: OSCTimeTag(seconds: 7, fraction: 9), elements: [.message(b)])
        let outer = OSCBundle(timeTag: .immediately, elements: [.message(a), .bundle(inner), .message(c)])
        let decoded = try OSCPacket(decoding: outer.encoded())
        XCTAssertEqual(decoded, .bundle(outer))
        XCTAssertEqual(decoded.messages, [a, b, c])
    }

    func testRefusesBundlesNestedBeyondTheLimit() throws {
        var bundle = OSCBundle(elements: [.message(OSCMessage("/deep"))])
        for _ in 1..<8 { bundle = OSCBundle(elements: [.bundle(bundle)]) }
        XCTAssertNoThrow(try OSCPacket(decoding: bundle.encoded()), "8 levels are accepted")
        bundle = OSCBundle(elements: [.bundle(bundle)])
        assertRefused(bundle.encoded(), .nestingTooDeep)
    }

    func testRefusesWhatIsNotOSC() {
        let message = OSCMessage("/foo", [.int32(1000), .string("hello"), .blob([1, 2, 3])]).encoded()
        assertRefused([], .truncated)
        assertRefused(Array(message.dropLast(4)), .truncated, "a whole word missing: the blob runs out")
        assertRefused(Array(message.prefix(10)), .malformed, "not a multiple of 4")
        assertRefused(Array(message.prefix(12)), .truncated, "ends inside the type tags")
        assertRefused(Array("xyz\0".utf8), .malformed, "neither / nor #")
        assertRefused(Array("/abc".utf8) + [0, 0, 0, 0], .malformed, "no type tag string")
        assertRefused(Array("/abc".utf8) + [0, 0, 0, 0] + Array("xi\0\0".utf8) + [0, 0, 0, 1], .malformed, "type tags without ','")
        assertRefused(Array("/abc".utf8) + [0, 0, 0, 0] + Array(",i\0\0".utf8) + [0, 0, 0, 1, 0, 0, 0, 2], .malformed, "trailing bytes")
        assertRefused(Array("/abc".utf8) + [0, 0, 0, 0] + Array(",b\0\0".utf8) + [0xff, 0xff, 0xff, 0xfc], .malformed, "negative blob size")
        assertRefused(Array("/abc".utf8) + [0, 0, 0, 0] + Array(",b\0\0".utf8) + [0x7f, 0xff, 0xff, 0xff], .truncated, "blob larger than the packet")
        assertRefused([0x2f, 0xff, 0xfe, 0] + Array(",\0\0\0".utf8), .malformed, "address not UTF-8")
        let bundleHeader = Array("#bundle\0".utf8) + [0, 0, 0, 0, 0, 0, 0, 1]
        assertRefused(bundleHeader + [0, 0, 0, 6] + [0, 0, 0, 0, 0, 0, 0, 0], .malformed, "element size not a multiple of 4")
        assertRefused(bundleHeader + [0, 0, 0, 0], .malformed, "zero-size element")
        assertRefused(bundleHeader + [0x80, 0, 0, 0], .malformed, "negative element size")
        assertRefused(bundleHeader + [0, 0, 1, 0] + message, .truncated, "element larger than what is left")
        assertRefused(Array("#bundlX\0".utf8) + [0, 0, 0, 0, 0, 0, 0, 1], .malformed)
        assertRefused(Array("#bundle\0".utf8) + [0, 0, 0, 0], .truncated, "half a time tag")
    }

    func testRefusesOtherTypeTagsClearly() throws {
        for tag in ["T", "h", "d", "[", "N"] {
            let bytes = Array("/x\0\0".utf8) + Array(",\(tag)\0\0".utf8) + [0, 0, 0, 0, 0, 0, 0, 0]
            let error = assertRefused(bytes, .unsupportedType)
            XCTAssertTrue(error?.detail.contains("'\(tag)'") ?? false, "\(error.map(\.detail) ?? "")")
        }
    }

    func testRefusesOversizedPacketsAndStrings() {
        assertRefused([UInt8](repeating: 0, count: 65_540), .oversized, "over 64 KiB")
        let long = OSCMessage("/" + String(repeating: "a", count: 1_024)).encoded()
        assertRefused(long, .oversized, "a 1 025-byte address")
        XCTAssertNoThrow(try OSCPacket(decoding: OSCMessage("/" + String(repeating: "a", count: 1_023)).encoded()))
        let tight = OSCPacket.Limits(maximumPacketBytes: 64, maximumStringBytes: 8, maximumBundleDepth: 1)
        XCTAssertThrowsError(try OSCPacket(decoding: OSCMessage("/", [.string("123456789")]).encoded(), limits: tight)) {
            XCTAssertEqual($0 as? InteropError, .oversized)
        }
        XCTAssertThrowsError(try OSCPacket(decoding: OSCBundle(elements: [.bundle(OSCBundle(elements: []))]).encoded(), limits: tight)) {
            XCTAssertEqual($0 as? InteropError, .nestingTooDeep)
        }
    }

    @discardableResult
    private func assertRefused(_ bytes: [UInt8], _ expected: InteropError, _ message: String = "",
                               file: StaticString = #filePath, line: UInt = #line) -> InteropError? {
        do {
            let packet = try OSCPacket(decoding: bytes)
            XCTFail("accepted \(packet); expected \(expected.kind). \(message)", file: file, line: line)
        } catch let error as InteropError {
            XCTAssertEqual(error, expected, "\(error). \(message)", file: file, line: line)
            return error
        } catch {
            XCTFail("threw \(error), not an InteropError", file: file, line: line)
        }
        return nil
    }
}
