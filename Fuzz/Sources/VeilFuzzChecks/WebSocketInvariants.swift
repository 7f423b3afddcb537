import VeilCore

/// What `WebSocketFrameReader` promises the room server (docs/reliability.md, "A determined
/// stranger"), checked on arbitrary bytes. The first byte sets the message limit (1–2048 bytes) and
/// the size of the pieces the rest arrives in (1–64 bytes, or all at once):
/// - reading the bytes in pieces gives exactly the events and the violation reading them at once
///   does (a client cannot change what the server sees by how it splits its writes);
/// - no text or binary message is larger than the limit, text is UTF-8, a ping's payload is at most
///   125 bytes; a message-size violation has close code 1009, the others 1002 or 1007;
/// - between reads the reader never holds more than the limit, plus one control frame (at most 125
///   bytes of payload, which may come between a message's fragments) and its header (14 bytes): a
///   client cannot make the server keep bytes it will refuse;
/// - after a violation every further read fails the same way.
public enum WebSocketInvariants {
    static let harness = FuzzHarness.webSocket.rawValue

    /// Checks one input (see the type's documentation).
    public static func check(_ input: [UInt8]) throws(InvariantViolation) {
        guard let control = input.first else { return }
        let limit = 1 + Int(control & 0x7F) * 16
        let piece = control & 0x80 == 0 ? Int(control & 0x3F) + 1 : Int.max
        let bytes = Array(input.dropFirst())
        func fail(_ what: String) -> InvariantViolation {
            InvariantViolation(harness, "\(what); limit \(limit), pieces of \(piece == .max ? "all" : String(piece)); input \(hex(bytes))")
        }

        let whole = try read(bytes, limit: limit, piece: .max, fail)
        let pieces = try read(bytes, limit: limit, piece: piece, fail)
        guard whole.events == pieces.events, whole.violation == pieces.violation else {
            throw fail("read at once: \(whole.events.count) events, \(String(describing: whole.violation)); in pieces: \(pieces.events.count) events, \(String(describing: pieces.violation))")
        }
        for event in whole.events {
            switch event {
            case .text(let message):
                guard message.count <= limit else { throw fail("a text message of \(message.count) bytes passed") }
                guard String(validating: message, as: UTF8.self) != nil else { throw fail("a text message that is not UTF-8 passed") }
            case .binary(let message):
                guard message.count <= limit else { throw fail("a binary message of \(message.count) bytes passed") }
            case .ping(let payload):
                guard payload.count <= 125 else { throw fail("a ping of \(payload.count) bytes passed") }
            case .pong, .close:
                break
            }
        }
        if let violation = whole.violation, ![1002, 1007, 1009].contains(violation.closeCode) || violation.reason.isEmpty {
            throw fail("a violation with close code \(violation.closeCode) and reason \(quoted(violation.reason))")
        }
    }

    private static func read(_ bytes: [UInt8], limit: Int, piece: Int,
                             _ fail: (String) -> InvariantViolation) throws(InvariantViolation) -> (events: [WebSocketFrameReader.Event], violation: WebSocketFrameReader.Violation?) {
        var reader = WebSocketFrameReader(messageLimit: limit)
        var events: [WebSocketFrameReader.Event] = []
        var start = 0
        while start < bytes.count {
            let end = piece == .max ? bytes.count : min(bytes.count, start + piece)
            reader.append(bytes[start..<end])
            start = end
            do {
                while let event = try reader.next() { events.append(event) }
            } catch {
                do {
                    _ = try reader.next()
                    throw fail("a violation (\(error)) was followed by a successful read")
                } catch let again as WebSocketFrameReader.Violation {
                    guard again == error else { throw fail("a violation (\(error)) was followed by another (\(again))") }
                } catch let violation as InvariantViolation {
                    throw violation
                } catch {
                    throw fail("unexpected \(error)")
                }
                return (events, error)
            }
            guard reader.bufferedBytes <= limit + 125 + 14 else {
                throw fail("the reader holds \(reader.bufferedBytes) bytes between reads")
            }
        }
        return (events, nil)
    }
}
