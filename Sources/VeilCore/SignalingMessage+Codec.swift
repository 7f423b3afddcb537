import Foundation

// JSON encoding and strict decoding of the signaling messages. Decoding refuses anything v1 does
// not define (unknown types, unexpected or missing fields, wrong types, invalid names) with a
// `SignalingError` whose code says which kind of mistake it was.

extension SignalingMessage {
    /// The JSON text of a message: compact, keys sorted, slashes unescaped (SDP is full of them).
    public static func encode<Message: Encodable>(_ message: Message) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // Only non-finite floating-point numbers make JSONEncoder fail, and no message has any.
        guard let data = try? encoder.encode(message) else {
            return #"{"code":"bad_message","message":"unencodable message","type":"error","v":1}"#
        }
        return String(decoding: data, as: UTF8.self)
    }

    /// The size limit of a message of type `type`: `maxServerMessageSize` for `ServerMessage`
    /// (what clients read), `maxSize` for anything else (what the server reads).
    public static func sizeLimit<Message>(of type: Message.Type) -> Int {
        type == ServerMessage.self ? maxServerMessageSize : maxSize
    }

    /// Decodes one message from its JSON text (UTF-8 bytes), strictly.
    /// - Throws: `SignalingError` with `message_too_large` (beyond `sizeLimit(of:)`), `bad_message`,
    ///   `unsupported_version` or `unknown_type`.
    public static func decode<Message: Decodable>(_ type: Message.Type, from bytes: some Collection<UInt8>) throws(SignalingError) -> Message {
        let limit = sizeLimit(of: type)
        guard bytes.count <= limit else {
            throw SignalingError(.messageTooLarge, "messages are limited to \(limit) bytes; this one has \(bytes.count)")
        }
        try checkNesting(bytes)
        do {
            return try JSONDecoder().decode(Message.self, from: Data(bytes))
        } catch let error as SignalingError {
            throw error
        } catch let DecodingError.dataCorrupted(context) where context.codingPath.isEmpty {
            throw SignalingError(.badMessage, "not valid JSON text")
        } catch let DecodingError.typeMismatch(_, context) where context.codingPath.isEmpty {
            throw SignalingError(.badMessage, "a message must be a JSON object")
        } catch {
            throw SignalingError(.badMessage, "undecodable message: \(Self.describe(error))")
        }
    }

    /// Decodes one message from its JSON text.
    public static func decode<Message: Decodable>(_ type: Message.Type, from text: String) throws(SignalingError) -> Message {
        try decode(type, from: Array(text.utf8))
    }

    /// Refuses deeply nested JSON before a recursive parser sees it.
    private static func checkNesting(_ bytes: some Collection<UInt8>) throws(SignalingError) {
        var depth = 0, inString = false, escaped = false
        for byte in bytes {
            if inString {
                if escaped { escaped = false } else if byte == UInt8(ascii: "\\") { escaped = true } else if byte == UInt8(ascii: "\"") { inString = false }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""): inString = true
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                depth += 1
                if depth > maxNestingDepth { throw SignalingError(.badMessage, "JSON nested deeper than \(maxNestingDepth) levels") }
            case UInt8(ascii: "}"), UInt8(ascii: "]"): depth -= 1
            default: break
            }
        }
    }

    private static func describe(_ error: Error) -> String {
        guard let error = error as? DecodingError else { return "\(error)" }
        switch error {
        case .dataCorrupted(let c), .keyNotFound(_, let c), .typeMismatch(_, let c), .valueNotFound(_, let c):
            let path = c.codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".")
            return path.isEmpty ? c.debugDescription : "\(path): \(c.debugDescription)"
        @unknown default:
            return "\(error)"
        }
    }
}

// MARK: - Strict objects

/// Any JSON object key.
struct JSONKey: CodingKey, Hashable {
    let stringValue: String
    init(_ string: String) { stringValue = string }
    init?(stringValue: String) { self.stringValue = stringValue }
    var intValue: Int? { nil }
    init?(intValue: Int) { nil }
}

