import Foundation

// Room tokens: `v1.<base64url(payload JSON)>.<base64url(HMAC-SHA256)>`, where the payload is
// {"exp": unix seconds, "r": room, "u": user} and the MAC covers the ASCII text "v1.<payload>".
// Only the server's secret makes them: clients receive a token, they never compute one.

/// What a token grants: entry to one room, as one user, until an expiry.
public struct TokenClaims: Equatable, Sendable {
    /// The room the token opens.
    public var room: String
    /// The user it admits.
    public var user: String
    /// When it stops being valid, in whole seconds since 1970 (UTC).
    public var expiry: Int64

    /// Claims for `user` in `room` until `expiry` (Unix seconds).
    public init(room: String, user: String, expiry: Int64) {
        self.room = room; self.user = user; self.expiry = expiry
    }
}

/// Why a token was refused; `code` is the signaling error code the server sends.
public struct TokenError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The signaling error code (`token_missing`, `token_malformed`, ...).
    public let code: SignalingErrorCode
    /// What was wrong and what to do about it (never contains the token).
    public let message: String
    public var description: String { "\(code): \(message)" }

    /// Same kind of refusal, whatever the message.
    public static func == (a: TokenError, b: TokenError) -> Bool { a.code == b.code }

    /// No token was given.
    public static let missing = TokenError(code: .tokenMissing, message: "a token is required: ask the server's operator for one (`veil token`)")
    /// The token is not `v1.<payload>.<signature>` with valid base64url parts.
    public static let malformed = TokenError(code: .tokenMalformed, message: "the token is not a Veil v1 token")
    /// The signature does not verify with this server's secret.
    public static let forged = TokenError(code: .tokenForged, message: "the token was not issued by this server")
    /// The expiry has passed.
    public static let expired = TokenError(code: .tokenExpired, message: "the token has expired: get a new one")
    /// Issued for another room.
    public static let wrongRoom = TokenError(code: .tokenWrongRoom, message: "the token was issued for another room")
    /// Issued for another user.
    public static let wrongUser = TokenError(code: .tokenWrongUser, message: "the token was issued for another user")
}

/// Issues and verifies room tokens with the server's secret.
public struct TokenAuthority: Sendable {
    private let secret: ServerSecret
    /// The longest lifetime `issue` accepts (30 days): tokens are meant to be short-lived.
    public static let maxLifetime: TimeInterval = 30 * 24 * 3600

    /// An authority signing with `secret`.
    public init(secret: ServerSecret) { self.secret = secret }

    /// The expiries a token can carry, in Unix seconds: 1970-01-01 through 9999-12-31 (UTC). Every
    /// one is exact as a JSON number and as a `Double`, so a token verifies to the expiry it was
    /// issued with; a payload outside the range is refused as malformed.
    public static let expiryRange: ClosedRange<Int64> = 0...253_402_300_799

    /// A token admitting `user` to `room` until `expiry` (rounded up to a whole second).
    /// - Throws: `VeilError.invalidInput` when a name is not valid (`SignalingMessage.isValidName`)
    ///   or the expiry lies outside `expiryRange` (or is not a number).
    public func issue(room: String, user: String, expiry: Date) throws -> String {
        for (what, name) in [("room", room), ("user", user)] where !SignalingMessage.isValidName(name) {
            throw VeilError.invalidInput("invalid \(what) name \"\(name.prefix(80))\": use 1–\(SignalingMessage.maxNameLength) characters of A–Z a–z 0–9 . _ - @ + ~")
        }
        // Checked before converting: Int64(_:) traps on NaN, infinities and values beyond ±2^63.
        let seconds = expiry.timeIntervalSince1970.rounded(.up)
        guard seconds >= Double(Self.expiryRange.lowerBound), seconds <= Double(Self.expiryRange.upperBound) else {
            throw VeilError.invalidInput("a token's expiry must lie between 1970 and the end of 9999 (UTC); got \(expiry.timeIntervalSince1970) s since 1970")
        }
        let claims = TokenClaims(room: room, user: user, expiry: Int64(seconds))
        let payload = Base64URL.encode(Array(Self.payloadJSON(claims).utf8))
        let signed = "v1.\(payload)"
        return "\(signed).\(Base64URL.encode(HMACSHA256.authenticationCode(for: Array(signed.utf8), key: secret.bytes)))"
    }

    /// A token admitting `user` to `room` for `lifetime` seconds from `now`.
    /// - Throws: `VeilError.invalidInput` for invalid names or a lifetime outside 1 s … 30 days.
    public func issue(room: String, user: String, lifetime: TimeInterval, now: Date = Date()) throws -> String {
        guard lifetime >= 1, lifetime <= Self.maxLifetime else {
            throw VeilError.invalidInput("a token's lifetime must be between 1 second and 30 days")
        }
        return try issue(room: room, user: user, expiry: now.addingTimeInterval(lifetime))
    }

    /// Checks that `token` was issued by this server for `room` and `user` and has not expired at `now`.
    /// Checks in this order: present, well-formed, signature, expiry, room, user.
    public func verify(_ token: String?, room: String, user: String, now: Date) throws(TokenError) -> TokenClaims {
        guard let token, !token.isEmpty else { throw .missing }
        guard token.utf8.count <= SignalingMessage.maxTokenLength else { throw .malformed }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == "v1",
              let payload = Base64URL.decode(parts[1]), let mac = Base64URL.decode(parts[2]),
              mac.count == SHA256.digestSize else { throw .malformed }
        let expected = HMACSHA256.authenticationCode(for: Array("v1.\(parts[1])".utf8), key: secret.bytes)
        guard HMACSHA256.constantTimeEquals(mac, expected) else { throw .forged }
        // Signed by us: a payload that does not parse would be our own bug, still reported as malformed.
        guard let claims = Self.parsePayload(payload) else { throw .malformed }
        guard Double(claims.expiry) > now.timeIntervalSince1970 else { throw .expired }
        guard claims.room == room else { throw .wrongRoom }
        guard claims.user == user else { throw .wrongUser }
        return claims
    }

    static func payloadJSON(_ claims: TokenClaims) -> String {
        struct Payload: Encodable { let exp: Int64; let r: String; let u: String }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let data = (try? encoder.encode(Payload(exp: claims.expiry, r: claims.room, u: claims.user))) ?? Data()
        return String(decoding: data, as: UTF8.self)
    }

    static func parsePayload(_ bytes: [UInt8]) -> TokenClaims? {
        guard let object = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any],
              Set(object.keys) == ["exp", "r", "u"],
              let room = object["r"] as? String, let user = object["u"] as? String,
              let exp = object["exp"] as? NSNumber, let expiry = Int64(exactly: exp.doubleValue),
              expiryRange.contains(expiry) else { return nil }
        return TokenClaims(room: room, user: user, expiry: expiry)
    }
}

/// Base64url without padding (RFC 4648 §5), decoded strictly: only the URL alphabet, and only the
/// canonical encoding (so one token has exactly one spelling).
enum Base64URL {
    static func encode(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func decode(_ text: Substring) -> [UInt8]? {
        guard !text.isEmpty, text.utf8.count % 4 != 1, text.utf8.allSatisfy({ byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "_"): return true
            default: return false
            }
        }) else { return nil }
        var standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        standard += String(repeating: "=", count: (4 - standard.utf8.count % 4) % 4)
        guard let data = Data(base64Encoded: standard) else { return nil }
        let bytes = [UInt8](data)
        return encode(bytes) == text ? bytes : nil
    }
}
