import Foundation
import XCTest
@testable import VeilCore

/// Inputs the libFuzzer harnesses (Fuzz/, docs/reliability.md "Fuzzing") found to break VeilCore,
/// one test each, named after what went wrong; each input is also in the seed corpus Fuzz/corpus/
/// when it fits there.
final class FuzzRegressionTests: XCTestCase {
    let authority = TokenAuthority(secret: try! ServerSecret(bytes: Array(0..<32)))

    /// Found by the token harness (claims mode, Fuzz/corpus/token/regression-expiry-1e247.bin:
    /// room "tantup", user "ana", expiry 1.55e247 s): `issue(room:user:expiry:)` converted the
    /// expiry with `Int64(_:)`, which traps beyond ±2^63 and on NaN. It now refuses expiries
    /// outside `TokenAuthority.expiryRange` with a `VeilError`.
    func testIssuingATokenForAnExpiryBeyondInt64RefusesInsteadOfTrapping() {
        let found = Date(timeIntervalSince1970: Double(bitPattern: 0x7341_C314_1580_0000))
        XCTAssertEqual(found.timeIntervalSince1970, 1.552383219326337e247)
        for expiry in [found, Date(timeIntervalSince1970: .nan), Date(timeIntervalSince1970: .infinity),
                       Date(timeIntervalSince1970: -.infinity), Date(timeIntervalSince1970: 0x1p63),
                       Date(timeIntervalSince1970: -1), Date(timeIntervalSince1970: 253_402_300_800)] {
            XCTAssertThrowsError(try authority.issue(room: "tantup", user: "ana", expiry: expiry), "\(expiry.timeIntervalSince1970)") {
                XCTAssertEqual($0 as? VeilError, .invalidInput(""))
                XCTAssertTrue("\($0)".contains("between 1970 and the end of 9999"), "\($0)")
            }
        }
    }

    /// The same fix at both ends of the range: what can be issued verifies to exactly the expiry
    /// it was issued with (an expiry beyond 2^53 would not survive the payload's JSON number), and
    /// a signed payload outside the range is malformed.
    func testTokenExpiriesAtTheEndsOfTheRangeVerifyExactly() throws {
        for expiry in [TokenAuthority.expiryRange.lowerBound, TokenAuthority.expiryRange.upperBound] {
            let token = try authority.issue(room: "r", user: "u", expiry: Date(timeIntervalSince1970: Double(expiry)))
            let before = Date(timeIntervalSince1970: Double(expiry) - 1)
            XCTAssertEqual(try authority.verify(token, room: "r", user: "u", now: before), TokenClaims(room: "r", user: "u", expiry: expiry))
        }
        for exp in ["9007199254740993", "-1", "253402300800", "9223372036854775807"] {
            let payload = Base64URL.encode(Array(#"{"exp":\#(exp),"r":"r","u":"u"}"#.utf8))
            let mac = HMACSHA256.authenticationCode(for: Array("v1.\(payload)".utf8), key: Array(0..<32) as [UInt8])
            let token = "v1.\(payload).\(Base64URL.encode(mac))"
            XCTAssertThrowsError(try authority.verify(token, room: "r", user: "u", now: Date(timeIntervalSince1970: -1e12)), exp) {
                XCTAssertEqual($0 as? TokenError, .malformed, exp)
            }
        }
    }

    /// Found by the signaling harness's relay invariant: a 65 536-byte `offer` (the most the server
    /// accepts) whose SDP is 30 000 escaped quotes and 5 496 letters, addressed to "b". The server
    /// relays it with `from` set to the sender; from a sender with a 64-character name that is
    /// 65 601 bytes, which clients refused as `message_too_large` although docs/protocol.md says
    /// they accept 128 KiB. Clients now decode server messages up to `maxServerMessageSize`.
    func testAMaximumSizeOfferIsReadableByItsAddresseeAfterTheRelay() throws {
        let input = #"{"v":1,"type":"offer","to":"b","sdp":""# + String(repeating: #"\""#, count: 30_000)
            + String(repeating: "a", count: 5_496) + #""}"#
        XCTAssertEqual(input.utf8.count, SignalingMessage.maxSize)
        let offer = try SignalingMessage.decode(ClientMessage.self, from: input)
        guard case let .offer(to, sdp) = offer else { return XCTFail("decoded \(offer)") }
        XCTAssertEqual(to, "b")
        let relayed = ServerMessage.offer(from: String(repeating: "~", count: SignalingMessage.maxNameLength), sdp: sdp)
        let text = SignalingMessage.encode(relayed)
        XCTAssertEqual(text.utf8.count, 65_601)
        XCTAssertEqual(try SignalingMessage.decode(ServerMessage.self, from: text), relayed)
    }

    /// The limits on each side: the server still refuses client messages over 64 KiB, clients
    /// refuse server messages over 128 KiB.
    func testEachSideKeepsItsSizeLimit() {
        XCTAssertEqual(SignalingMessage.sizeLimit(of: ClientMessage.self), 65_536)
        XCTAssertEqual(SignalingMessage.sizeLimit(of: ServerMessage.self), 131_072)
        let overClient = #"{"v":1,"type":"offer","to":"b","sdp":""# + String(repeating: "a", count: 65_497) + #""}"#
        XCTAssertEqual(overClient.utf8.count, SignalingMessage.maxSize + 1)
        XCTAssertThrowsError(try SignalingMessage.decode(ClientMessage.self, from: overClient)) {
            XCTAssertEqual(($0 as? SignalingError)?.code, .messageTooLarge)
        }
        let overServer = String(repeating: " ", count: SignalingMessage.maxServerMessageSize + 1)
        XCTAssertThrowsError(try SignalingMessage.decode(ServerMessage.self, from: overServer)) {
            XCTAssertEqual(($0 as? SignalingError)?.code, .messageTooLarge)
            XCTAssertTrue(($0 as? SignalingError)?.message.contains("131072") ?? false)
        }
    }
}
