/// An error from Veil's core, with a message that says what failed and what to do about it.
public struct VeilError: Error, CustomStringConvertible, Equatable, Sendable {
    private enum Code: Equatable, Sendable { case missingResource, invalidResource, invalidInput, io }
    private let code: Code
    /// Human-readable explanation.
    public let description: String

    /// A file Veil needs (model, topology, photo) is missing.
    public static func missingResource(_ what: String) -> VeilError { VeilError(code: .missingResource, description: "missing \(what)") }
    /// A file Veil needs exists but is not what it should be.
    public static func invalidResource(_ what: String) -> VeilError { VeilError(code: .invalidResource, description: "invalid \(what)") }
    /// Input given by a user or a peer is unusable.
    public static func invalidInput(_ what: String) -> VeilError { VeilError(code: .invalidInput, description: what) }
    /// Reading or writing failed.
    public static func io(_ what: String) -> VeilError { VeilError(code: .io, description: what) }

    public static func == (a: VeilError, b: VeilError) -> Bool { a.code == b.code }
    /// True when both errors are of the same kind, whatever their messages.
    public func isSameKind(as other: VeilError) -> Bool { code == other.code }
}
