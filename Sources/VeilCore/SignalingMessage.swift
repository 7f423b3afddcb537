import Foundation

// Veil's signaling protocol, version 1: JSON text messages over a WebSocket between a client and
// the room server (docs/protocol.md). Every message is an object with "v": 1 and a "type".

/// Constants and limits of the signaling protocol, and its JSON codec (`encode` / `decode`).
public enum SignalingMessage {
    /// The protocol version every message carries as `"v"`.
    public static let version = 1
    /// Largest message (UTF-8 bytes of the JSON text) a server accepts from a client. Clients
    /// accept twice that from the server (`maxServerMessageSize`): a relayed SDP is re-encoded with `from`.
    public static let maxSize = 64 * 1024
    /// Largest message a client accepts from the server. A relayed offer, answer or candidate can
    /// be longer than the client message of up to `maxSize` it came from: `from` names a sender of
    /// up to 64 characters where `to` may have named a one-character peer.
    public static let maxServerMessageSize = 2 * maxSize
    /// Longest room or user name, in characters (all ASCII, see `isValidName`).
    public static let maxNameLength = 64
    /// Longest token the server reads.
    public static let maxTokenLength = 1024
    /// Longest session description in an offer or answer, in UTF-8 bytes.
    public static let maxSDPLength = 60_000
    /// Longest ICE candidate line, in UTF-8 bytes.
    public static let maxCandidateLength = 2048
    /// Largest accepted media-line index of an ICE candidate.
    public static let maxMLineIndex = 1023
    /// Deepest nesting of JSON objects and arrays accepted (the deepest v1 message nests 4).
    public static let maxNestingDepth = 8
    /// How often a client sends `ping`, in seconds.
    public static let pingInterval: TimeInterval = 1

    /// Whether `name` can name a room or a user: 1…64 characters from `A–Z a–z 0–9 . _ - @ + ~`.
    /// Names are identifiers (shown in logs and to peers), not display names.
    public static func isValidName(_ name: String) -> Bool {
        let utf8 = name.utf8
        guard (1...maxNameLength).contains(utf8.count) else { return false }
        return utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"), UInt8(ascii: "@"), UInt8(ascii: "+"), UInt8(ascii: "~"):
                return true
            default:
                return false
            }
        }
    }
}

/// A message a client sends to the room server.
public enum ClientMessage: Equatable, Sendable {
    /// Enter `room` as `user`, proving the right to with a `token` the server issued
    /// (nil or empty: the server answers `token_missing`).
    case join(room: String, user: String, token: String?)
    /// A session description offer for participant `to` (the newcomer offers to everyone present).
    case offer(to: String, sdp: String)
    /// The answer to an offer from participant `to`.
    case answer(to: String, sdp: String)
    /// A trickled ICE candidate for participant `to`; an empty `candidate` ends the candidates.
    case ice(to: String, mline: Int, candidate: String)
    /// The sender's microphone is (un)muted; the others are told.
    case mute(muted: Bool)
    /// Leave the room; the connection stays open and may join again.
    case leave
    /// Keep-alive, sent every second; `t` (any integer, e.g. the client's clock in ms) is echoed in the `pong`.
    case ping(t: Int64?)

    /// The value of the message's `"type"`.
    public var type: String {
        switch self {
        case .join: "join"
        case .offer: "offer"
        case .answer: "answer"
        case .ice: "ice"
        case .mute: "mute"
        case .leave: "leave"
        case .ping: "ping"
        }
    }
}

/// A message the room server sends to a client.
public enum ServerMessage: Equatable, Sendable {
    /// The join succeeded: who the client is and who else is in the room.
    case joined(Joined)
    /// Someone entered the room (they will send this client an offer).
    case participantJoined(user: String, muted: Bool)
    /// Someone left the room, and why.
    case participantLeft(user: String, reason: LeaveReason)
    /// An offer relayed from participant `from`.
    case offer(from: String, sdp: String)
    /// An answer relayed from participant `from`.
    case answer(from: String, sdp: String)
    /// An ICE candidate relayed from participant `from`.
    case ice(from: String, mline: Int, candidate: String)
    /// Participant `user` (un)muted their microphone.
    case muteChanged(user: String, muted: Bool)
    /// A request failed. Codes that refuse a join or break the protocol are followed by a close.
    case error(code: SignalingErrorCode, message: String)
    /// The answer to `ping`, echoing its `t`.
    case pong(t: Int64?)

