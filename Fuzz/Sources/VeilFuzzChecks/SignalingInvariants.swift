import VeilCore

/// What `SignalingMessage.decode` promises (docs/protocol.md), checked on arbitrary bytes decoded
/// both as a `ClientMessage` (what the server reads) and as a `ServerMessage` (what clients read):
/// - a rejection is a `SignalingError` with one of the decoder's codes (`bad_message`,
///   `unsupported_version`, `unknown_type`, `message_too_large`) and a message, and the same input
///   is rejected the same way again;
/// - an accepted message came from at most `SignalingMessage.sizeLimit(of:)` bytes, keeps the protocol's
///   limits (valid names, SDP ≤ 60 000 bytes, candidate ≤ 2048 bytes, `mline` 0…1023), and
///   survives a round trip: its encoding decodes to the same message and encodes to the same text;
/// - whatever a client may send for relay (`offer`, `answer`, `ice`), the server's relayed form —
///   with `from` set to a sender of the longest allowed name — is a message every client decodes
///   back to the same content. (The server relays what it accepted; a peer must be able to read it.)
public enum SignalingInvariants {
    static let harness = FuzzHarness.signaling.rawValue
    static let decoderCodes: Set<SignalingErrorCode> = [.badMessage, .unsupportedVersion, .unknownType, .messageTooLarge]
    /// The longest user name the server admits, as the sender of relayed messages.
    static let longestName = String(repeating: "~", count: SignalingMessage.maxNameLength)

    /// Checks one input (see the type's documentation).
    public static func check(_ input: [UInt8]) throws(InvariantViolation) {
        func fail(_ what: String) -> InvariantViolation {
            InvariantViolation(harness, "\(what); input \(quoted(String(decoding: input, as: UTF8.self)))")
        }
        if let client: ClientMessage = try decoded(input, fail) {
            try checkRoundTrip(client, fail)
            try checkLimits(client, fail)
            if let relayed = relayed(client) {
                do {
                    let received = try SignalingMessage.decode(ServerMessage.self, from: SignalingMessage.encode(relayed))
                    guard received == relayed else { throw fail("the relayed \(relayed.type) arrives as \(received)") }
                } catch let error as SignalingError {
                    throw fail("the server would relay this \(client.type), but a client cannot read the relayed message: \(error)")
                } catch let violation as InvariantViolation {
                    throw violation
                } catch {
                    throw fail("unexpected \(error)")
                }
            }
        }
        if let server: ServerMessage = try decoded(input, fail) {
            try checkRoundTrip(server, fail)
            try checkLimits(server, fail)
        }
    }

    /// The message `input` decodes to, nil when it is (consistently, properly) rejected.
    private static func decoded<Message: Codable & Equatable>(_ input: [UInt8], _ fail: (String) -> InvariantViolation) throws(InvariantViolation) -> Message? {
        let first: SignalingError
        switch Result(catching: { () throws(SignalingError) in try SignalingMessage.decode(Message.self, from: input) }) {
        case let .success(message):
            let limit = SignalingMessage.sizeLimit(of: Message.self)
            guard input.count <= limit else {
                throw fail("accepted a \(input.count)-byte \(Message.self) over the \(limit)-byte limit")
            }
            return message
        case let .failure(error):
            first = error
        }
        guard decoderCodes.contains(first.code), !first.message.isEmpty else {
            throw fail("\(Message.self) rejected with code \(first.code) and message \(quoted(first.message))")
        }
        switch Result(catching: { () throws(SignalingError) in try SignalingMessage.decode(Message.self, from: input) }) {
        case .success:
            throw fail("\(Message.self) rejected once (\(first)), then accepted")
        case let .failure(again):
            guard again == first else { throw fail("\(Message.self) rejected as \(first), then as \(again)") }
        }
        return nil
    }

    private static func checkRoundTrip<Message: Codable & Equatable>(_ message: Message, _ fail: (String) -> InvariantViolation) throws(InvariantViolation) {
        let text = SignalingMessage.encode(message)
        let again: Message
        do { again = try SignalingMessage.decode(Message.self, from: text) } catch {
            throw fail("decoded \(message), whose encoding \(quoted(text)) is rejected: \(error)")
        }
        guard again == message else { throw fail("decoded \(message), whose encoding decodes to \(again)") }
        let textAgain = SignalingMessage.encode(again)
        guard textAgain == text else { throw fail("encoding is not stable: \(quoted(text)), then \(quoted(textAgain))") }
    }

    private static func checkLimits(_ message: ClientMessage, _ fail: (String) -> InvariantViolation) throws(InvariantViolation) {
        switch message {
        case let .join(room, user, _):
            try checkNames([room, user], fail)
        case let .offer(to, sdp), let .answer(to, sdp):
            try checkNames([to], fail)
            try checkLength(sdp, SignalingMessage.maxSDPLength, "sdp", fail)
        case let .ice(to, mline, candidate):
            try checkNames([to], fail)
            try checkIce(mline, candidate, fail)
        case .mute, .leave, .ping:
            break
        }
    }

    private static func checkLimits(_ message: ServerMessage, _ fail: (String) -> InvariantViolation) throws(InvariantViolation) {
        switch message {
        case let .joined(joined):
            try checkNames([joined.you, joined.room] + joined.participants.map(\.user), fail)
        case let .participantJoined(user, _), let .participantLeft(user, _), let .muteChanged(user, _):
            try checkNames([user], fail)
        case let .offer(from, sdp), let .answer(from, sdp):
            try checkNames([from], fail)
            try checkLength(sdp, SignalingMessage.maxSDPLength, "sdp", fail)
        case let .ice(from, mline, candidate):
            try checkNames([from], fail)
            try checkIce(mline, candidate, fail)
        case .error, .pong:
            break
        }
    }

    private static func checkNames(_ names: [String], _ fail: (String) -> InvariantViolation) throws(InvariantViolation) {
        for name in names where !SignalingMessage.isValidName(name) { throw fail("accepted the invalid name \(quoted(name))") }
    }

    private static func checkLength(_ text: String, _ limit: Int, _ field: String, _ fail: (String) -> InvariantViolation) throws(InvariantViolation) {
        guard text.utf8.count <= limit else { throw fail("accepted a \(text.utf8.count)-byte \(field) over its \(limit)-byte limit") }
    }

    private static func checkIce(_ mline: Int, _ candidate: String, _ fail: (String) -> InvariantViolation) throws(InvariantViolation) {
        guard (0...SignalingMessage.maxMLineIndex).contains(mline) else { throw fail("accepted mline \(mline)") }
        try checkLength(candidate, SignalingMessage.maxCandidateLength, "candidate", fail)
    }

    /// What the room server sends the addressee of a relayed client message.
    private static func relayed(_ message: ClientMessage) -> ServerMessage? {
        switch message {
        case let .offer(_, sdp): .offer(from: longestName, sdp: sdp)
        case let .answer(_, sdp): .answer(from: longestName, sdp: sdp)
        case let .ice(_, mline, candidate): .ice(from: longestName, mline: mline, candidate: candidate)
        case .join, .mute, .leave, .ping: nil
        }
    }
}
