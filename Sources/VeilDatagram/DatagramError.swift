/// Why a UDP socket could not be opened, resolved, bound or used. Errors of the same kind compare
/// equal whatever their detail, so callers can count them by kind.
public struct DatagramError: Error, Equatable, Hashable, CustomStringConvertible, Sendable {
    private enum Code: String, Hashable, Sendable {
        case resolution, wouldBlock, refused, unreachable, addressInUse, notPermitted, tooLarge, system
    }
    private let code: Code
    /// What failed, with the system's own words for it.
    public let detail: String

    private init(_ code: Code, _ detail: String = "") { self.code = code; self.detail = detail }

    /// The host name did not resolve (no such host, or no DNS answer).
    public static let resolution = DatagramError(.resolution)
    /// The socket's send buffer is full (or, receiving, nothing has arrived): nothing was done.
    public static let wouldBlock = DatagramError(.wouldBlock)
    /// The destination answered an earlier datagram with "port unreachable": nothing listens there.
    public static let refused = DatagramError(.refused)
    /// No route to the address, or its family (IPv4, IPv6) is not available on this machine.
    public static let unreachable = DatagramError(.unreachable)
    /// Another socket has the local address and port.
    public static let addressInUse = DatagramError(.addressInUse)
    /// The system does not allow it (a privileged port, a firewall rule).
    public static let notPermitted = DatagramError(.notPermitted)
    /// The datagram is larger than the socket can send.
    public static let tooLarge = DatagramError(.tooLarge)
    /// Any other failure of a system call.
    public static let system = DatagramError(.system)

    /// The same kind, saying what and where.
    func detailed(_ detail: String) -> DatagramError { DatagramError(code, detail) }

    /// A short stable name of the kind (`"refused"`, `"wouldBlock"`…), for counters and logs.
    public var kind: String { code.rawValue }

    /// The detail, or the kind where there is none.
    public var description: String { detail.isEmpty ? kind : detail }

    public static func == (a: DatagramError, b: DatagramError) -> Bool { a.code == b.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}
