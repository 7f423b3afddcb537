import Foundation

/// How `veil serve` writes its log: `text` (an ISO 8601 timestamp, the event and `key=value`
/// words, for people) or `json` (one JSON object per line, for log collectors).
public enum LogFormat: String, CaseIterable, Sendable {
    /// `2025-01-01T12:00:00.000Z join room=r user=u participants=2`
    case text
    /// `{"event":"join","participants":2,"resumed":false,"room":"r","time":"2025-01-01T12:00:00.000Z","user":"u"}`
    case json
}

extension LogFormat {
    /// A note about the server itself (`veil serve`'s start-up lines) as a JSON line:
    /// `{"event":"note","message":"…","time":"…"}`. (In the text format the notes are written as they are.)
    public func note(_ message: String, at date: Date = Date()) -> String {
        LogLine("note", [("message", .text(message))]).formatted(self, at: date)
    }
}

/// One log line before it is written: an event name and its fields, in the order the text
/// format shows them. Both formats are written from it, so they never say different things.
///
/// What a field may hold is fixed here: room and user names, counts, durations, error codes and
/// the server's own notes. Never a token, a secret or a participant's address.
struct LogLine: Sendable {
    /// A field's value and how the text format shows it.
    enum Value: Sendable {
        /// A name or code, bare in text: `room=standup`.
        case word(String)
        /// Free text, quoted in text: `error="Too many open files"`.
        case text(String)
        /// A count.
        case count(Int)
        /// A number of seconds; text shows `digits` decimals and `unit` after them (`grace=3.0s`).
        case seconds(Double, digits: Int, unit: String)
        /// Text shows the key alone when true and nothing when false (`resumed`).
        case flag(Bool)
        /// Counts by name: `codes=token_forged:9,token_expired:3` (most first) in text, an object in JSON.
        case counts([String: Int])
    }

    /// The event: `join`, `leave`, `refuse`, …
    var event: String
    /// Its fields.
    var fields: [(key: String, value: Value)]

    init(_ event: String, _ fields: [(key: String, value: Value)] = []) {
        self.event = event
        self.fields = fields
    }

    /// `event key=value …` (no timestamp).
    var text: String {
        var words = [event]
        for (key, value) in fields {
            switch value {
            case .word(let word): words.append("\(key)=\(word)")
            case .text(let text): words.append("\(key)=\"\(text)\"")
            case .count(let count): words.append("\(key)=\(count)")
            case let .seconds(seconds, digits, unit): words.append("\(key)=\(String(format: "%.\(digits)f", seconds))\(unit)")
            case .flag(let on): if on { words.append(key) }
            case .counts(let counts):
                let sorted = counts.sorted { ($1.value, $0.key) < ($0.value, $1.key) }
                words.append("\(key)=" + sorted.map { "\($0.key):\($0.value)" }.joined(separator: ","))
            }
        }
        return words.joined(separator: " ")
    }

    /// The line in `format`, stamped with `date`.
    func formatted(_ format: LogFormat, at date: Date) -> String {
        let stamp = Date.ISO8601FormatStyle(includingFractionalSeconds: true).format(date)
        switch format {
        case .text:
            return "\(stamp) \(text)"
        case .json:
            var object: [String: Any] = ["time": stamp, "event": event]
            for (key, value) in fields {
                switch value {
                case .word(let text), .text(let text): object[key] = text
                case .count(let count): object[key] = count
                case .seconds(let seconds, _, _): object[key] = seconds
                case .flag(let on): object[key] = on
                case .counts(let counts): object[key] = counts
                }
            }
            // Strings, integers, finite numbers, booleans and objects of them: always serialisable.
            let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
            return String(decoding: data, as: UTF8.self)
        }
    }
}

extension RoomActivity {
    /// The log line's event and fields.
    var logLine: LogLine {
        switch self {
        case let .joined(room, user, count, resumed):
            LogLine("join", [("room", .word(room)), ("user", .word(user)), ("participants", .count(count)), ("resumed", .flag(resumed))])
        case let .left(room, user, reason):
            LogLine("leave", [("room", .word(room)), ("user", .word(user)), ("reason", .word(reason.rawValue))])
        case let .kicked(room, user, code):
            LogLine("leave", [("room", .word(room)), ("user", .word(user)), ("reason", .word("kicked")), ("code", .word(code.rawValue))])
        case let .dropped(room, user, grace):
            LogLine("drop", [("room", .word(room)), ("user", .word(user)), ("grace", .seconds(grace, digits: 1, unit: "s"))])
        case let .refused(room, user, code):
            LogLine("refuse", [("room", .word(room)), ("user", .word(user)), ("code", .word(code.rawValue))])
        case let .closed(connection, code):
            LogLine("close", [("connection", .count(Int(clamping: connection.rawValue))), ("code", .word(code.rawValue))])
        }
    }
}
