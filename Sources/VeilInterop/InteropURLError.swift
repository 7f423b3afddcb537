/// Why a `vmc://` or `livelink://` URL was refused. Errors of the same kind compare equal whatever
/// their detail; the detail says what was wrong and what a right URL looks like.
public struct InteropURLError: Error, Equatable, Hashable, CustomStringConvertible, Sendable {
    private enum Code: String, Hashable, Sendable { case malformed, unsupportedScheme, missingHost, invalidPort }
    private let code: Code
    /// What exactly was wrong, and what to give instead.
    public let detail: String

    private init(_ code: Code, _ detail: String = "") { self.code = code; self.detail = detail }

    /// Not `scheme://authority`, or with a path, query, fragment or user.
    public static let malformed = InteropURLError(.malformed)
    /// A scheme other than `vmc` and `livelink`.
    public static let unsupportedScheme = InteropURLError(.unsupportedScheme)
    /// No host where one is needed.
    public static let missingHost = InteropURLError(.missingHost)
    /// A port that is not a number from 1 to 65535.
    public static let invalidPort = InteropURLError(.invalidPort)

    func detailed(_ detail: String) -> InteropURLError { InteropURLError(code, detail) }

    /// A short stable name of the kind.
    public var kind: String { code.rawValue }

    /// The detail, or the kind where there is none.
    public var description: String { detail.isEmpty ? kind : detail }

    public static func == (a: InteropURLError, b: InteropURLError) -> Bool { a.code == b.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}
