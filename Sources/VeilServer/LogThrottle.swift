import Foundation
import VeilCore

/// Keeps the log lines strangers can cause from flooding the log: refused joins and closed
/// connections that were never in a room (anyone can open connections and send forged tokens,
/// hundreds a second). Lines about participants (joins, leaves, kicks, drops) need a valid token
/// and always pass.
///
/// Each throttled kind has a token bucket (`limit`). Lines beyond it are not written but counted
/// by error code; a summary line says how many were held back and why, once per `summaryInterval`
/// while it goes on, so the log still tells what happened. Pure: the server feeds it the time.
struct LogThrottle: Sendable {
    /// What the server writes instead of the held-back lines.
    struct Summary: Equatable, Sendable {
        /// `refuse` or `close`.
        var kind: String
        /// Lines held back.
        var lines: Int
        /// Held-back lines per error code.
        var codes: [String: Int]
        /// Over how many seconds.
        var seconds: TimeInterval
    }

    private struct Held {
        var bucket: RoomDirectory.TokenBucket
        var lines = 0
        var codes: [String: Int] = [:]
        var since: TimeInterval?
    }

    /// Lines of one kind: 5 a second, a burst of 50.
    static let limit = RoomDirectory.RateLimit(perSecond: 5, burst: 50)
    /// How often a summary of held-back lines is written while lines are held back.
    static let summaryInterval: TimeInterval = 5

    private var held: [String: Held] = [:]

    /// Whether to write the line for `activity` now (false: it was counted for a summary).
    mutating func admit(_ activity: RoomActivity, now: TimeInterval) -> Bool {
        let kind: String, code: SignalingErrorCode
        switch activity {
        case let .refused(_, _, refusal): (kind, code) = ("refuse", refusal)
        case let .closed(_, closing): (kind, code) = ("close", closing)
        default: return true
        }
        var entry = held[kind] ?? Held(bucket: .init(Self.limit, now: now))
        defer { held[kind] = entry }
        if entry.bucket.take(1, now: now) { return true }
        entry.lines += 1
        entry.codes[code.rawValue, default: 0] += 1
        if entry.since == nil { entry.since = now }
        return false
    }

    /// Summaries of lines held back for at least `summaryInterval` (or, with `flush`, any at all),
    /// in kind order; their counts start again.
    mutating func summaries(now: TimeInterval, flush: Bool = false) -> [Summary] {
        var out: [Summary] = []
        for kind in held.keys.sorted() {
            guard var entry = held[kind], entry.lines > 0, let since = entry.since,
                  flush || now - since >= Self.summaryInterval else { continue }
            out.append(Summary(kind: kind, lines: entry.lines, codes: entry.codes, seconds: now - since))
            entry.lines = 0
            entry.codes = [:]
            entry.since = nil
            held[kind] = entry
        }
        return out
    }
}
