/// An IPv4 or IPv6 address and UDP port, as the system resolved it.
public struct DatagramAddress: Hashable, Sendable, CustomStringConvertible {
    /// The address as the bytes of a `sockaddr_in` or `sockaddr_in6` (read only by `System`).
    let socketAddress: [UInt8]

    init(socketAddress: [UInt8]) { self.socketAddress = socketAddress }

    /// The addresses of `host` at `port`, most preferred first (getaddrinfo's order, RFC 6724).
    /// `host` is a name (`localhost`, `studio.local`), an IPv4 address or an IPv6 address with or
    /// without brackets. Throws `DatagramError.resolution` when it does not resolve.
    public static func resolve(host: String, port: UInt16) throws -> [DatagramAddress] {
        try System.resolve(host: Self.unbracketed(host), port: port, passive: false).map { DatagramAddress(socketAddress: $0) }
    }

    /// The numeric host: `127.0.0.1`, `::1`.
    public var host: String { System.numericHostAndPort(of: socketAddress).host }
    /// The UDP port.
    public var port: UInt16 { System.numericHostAndPort(of: socketAddress).port }
    /// True for an IPv6 address (IPv4-mapped ones included).
    public var isIPv6: Bool { System.isIPv6(socketAddress) }

    /// This address's host alone, at port 0: an IPv4-mapped IPv6 address (`::ffff:192.168.1.20`,
    /// as a socket bound to every local address sees an IPv4 sender) as the IPv4 address. Two
    /// datagrams from one machine have the same `hostAddress` whatever ports they come from, so a
    /// receiver can accept one sender by it.
    public var hostAddress: DatagramAddress { DatagramAddress(socketAddress: System.hostOnly(socketAddress)) }

    /// `127.0.0.1:39539`, `[::1]:11111`.
    public var description: String {
        let (host, port) = System.numericHostAndPort(of: socketAddress)
        return isIPv6 ? "[\(host)]:\(port)" : "\(host):\(port)"
    }

    /// `[::1]` as `::1`; anything else as it is.
    static func unbracketed(_ host: String) -> String {
        host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
    }
}