/// A JSON object read field by field, with errors that name the field and the message.
struct StrictObject {
    let container: KeyedDecodingContainer<JSONKey>
    let what: String

    init(container: KeyedDecodingContainer<JSONKey>, what: String) {
        self.container = container; self.what = what
    }

    init(_ decoder: Decoder, what: String) throws {
        do { container = try decoder.container(keyedBy: JSONKey.self) } catch {
            throw SignalingError(.badMessage, "\(what) must be a JSON object")
        }
        self.what = what
    }

    /// Refuses fields other than `allowed`.
    func only(_ allowed: Set<String>) throws {
        if let extra = container.allKeys.map(\.stringValue).filter({ !allowed.contains($0) }).sorted().first {
            throw SignalingError(.badMessage, "unexpected field \"\(extra.prefix(32))\" in \(what)")
        }
    }

    func required<T: Decodable>(_ key: String, _ kind: String) throws -> T {
        guard container.contains(JSONKey(key)) else { throw SignalingError(.badMessage, "\(what) needs field \"\(key)\"") }
        do { return try container.decode(T.self, forKey: JSONKey(key)) } catch let error as SignalingError { throw error } catch {
            throw SignalingError(.badMessage, "field \"\(key)\" of \(what) must be \(kind)")
        }
    }

    func optional<T: Decodable>(_ key: String, _ kind: String) throws -> T? {
        do { return try container.decodeIfPresent(T.self, forKey: JSONKey(key)) } catch let error as SignalingError { throw error } catch {
            throw SignalingError(.badMessage, "field \"\(key)\" of \(what) must be \(kind)")
        }
    }

    func name(_ key: String) throws -> String {
        let value: String = try required(key, "a string")
        guard SignalingMessage.isValidName(value) else {
            throw SignalingError(.badMessage, "field \"\(key)\" of \(what) must be 1–\(SignalingMessage.maxNameLength) characters of A–Z a–z 0–9 . _ - @ + ~")
        }
        return value
    }

    func text(_ key: String, maxBytes: Int) throws -> String {
        let value: String = try required(key, "a string")
        guard value.utf8.count <= maxBytes else {
            throw SignalingError(.badMessage, "field \"\(key)\" of \(what) is longer than \(maxBytes) bytes")
        }
        return value
    }

    func mline(_ key: String) throws -> Int {
        let value: Int = try required(key, "an integer")
        guard (0...SignalingMessage.maxMLineIndex).contains(value) else {
            throw SignalingError(.badMessage, "field \"\(key)\" of \(what) must be in 0…\(SignalingMessage.maxMLineIndex)")
        }
        return value
    }

    /// Reads `"v"` and `"type"`: the version must be 1.
    static func header(_ decoder: Decoder) throws -> (StrictObject, String) {
        let object = try StrictObject(decoder, what: "a message")
        guard object.container.contains(JSONKey("v")) else { throw SignalingError(.badMessage, "a message needs \"v\": \(SignalingMessage.version)") }
        let version: Int
        do { version = try object.container.decode(Int.self, forKey: JSONKey("v")) } catch {
            throw SignalingError(.badMessage, "\"v\" must be an integer (this server speaks version \(SignalingMessage.version))")
        }
        guard version == SignalingMessage.version else {
            throw SignalingError(.unsupportedVersion, "version \(version) is not supported; this side speaks version \(SignalingMessage.version)")
        }
        let type: String = try object.required("type", "a string")
        return (StrictObject(container: object.container, what: "\"\(type.prefix(32))\""), type)
    }
}

private func encodeHeader(_ encoder: Encoder, type: String) -> KeyedEncodingContainer<JSONKey> {
    var container = encoder.container(keyedBy: JSONKey.self)
    try? container.encode(SignalingMessage.version, forKey: JSONKey("v"))
    try? container.encode(type, forKey: JSONKey("type"))
    return container
}

// MARK: - Client messages

