import Foundation
import VeilCore

/// Something the room server did, with when: one log line each (`description`). Never carries a token.
public struct RoomServerEvent: Equatable, Sendable, CustomStringConvertible {
    /// When it happened.
    public let date: Date
    /// What happened.
    public let kind: Kind

    /// The kinds of events.
    public enum Kind: Equatable, Sendable {
        /// The server listens; clients connect to this WebSocket URL.
        case listening(URL)
        /// Room activity: joins, leaves, drops, refusals.
        case activity(RoomActivity)
        /// Accepting a connection failed (out of file descriptors, say); the server pauses accepting
        /// for a moment and tries again. The reason is the system's.
        case acceptFailed(String)
        /// Log lines strangers can cause (refused joins, closed connections that never joined) came
        /// faster than the log takes them (`LogThrottle`): `lines` of `kind` (`refuse`, `close`)
        /// were held back over `seconds`, with these counts per error code.
        case heldBack(kind: String, lines: Int, codes: [String: Int], seconds: TimeInterval)
        /// The broker that shares rooms between nodes reports something (Redis lost or back, a node
        /// taken for dead).
        case broker(String)
        /// The server stopped; the stream ends after this.
        case stopped
    }

    /// An event.
    public init(date: Date, kind: Kind) { self.date = date; self.kind = kind }

    /// The log line in the text format: an ISO 8601 UTC timestamp and `key=value` words, e.g.
    /// `2025-01-01T12:00:00.000Z join room=r user=u participants=2`.
    public var description: String { line(.text) }

    /// The log line in `format` (`LogFormat`).
    public func line(_ format: LogFormat) -> String { logLine.formatted(format, at: date) }

    /// The event and its fields.
    var logLine: LogLine {
        switch kind {
        case .listening(let url): LogLine("listen", [("url", .word(url.absoluteString))])
        case .activity(let activity): activity.logLine
        case .acceptFailed(let reason): LogLine("accept-failed", [("retry", .seconds(0.25, digits: 2, unit: "s")), ("error", .text(reason))])
        case let .heldBack(kind, lines, codes, seconds):
            LogLine("held-back", [("kind", .word(kind)), ("lines", .count(lines)), ("seconds", .seconds(seconds, digits: 1, unit: "")),
                                  ("codes", .counts(codes))])
        case .broker(let note): LogLine("broker", [("note", .text(note))])
        case .stopped: LogLine("stop")
        }
    }
}
