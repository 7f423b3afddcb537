#if canImport(Glibc)
import Glibc
#endif

/// An input on which a parser broke one of the promises a harness checks (as opposed to rejecting
/// the input, which is what parsers are for).
public struct InvariantViolation: Error, CustomStringConvertible {
    /// Which harness found it, e.g. `"expression-frame"`.
    public let harness: String
    /// The promise that was broken and the values that broke it.
    public let description: String

    /// A violation found by `harness`.
    public init(_ harness: String, _ description: String) {
        self.harness = harness
        self.description = "\(harness): \(description)"
    }
}

/// The harnesses, each a function from bytes to "fine" or a violation, so that libFuzzer's
/// entry points, the corpus replay and the regression tests run exactly the same checks.
public enum FuzzHarness: String, CaseIterable, Sendable {
    /// `ExpressionFrame(decoding:)`: see `ExpressionFrameInvariants`.
    case expressionFrame = "expression-frame"
    /// `SignalingMessage.decode` of client and server messages: see `SignalingInvariants`.
    case signaling
    /// `TokenAuthority.verify` and `issue`: see `TokenInvariants`.
    case token
    /// `WebSocketFrameReader` on a client's bytes: see `WebSocketInvariants`.
    case webSocket = "websocket"

    /// Runs the harness's checks on one input.
    /// - Throws: `InvariantViolation` when a parser broke a promise; rejecting the input is fine.
    public func check(_ input: [UInt8]) throws(InvariantViolation) {
        switch self {
        case .expressionFrame: try ExpressionFrameInvariants.check(input)
        case .signaling: try SignalingInvariants.check(input)
        case .token: try TokenInvariants.check(input)
        case .webSocket: try WebSocketInvariants.check(input)
        }
    }

    /// The body of `LLVMFuzzerTestOneInput`: checks the input and, on a violation, prints it and
    /// aborts, which libFuzzer reports as a crash and saves the input as `crash-<sha1>`.
    public func runFuzzerInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
        let input = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
        do {
            try check(input)
        } catch {
            fputs("INVARIANT VIOLATION \(error.description)\n", stderr)
            abort()
        }
        return 0
    }
}

/// Shows bytes as hex, shortened past `limit` bytes, for violation messages.
func hex(_ bytes: some Collection<UInt8>, limit: Int = 160) -> String {
    let shown = bytes.prefix(limit).map { byte in
        let digits = String(byte, radix: 16, uppercase: true)
        return digits.count == 1 ? "0" + digits : digits
    }.joined(separator: " ")
    return bytes.count > limit ? shown + " … (\(bytes.count) bytes)" : shown
}

/// Shows text for violation messages, quoted with Swift's escapes (so NULs and control characters
/// stay visible), shortened past `limit` characters.
func quoted(_ text: String, limit: Int = 200) -> String {
    text.count > limit ? "\(String(reflecting: String(text.prefix(limit))))… (\(text.utf8.count) bytes)" : String(reflecting: text)
}