extension ClientMessage: Codable {
    /// Decodes strictly; throws `SignalingError`.
    public init(from decoder: Decoder) throws {
        let (o, type) = try StrictObject.header(decoder)
        let common: Set = ["v", "type"]
        switch type {
        case "join":
            try o.only(common.union(["room", "user", "token"]))
            self = .join(room: try o.name("room"), user: try o.name("user"), token: try o.optional("token", "a string"))
        case "offer":
            try o.only(common.union(["to", "sdp"]))
            self = .offer(to: try o.name("to"), sdp: try o.text("sdp", maxBytes: SignalingMessage.maxSDPLength))
        case "answer":
            try o.only(common.union(["to", "sdp"]))
            self = .answer(to: try o.name("to"), sdp: try o.text("sdp", maxBytes: SignalingMessage.maxSDPLength))
        case "ice":
            try o.only(common.union(["to", "mline", "candidate"]))
            self = .ice(to: try o.name("to"), mline: try o.mline("mline"),
                        candidate: try o.text("candidate", maxBytes: SignalingMessage.maxCandidateLength))
        case "mute":
            try o.only(common.union(["muted"]))
            self = .mute(muted: try o.required("muted", "true or false"))
        case "leave":
            try o.only(common)
            self = .leave
        case "ping":
            try o.only(common.union(["t"]))
            self = .ping(t: try o.optional("t", "an integer"))
        default:
            throw SignalingError(.unknownType, "unknown message type \"\(type.prefix(32))\" (client messages: join, offer, answer, ice, mute, leave, ping)")
        }
    }

    /// Encodes as v1 JSON.
    public func encode(to encoder: Encoder) throws {
        var c = encodeHeader(encoder, type: type)
        switch self {
        case let .join(room, user, token):
            try c.encode(room, forKey: JSONKey("room"))
            try c.encode(user, forKey: JSONKey("user"))
            try c.encodeIfPresent(token, forKey: JSONKey("token"))
        case let .offer(to, sdp), let .answer(to, sdp):
            try c.encode(to, forKey: JSONKey("to"))
            try c.encode(sdp, forKey: JSONKey("sdp"))
        case let .ice(to, mline, candidate):
            try c.encode(to, forKey: JSONKey("to"))
            try c.encode(mline, forKey: JSONKey("mline"))
            try c.encode(candidate, forKey: JSONKey("candidate"))
        case let .mute(muted):
            try c.encode(muted, forKey: JSONKey("muted"))
        case .leave:
            break
        case let .ping(t):
            try c.encodeIfPresent(t, forKey: JSONKey("t"))
        }
    }
}

// MARK: - Server messages

extension ServerMessage: Codable {
    /// Decodes strictly; throws `SignalingError`.
    public init(from decoder: Decoder) throws {
        let (o, type) = try StrictObject.header(decoder)
        let common: Set = ["v", "type"]
        switch type {
        case "joined":
            try o.only(common.union(["you", "room", "muted", "resumed", "participants", "iceServers"]))
            self = .joined(Joined(you: try o.name("you"), room: try o.name("room"),
                                  muted: try o.optional("muted", "true or false") ?? false,
                                  resumed: try o.optional("resumed", "true or false") ?? false,
                                  participants: try o.required("participants", "an array of participants"),
                                  iceServers: try o.optional("iceServers", "an array of ICE servers") ?? []))
        case "participantJoined":
            try o.only(common.union(["user", "muted"]))
            self = .participantJoined(user: try o.name("user"), muted: try o.optional("muted", "true or false") ?? false)
        case "participantLeft":
            try o.only(common.union(["user", "reason"]))
            let reason: String = try o.required("reason", "a string")
            guard let leave = LeaveReason(rawValue: reason) else {
                throw SignalingError(.badMessage, "field \"reason\" of \"participantLeft\" must be left, timeout or kicked")
            }
            self = .participantLeft(user: try o.name("user"), reason: leave)
        case "offer":
            try o.only(common.union(["from", "sdp"]))
            self = .offer(from: try o.name("from"), sdp: try o.text("sdp", maxBytes: SignalingMessage.maxSDPLength))
        case "answer":
            try o.only(common.union(["from", "sdp"]))
            self = .answer(from: try o.name("from"), sdp: try o.text("sdp", maxBytes: SignalingMessage.maxSDPLength))
        case "ice":
            try o.only(common.union(["from", "mline", "candidate"]))
            self = .ice(from: try o.name("from"), mline: try o.mline("mline"),
                        candidate: try o.text("candidate", maxBytes: SignalingMessage.maxCandidateLength))
        case "muteChanged":
            try o.only(common.union(["user", "muted"]))
            self = .muteChanged(user: try o.name("user"), muted: try o.required("muted", "true or false"))
        case "error":
            try o.only(common.union(["code", "message"]))
            self = .error(code: SignalingErrorCode(rawValue: try o.required("code", "a string")),
                          message: try o.required("message", "a string"))
        case "pong":
            try o.only(common.union(["t"]))
            self = .pong(t: try o.optional("t", "an integer"))
        default:
            throw SignalingError(.unknownType, "unknown message type \"\(type.prefix(32))\"")
        }
    }

