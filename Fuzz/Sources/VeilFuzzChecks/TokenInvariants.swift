import Foundation
import VeilCore

/// What `TokenAuthority` promises (docs/protocol.md, "Tokens"), checked on arbitrary bytes. The
/// first byte picks what the rest is:
/// - **0, a token** as a client would send it, verified for room `standup`, user `ana`: a refusal
///   is a `TokenError` with a token code whose message does not repeat the token; a token that
///   verifies carries the room and user it was checked for and an unexpired expiry, and is exactly
///   the token `issue` makes for those claims (one spelling per token: nothing else verifies);
/// - **1, a payload** (the JSON inside a token), signed with the server's secret, so the claims
///   parser sees what the signature check otherwise keeps from it: never `token_forged` or
///   `token_missing` (it is signed), and if it verifies, the claims are the ones checked for;
/// - **2, claims**: an expiry (8 bytes, a `Double` of Unix seconds) and a room and a user name
///   (the rest, split at the first 0 byte). `issue` either refuses them with a `VeilError` (invalid
///   names, or an expiry outside `TokenAuthority.expiryRange`) or makes a token that the server accepts
///   (≤ `SignalingMessage.maxTokenLength` bytes) and that verifies to exactly these claims before
///   its expiry, is expired at it, is refused for another room or user, and is refused with a
///   changed signature.
/// Nothing traps on any input.
public enum TokenInvariants {
    static let harness = FuzzHarness.token.rawValue
    /// The secret of the golden token in TokenTests and docs: bytes 0…31.
    static let authority: TokenAuthority = {
        // 32 bytes is the minimum, so this cannot throw; the fallback keeps the harness trap-free anyway.
        (try? ServerSecret(bytes: Array(0..<32))).map(TokenAuthority.init) ?? TokenAuthority(secret: .random())
    }()
    static let secretBytes: [UInt8] = Array(0..<32)
    /// Just before the golden token (`standup`, `ana`, expiry 1 795 969 110) expires.
    static let now = Date(timeIntervalSince1970: 1_795_969_000)
    static let tokenCodes: Set<SignalingErrorCode> = [.tokenMissing, .tokenMalformed, .tokenForged, .tokenExpired, .tokenWrongRoom, .tokenWrongUser]

    /// Checks one input (see the type's documentation).
    public static func check(_ input: [UInt8]) throws(InvariantViolation) {
        guard let mode = input.first else { return }
        let body = Array(input.dropFirst())
        switch mode % 3 {
        case 0: try checkToken(String(decoding: body, as: UTF8.self))
        case 1: try checkPayload(body)
        default: try checkClaims(body)
        }
    }

    private static func verify(_ token: String?, room: String, user: String, now: Date) -> Result<TokenClaims, TokenError> {
        Result { () throws(TokenError) in try authority.verify(token, room: room, user: user, now: now) }
    }

    private static func checkToken(_ token: String) throws(InvariantViolation) {
        func fail(_ what: String) -> InvariantViolation { InvariantViolation(harness, "\(what); token \(quoted(token))") }
        switch verify(token, room: "standup", user: "ana", now: now) {
        case let .failure(error):
            try checkRefusal(error, of: token, fail)
        case let .success(claims):
            guard claims.room == "standup", claims.user == "ana", Double(claims.expiry) > now.timeIntervalSince1970 else {
                throw fail("verified for standup/ana with claims \(claims)")
            }
            let reissued: String
            do { reissued = try authority.issue(room: claims.room, user: claims.user, expiry: Date(timeIntervalSince1970: Double(claims.expiry))) } catch {
                throw fail("verified with claims \(claims) that issue refuses: \(error)")
            }
            guard reissued == token else { throw fail("verified, but the token issued for its claims is \(quoted(reissued))") }
        }
    }

    private static func checkPayload(_ payload: [UInt8]) throws(InvariantViolation) {
        let signed = "v1." + base64URL(payload)
        let token = signed + "." + base64URL(HMACSHA256.authenticationCode(for: Array(signed.utf8), key: secretBytes))
        func fail(_ what: String) -> InvariantViolation { InvariantViolation(harness, "\(what); payload \(quoted(String(decoding: payload, as: UTF8.self)))") }
        switch verify(token, room: "standup", user: "ana", now: now) {
        case let .failure(error):
            try checkRefusal(error, of: token, fail)
            guard error.code != .tokenForged, error.code != .tokenMissing else { throw fail("a signed token refused as \(error.code)") }
        case let .success(claims):
            guard claims.room == "standup", claims.user == "ana", Double(claims.expiry) > now.timeIntervalSince1970 else {
                throw fail("verified for standup/ana with claims \(claims)")
            }
        }
    }

