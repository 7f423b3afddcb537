/// Why a VMC, OSC or Live Link Face packet was refused. Errors of the same kind compare equal
/// whatever their detail, so a receiver can count and log them by kind (`kind`), one line per kind.
public struct InteropError: Error, Equatable, Hashable, CustomStringConvertible, Sendable {
    private enum Code: String, Hashable, Sendable {
        case truncated, oversized, malformed, unsupportedType, nestingTooDeep, unknownVersion, wrongCount
    }
    private let code: Code
    /// What exactly was wrong, with the byte offset where it is known.
    public let detail: String

    private init(_ code: Code, _ detail: String = "") { self.code = code; self.detail = detail }

    /// The packet ends before a field it announces (a string's NUL, a size, a float).
    public static let truncated = InteropError(.truncated)
    /// The packet, a string or a name is larger than the stated maximum.
    public static let oversized = InteropError(.oversized)
    /// A field holds what the format does not allow (a negative size, a missing `/` or `,`, bad UTF-8, trailing bytes).
    public static let malformed = InteropError(.malformed)
    /// An OSC type tag other than `i`, `f`, `s`, `b`: the message is refused, not guessed at.
    public static let unsupportedType = InteropError(.unsupportedType)
    /// OSC bundles nested deeper than the stated maximum.
    public static let nestingTooDeep = InteropError(.nestingTooDeep)
    /// A Live Link Face packet version Veil does not read.
    public static let unknownVersion = InteropError(.unknownVersion)
    /// A Live Link Face packet whose value count is not 61.
    public static let wrongCount = InteropError(.wrongCount)

    /// The same kind of error, saying what and where.
    func detailed(_ detail: String) -> InteropError { InteropError(code, detail) }

    /// A short stable name of the kind (`"truncated"`, `"unknownVersion"`…), for counters and logs.
    public var kind: String { code.rawValue }

    public var description: String { detail.isEmpty ? kind : "\(kind): \(detail)" }

    public static func == (a: InteropError, b: InteropError) -> Bool { a.code == b.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}