    /// The contents of a `joined` message.
    public struct Joined: Equatable, Sendable {
        /// The user name the client joined as.
        public var you: String
        /// The room joined.
        public var room: String
        /// The client's own mute state (kept across a resumed session).
        public var muted: Bool
        /// True when this join took over an existing session of the same user (a reconnection):
        /// the others were not told anything.
        public var resumed: Bool
        /// Everyone else in the room, in the order they joined. The client sends each an offer.
        public var participants: [ParticipantInfo]
        /// STUN/TURN servers to use, if the server was configured with some.
        public var iceServers: [ICEServer]

        /// A `joined` message's contents.
        public init(you: String, room: String, muted: Bool = false, resumed: Bool = false,
                    participants: [ParticipantInfo], iceServers: [ICEServer] = []) {
            self.you = you; self.room = room; self.muted = muted; self.resumed = resumed
            self.participants = participants; self.iceServers = iceServers
        }
    }

    /// The value of the message's `"type"`.
    public var type: String {
        switch self {
        case .joined: "joined"
        case .participantJoined: "participantJoined"
        case .participantLeft: "participantLeft"
        case .offer: "offer"
        case .answer: "answer"
        case .ice: "ice"
        case .muteChanged: "muteChanged"
        case .error: "error"
        case .pong: "pong"
        }
    }
}

/// A participant as listed in `joined`.
public struct ParticipantInfo: Equatable, Sendable {
    /// Their user name.
    public var user: String
    /// Whether their microphone is muted.
    public var muted: Bool
    /// A participant entry.
    public init(user: String, muted: Bool = false) { self.user = user; self.muted = muted }
}

/// A STUN or TURN server for the clients' ICE agents (the shape of WebRTC's RTCIceServer).
public struct ICEServer: Equatable, Sendable {
    /// `stun:host:port` or `turn:host:port?transport=udp` URLs.
    public var urls: [String]
    /// TURN user name, if any.
    public var username: String?
    /// TURN credential, if any.
    public var credential: String?
    /// A server entry.
    public init(urls: [String], username: String? = nil, credential: String? = nil) {
        self.urls = urls; self.username = username; self.credential = credential
    }
}

/// Why a participant left a room.
public enum LeaveReason: String, Equatable, Sendable, CaseIterable {
    /// They sent `leave`.
    case left
    /// Their connection dropped (or fell silent) and they did not come back within the grace period.
    case timeout
    /// The server removed them (a protocol violation).
    case kicked
}