    private static func checkClaims(_ body: [UInt8]) throws(InvariantViolation) {
        var bits: UInt64 = 0
        for (index, byte) in body.prefix(8).enumerated() { bits |= UInt64(byte) << (8 * UInt64(index)) }
        let seconds = body.count >= 8 ? Double(bitPattern: bits) : 1_800_000_000
        let names = body.dropFirst(8).split(separator: 0, maxSplits: 1, omittingEmptySubsequences: false)
        let room = String(decoding: names.first ?? [], as: UTF8.self)
        let user = String(decoding: names.dropFirst().first ?? [], as: UTF8.self)
        func fail(_ what: String) -> InvariantViolation {
            InvariantViolation(harness, "\(what); claims room \(quoted(room)), user \(quoted(user)), expiry \(seconds) s")
        }

        // Date keeps its time relative to 2001, so tiny offsets from 1970 round away: what counts
        // is the expiry as the Date holds it.
        let date = Date(timeIntervalSince1970: seconds)
        let dateSeconds = date.timeIntervalSince1970
        let token: String
        do {
            token = try authority.issue(room: room, user: user, expiry: date)
        } catch let error as VeilError {
            let namesValid = SignalingMessage.isValidName(room) && SignalingMessage.isValidName(user)
            let expiryValid = dateSeconds.isFinite && abs(dateSeconds) < 1e12
                && TokenAuthority.expiryRange.contains(Int64(dateSeconds.rounded(.up)))
            if namesValid && expiryValid { throw fail("issue refused valid claims: \(error)") }
            return
        } catch {
            throw fail("issue threw \(type(of: error)), not a VeilError: \(error)")
        }
        guard SignalingMessage.isValidName(room), SignalingMessage.isValidName(user) else { throw fail("issued a token for an invalid name") }
        guard token.utf8.count <= SignalingMessage.maxTokenLength else {
            throw fail("issued a \(token.utf8.count)-byte token; the server reads at most \(SignalingMessage.maxTokenLength)")
        }
        guard let expiry = Int64(exactly: dateSeconds.rounded(.up)) else { throw fail("issued a token for an expiry it cannot represent") }
        let claims = TokenClaims(room: room, user: user, expiry: expiry)
        let justBefore = Date(timeIntervalSince1970: Double(expiry) - 1)
        switch verify(token, room: room, user: user, now: justBefore) {
        case let .success(verified):
            guard verified == claims else { throw fail("the token verifies to \(verified), not \(claims)") }
        case let .failure(error):
            throw fail("the issued token \(quoted(token)) is refused before its expiry: \(error)")
        }
        let refusals: [(TokenError, Result<TokenClaims, TokenError>)] = [
            (.expired, verify(token, room: room, user: user, now: Date(timeIntervalSince1970: Double(expiry)))),
            (.wrongRoom, verify(token, room: room + "x", user: user, now: justBefore)),
            (.wrongUser, verify(token, room: room, user: user + "x", now: justBefore)),
        ]
        for (expected, outcome) in refusals {
            guard case let .failure(error) = outcome, error.code == expected.code else {
                throw fail("expected \(expected.code), got \(outcome)")
            }
        }
        // The last character of the signature, changed: forged, or malformed when the change makes
        // the base64url spelling non-canonical. Never accepted.
        if let last = token.last {
            let tampered = String(token.dropLast()) + (last == "A" ? "Q" : "A")
            let outcome = verify(tampered, room: room, user: user, now: justBefore)
            guard case let .failure(error) = outcome, error.code == .tokenForged || error.code == .tokenMalformed else {
                throw fail("a changed signature gives \(outcome)")
            }
        }
    }

    private static func checkRefusal(_ error: TokenError, of token: String, _ fail: (String) -> InvariantViolation) throws(InvariantViolation) {
        guard tokenCodes.contains(error.code), !error.message.isEmpty else { throw fail("refused with \(error.code): \(quoted(error.message))") }
        // Byte-wise: Foundation's String.contains stops at a NUL, so "n\0\0…" would match any "n".
        if token.utf8.count >= 8 && Array(error.message.utf8).firstRange(of: Array(token.utf8)) != nil {
            throw fail("the refusal repeats the token")
        }
    }

    /// Base64url without padding (RFC 4648 §5), written here rather than borrowed from VeilCore.
    static func base64URL(_ bytes: [UInt8]) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        var out = ""
        var index = 0
        while index < bytes.count {
            let chunk = bytes[index..<min(index + 3, bytes.count)]
            var bits: UInt32 = 0
            for (i, byte) in chunk.enumerated() { bits |= UInt32(byte) << (16 - 8 * UInt32(i)) }
            for i in 0...chunk.count { out.append(alphabet[Int((bits >> (18 - 6 * UInt32(i))) & 0x3F)]) }
            index += 3
        }
        return out
    }
}
