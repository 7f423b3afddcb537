import Foundation
import XCTest
@testable import VeilCore

/// SHA-256 against FIPS 180 (and NIST's example) vectors, HMAC-SHA256 against RFC 4231.
final class TokenCryptoTests: XCTestCase {
    private func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }
    private func bytes(_ hex: String) -> [UInt8] {
        let digits = Array(hex.utf8)
        return stride(from: 0, to: digits.count, by: 2).map { UInt8(String(decoding: digits[$0..<$0 + 2], as: UTF8.self), radix: 16)! }
    }

    func testSHA256Vectors() {
        let vectors: [(String, String)] = [
            ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
            ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
            ("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
             "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"),
            ("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
             "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"),
        ]
        for (message, digest) in vectors {
            XCTAssertEqual(hex(SHA256.hash(Array(message.utf8))), digest, message)
        }
    }

    func testSHA256OfAMillionAsFedInPieces() {
        var sha = SHA256()
        let chunk = [UInt8](repeating: UInt8(ascii: "a"), count: 1000)
        for _ in 0..<1000 { sha.update(chunk) }
        XCTAssertEqual(hex(sha.finalize()), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    func testSHA256PaddingBoundaries() {
        // Lengths around the 55/56/64-byte padding edges, split arbitrarily, agree with one-shot hashing.
        for length in [55, 56, 57, 63, 64, 65, 119, 120, 128] {
            let message = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
            var split = SHA256()
            split.update(message.prefix(length / 3))
            split.update(message.dropFirst(length / 3))
            XCTAssertEqual(split.finalize(), SHA256.hash(message), "length \(length)")
        }
        XCTAssertEqual(hex(SHA256.hash([UInt8](repeating: 0x61, count: 64))),
                       "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb")
    }

    func testHMACSHA256RFC4231() {
        let cases: [(key: [UInt8], data: [UInt8], mac: String)] = [
            ([UInt8](repeating: 0x0b, count: 20), Array("Hi There".utf8),
             "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"),
            (Array("Jefe".utf8), Array("what do ya want for nothing?".utf8),
             "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"),
            ([UInt8](repeating: 0xaa, count: 20), [UInt8](repeating: 0xdd, count: 50),
             "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"),
            (bytes("0102030405060708090a0b0c0d0e0f10111213141516171819"), [UInt8](repeating: 0xcd, count: 50),
             "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"),
            ([UInt8](repeating: 0xaa, count: 131), Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8),
             "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"),
            ([UInt8](repeating: 0xaa, count: 131),
             Array("This is a test using a larger than block-size key and a larger than block-size data. The key needs to be hashed before being used by the HMAC algorithm.".utf8),
             "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"),
        ]
        for (index, c) in cases.enumerated() {
            XCTAssertEqual(hex(HMACSHA256.authenticationCode(for: c.data, key: c.key)), c.mac, "RFC 4231 case \(index < 4 ? index + 1 : index + 2)")
        }
        // Case 5: output truncated to 128 bits.
        let truncated = HMACSHA256.authenticationCode(for: Array("Test With Truncation".utf8), key: [UInt8](repeating: 0x0c, count: 20)).prefix(16)
        XCTAssertEqual(hex(Array(truncated)), "a3b6167473100ee06e0c796c2955552b")
    }

    func testConstantTimeComparison() {
        XCTAssertTrue(HMACSHA256.constantTimeEquals([1, 2, 3], [1, 2, 3]))
        XCTAssertFalse(HMACSHA256.constantTimeEquals([1, 2, 3], [1, 2, 4]))
        XCTAssertFalse(HMACSHA256.constantTimeEquals([1, 2, 3], [1, 2]))
        XCTAssertTrue(HMACSHA256.constantTimeEquals([UInt8](), [UInt8]()))
        XCTAssertFalse(HMACSHA256.constantTimeEquals([0x80] + [UInt8](repeating: 0, count: 31), [UInt8](repeating: 0, count: 32)))
    }
}