    /// Encodes as v1 JSON.
    public func encode(to encoder: Encoder) throws {
        var c = encodeHeader(encoder, type: type)
        switch self {
        case let .joined(j):
            try c.encode(j.you, forKey: JSONKey("you"))
            try c.encode(j.room, forKey: JSONKey("room"))
            try c.encode(j.muted, forKey: JSONKey("muted"))
            try c.encode(j.resumed, forKey: JSONKey("resumed"))
            try c.encode(j.participants, forKey: JSONKey("participants"))
            if !j.iceServers.isEmpty { try c.encode(j.iceServers, forKey: JSONKey("iceServers")) }
        case let .participantJoined(user, muted):
            try c.encode(user, forKey: JSONKey("user"))
            try c.encode(muted, forKey: JSONKey("muted"))
        case let .participantLeft(user, reason):
            try c.encode(user, forKey: JSONKey("user"))
            try c.encode(reason.rawValue, forKey: JSONKey("reason"))
        case let .offer(from, sdp), let .answer(from, sdp):
            try c.encode(from, forKey: JSONKey("from"))
            try c.encode(sdp, forKey: JSONKey("sdp"))
        case let .ice(from, mline, candidate):
            try c.encode(from, forKey: JSONKey("from"))
            try c.encode(mline, forKey: JSONKey("mline"))
            try c.encode(candidate, forKey: JSONKey("candidate"))
        case let .muteChanged(user, muted):
            try c.encode(user, forKey: JSONKey("user"))
            try c.encode(muted, forKey: JSONKey("muted"))
        case let .error(code, message):
            try c.encode(code.rawValue, forKey: JSONKey("code"))
            try c.encode(message, forKey: JSONKey("message"))
        case let .pong(t):
            try c.encodeIfPresent(t, forKey: JSONKey("t"))
        }
    }
}

extension ParticipantInfo: Codable {
    /// Decodes strictly: `{"user": name, "muted": bool}`.
    public init(from decoder: Decoder) throws {
        let o = try StrictObject(decoder, what: "a participant")
        try o.only(["user", "muted"])
        self.init(user: try o.name("user"), muted: try o.optional("muted", "true or false") ?? false)
    }

    /// Encodes as `{"muted": bool, "user": name}`.
    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: JSONKey.self)
        try c.encode(user, forKey: JSONKey("user"))
        try c.encode(muted, forKey: JSONKey("muted"))
    }
}

extension ICEServer: Codable {
    /// Decodes strictly: `{"urls": [string], "username"?: string, "credential"?: string}`.
    public init(from decoder: Decoder) throws {
        let o = try StrictObject(decoder, what: "an ICE server")
        try o.only(["urls", "username", "credential"])
        self.init(urls: try o.required("urls", "an array of strings"), username: try o.optional("username", "a string"),
                  credential: try o.optional("credential", "a string"))
    }

    /// Encodes in RTCIceServer's shape.
    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: JSONKey.self)
        try c.encode(urls, forKey: JSONKey("urls"))
        try c.encodeIfPresent(username, forKey: JSONKey("username"))
        try c.encodeIfPresent(credential, forKey: JSONKey("credential"))
    }
}