/// A machine-readable error code of the signaling protocol (`error.code`). Open-ended: a client
/// can read codes a newer server adds.
public struct SignalingErrorCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The code as sent, e.g. `room_full`.
    public let rawValue: String
    /// A code from its wire name.
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    /// Not JSON, not an object, a missing or mistyped field, an invalid name, an unexpected field, a binary frame.
    public static let badMessage = Self(rawValue: "bad_message")
    /// `"v"` is not 1.
    public static let unsupportedVersion = Self(rawValue: "unsupported_version")
    /// `"type"` is not one this version knows.
    public static let unknownType = Self(rawValue: "unknown_type")
    /// The message is larger than `SignalingMessage.maxSize`.
    public static let messageTooLarge = Self(rawValue: "message_too_large")
    /// The request needs a joined room.
    public static let notJoined = Self(rawValue: "not_joined")
    /// `join` on a connection that is already in a room (send `leave` first).
    public static let alreadyJoined = Self(rawValue: "already_joined")
    /// The relay target is not a participant of the sender's room.
    public static let unknownPeer = Self(rawValue: "unknown_peer")
    /// The room already has its maximum number of participants.
    public static let roomFull = Self(rawValue: "room_full")
    /// `join` without a token.
    public static let tokenMissing = Self(rawValue: "token_missing")
    /// The token is not of the form `v1.<payload>.<signature>`.
    public static let tokenMalformed = Self(rawValue: "token_malformed")
    /// The token's signature does not verify with this server's secret.
    public static let tokenForged = Self(rawValue: "token_forged")
    /// The token's expiry has passed.
    public static let tokenExpired = Self(rawValue: "token_expired")
    /// The token was issued for another room.
    public static let tokenWrongRoom = Self(rawValue: "token_wrong_room")
    /// The token was issued for another user.
    public static let tokenWrongUser = Self(rawValue: "token_wrong_user")
    /// Another connection joined as the same user in the same room and took over this session.
    public static let replaced = Self(rawValue: "replaced")
    /// An offer or answer with a video section: Veil sends voice and expressions only.
    public static let videoNotAllowed = Self(rawValue: "video_not_allowed")
    /// The connection sent nothing (not even `ping`) for too long and is closed.
    public static let pingTimeout = Self(rawValue: "ping_timeout")
    /// The connection did not join a room in time.
    public static let joinTimeout = Self(rawValue: "join_timeout")
    /// The server is shutting down.
    public static let serverShutdown = Self(rawValue: "server_shutdown")
    /// The connection sent more messages, bytes or joins than the server allows per second; it is closed.
    public static let rateLimited = Self(rawValue: "rate_limited")
    /// The server has as many connections as it takes (or as many still waiting to join); try again later.
    public static let serverFull = Self(rawValue: "server_full")
    /// The connection does not read what the server sends it, so the server's queue for it grew
    /// beyond its limit or stopped draining; it is closed.
    public static let slowConsumer = Self(rawValue: "slow_consumer")
    /// The server cannot reach the service that shares rooms between its nodes, so it admits
    /// nobody rather than split a room; try again shortly (another node may take the join).
    public static let serviceUnavailable = Self(rawValue: "service_unavailable")
}

/// A signaling failure with its protocol code: a message that cannot be decoded, or a request the
/// server refuses. `message` says what was wrong.
public struct SignalingError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The protocol code.
    public var code: SignalingErrorCode
    /// Human-readable detail.
    public var message: String
    /// An error with its code and detail.
    public init(_ code: SignalingErrorCode, _ message: String) { self.code = code; self.message = message }
    public var description: String { "\(code): \(message)" }
}

/// WebSocket close codes the room server uses (RFC 6455 §7.4 and the 4000–4999 private range).
public struct WebSocketCloseCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The numeric code.
    public let rawValue: UInt16
    /// A code from its number.
    public init(rawValue: UInt16) { self.rawValue = rawValue }
    public var description: String { String(rawValue) }

    /// 1000: normal closure.
    public static let normal = Self(rawValue: 1000)
    /// 1001: the server is shutting down.
    public static let goingAway = Self(rawValue: 1001)
    /// 1002: an undecodable message (`bad_message`, `unknown_type`, `unsupported_version`).
    public static let protocolError = Self(rawValue: 1002)
    /// 1003: a binary frame.
    public static let unsupportedData = Self(rawValue: 1003)
    /// 1008: a join refused for its token; a connection over its rate limits or not reading.
    public static let policyViolation = Self(rawValue: 1008)
    /// 1009: a message over `SignalingMessage.maxSize`.
    public static let tooBig = Self(rawValue: 1009)

    /// 4000: the session was taken over by a newer connection of the same user (do not reconnect automatically).
    public static let replaced = Self(rawValue: 4000)
    /// 4001: the connection fell silent (no ping) or did not join in time.
    public static let timeout = Self(rawValue: 4001)
    /// 4002: the room is full.
    public static let roomFull = Self(rawValue: 4002)
    /// 4003: the server is full (`server_full`): try again later. (Not RFC 6455's 1013, which
    /// libsoup 3.2 refuses as a close code.)
    public static let serverFull = Self(rawValue: 4003)
    /// 4004: the server cannot admit anyone now (`service_unavailable`): reconnect, maybe to another node.
    public static let serviceUnavailable = Self(rawValue: 4004)
}
