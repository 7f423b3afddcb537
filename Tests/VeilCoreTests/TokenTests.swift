import Foundation
import XCTest
@testable import VeilCore

/// Issuing and verifying room tokens, every refusal with its code, on an injected clock.
final class TokenTests: XCTestCase {
    let secret = try! ServerSecret(bytes: Array(0..<32))
    let now = Date(timeIntervalSince1970: 1_800_000_000)
    var authority: TokenAuthority { TokenAuthority(secret: secret) }

    private func verify(_ token: String?, room: String = "r1", user: String = "ana", at date: Date? = nil) -> Result<TokenClaims, TokenError> {
        Result { () throws(TokenError) in try authority.verify(token, room: room, user: user, now: date ?? now) }
    }

    func testAnIssuedTokenVerifiesAndCarriesItsClaims() throws {
        let token = try authority.issue(room: "r1", user: "ana", lifetime: 600, now: now)
        XCTAssertEqual(try verify(token).get(), TokenClaims(room: "r1", user: "ana", expiry: 1_800_000_600))
        let parts = token.split(separator: ".")
        XCTAssertEqual(parts.count, 3)
        XCTAssertEqual(parts[0], "v1")
        XCTAssertEqual(Base64URL.decode(parts[1]).map { String(decoding: $0, as: UTF8.self) }, #"{"exp":1800000600,"r":"r1","u":"ana"}"#)
        XCTAssertFalse(token.contains("="), "unpadded")
    }

    func testGoldenToken() throws {
        // Pins the format: a change here invalidates every token in the field.
        let token = try authority.issue(room: "standup", user: "ana", expiry: Date(timeIntervalSince1970: 1_795_969_110))
        let payload = Base64URL.encode(Array(#"{"exp":1795969110,"r":"standup","u":"ana"}"#.utf8))
        let mac = HMACSHA256.authenticationCode(for: Array("v1.\(payload)".utf8), key: Array(0..<32) as [UInt8])
        XCTAssertEqual(token, "v1.\(payload).\(Base64URL.encode(mac))")
        XCTAssertEqual(payload, "eyJleHAiOjE3OTU5NjkxMTAsInIiOiJzdGFuZHVwIiwidSI6ImFuYSJ9")
    }

    func testEveryRefusalHasItsCode() throws {
        let valid = try authority.issue(room: "r1", user: "ana", lifetime: 600, now: now)
        let parts = valid.split(separator: ".").map(String.init)
        let otherServer = TokenAuthority(secret: .random())
        func tamperedPayload(_ json: String) -> String { "v1.\(Base64URL.encode(Array(json.utf8))).\(parts[2])" }
        let cases: [(String, String?, TokenError)] = [
            ("nil", nil, .missing),
            ("empty", "", .missing),
            ("one part", "abc", .malformed),
            ("two parts", "v1.\(parts[1])", .malformed),
            ("four parts", valid + ".x", .malformed),
            ("wrong version", "v2.\(parts[1]).\(parts[2])", .malformed),
            ("padding", "v1.\(parts[1])=.\(parts[2])", .malformed),
            ("standard alphabet", "v1.\(parts[1]).\(parts[2].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/"))+", .malformed),
            ("short MAC", "v1.\(parts[1]).\(parts[2].prefix(20))", .malformed),
            ("empty payload", "v1..\(parts[2])", .malformed),
            ("huge", "v1." + String(repeating: "A", count: 2000) + ".\(parts[2])", .malformed),
            ("other server", try otherServer.issue(room: "r1", user: "ana", lifetime: 600, now: now), .forged),
            ("flipped MAC", "v1.\(parts[1]).\(parts[2].first == "A" ? "B" : "A")\(parts[2].dropFirst())", .forged),
            ("payload for another room", tamperedPayload(#"{"exp":1800000600,"r":"r2","u":"ana"}"#), .forged),
            ("later expiry", tamperedPayload(#"{"exp":1900000000,"r":"r1","u":"ana"}"#), .forged),
            ("expired", try authority.issue(room: "r1", user: "ana", expiry: now.addingTimeInterval(-1)), .expired),
            ("expires now", try authority.issue(room: "r1", user: "ana", expiry: now), .expired),
            ("wrong room", try authority.issue(room: "r2", user: "ana", lifetime: 600, now: now), .wrongRoom),
            ("wrong user", try authority.issue(room: "r1", user: "ben", lifetime: 600, now: now), .wrongUser),
        ]
        for (what, token, expected) in cases {
            switch verify(token) {
            case .success: XCTFail("\(what): accepted")
            case .failure(let error):
                XCTAssertEqual(error, expected, what)
                XCTAssertEqual(error.code, expected.code, what)
                if let token, token.count > 3 { XCTAssertFalse(error.message.contains(token), what) }
            }
        }
        XCTAssertEqual(Set(cases.map(\.2.code.rawValue)),
                       ["token_missing", "token_malformed", "token_forged", "token_expired", "token_wrong_room", "token_wrong_user"])
    }

    func testExpiryFollowsTheInjectedClock() throws {
        let token = try authority.issue(room: "r1", user: "ana", lifetime: 60, now: now)
        XCTAssertNoThrow(try verify(token, at: now.addingTimeInterval(59)).get())
        XCTAssertEqual(verify(token, at: now.addingTimeInterval(60)).failure, .expired)
        XCTAssertEqual(verify(token, at: now.addingTimeInterval(3600)).failure, .expired)
    }

    func testChecksComeInTheDocumentedOrder() throws {
        // Expired and for another room and user: expiry is reported first; a forged one is forged whatever it says.
        let stale = try authority.issue(room: "r9", user: "zed", expiry: now.addingTimeInterval(-10))
        XCTAssertEqual(verify(stale).failure, .expired)
        let forged = try TokenAuthority(secret: .random()).issue(room: "r9", user: "zed", expiry: now.addingTimeInterval(-10))
        XCTAssertEqual(verify(forged).failure, .forged)
        let elsewhere = try authority.issue(room: "r9", user: "zed", lifetime: 60, now: now)
        XCTAssertEqual(verify(elsewhere).failure, .wrongRoom)
    }

    func testIssuingRefusesBadNamesAndLifetimes() {
        XCTAssertThrowsError(try authority.issue(room: "a room", user: "ana", lifetime: 60))
        XCTAssertThrowsError(try authority.issue(room: "r1", user: "", lifetime: 60))
        XCTAssertThrowsError(try authority.issue(room: "r1", user: "ana", lifetime: 0))
        XCTAssertThrowsError(try authority.issue(room: "r1", user: "ana", lifetime: 31 * 86400))
        XCTAssertNoThrow(try authority.issue(room: "r1", user: "ana", lifetime: 30 * 86400))
    }

    func testBase64URLIsStrict() {
        XCTAssertEqual(Base64URL.decode("AQID"), [1, 2, 3])
        XCTAssertEqual(Base64URL.decode("-_8"), [0xfb, 0xff])
        XCTAssertNil(Base64URL.decode("+/8"))
        XCTAssertNil(Base64URL.decode("AQ=="))
        XCTAssertNil(Base64URL.decode("AR"), "non-canonical trailing bits")
        XCTAssertNil(Base64URL.decode("A"))
        XCTAssertNil(Base64URL.decode(""))
        XCTAssertNil(Base64URL.decode("AQ D"))
        for length in 1..<40 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 * 37 + length) }
            let text = Base64URL.encode(bytes)
            XCTAssertEqual(Base64URL.decode(Substring(text)), bytes)
        }
    }
}

private extension Result {
    var failure: Failure? { if case .failure(let e) = self { e } else { nil } }
}
