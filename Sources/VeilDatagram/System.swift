#if canImport(Glibc)
import Glibc
#endif

/// Every system call VeilDatagram makes, and the one place that turns their failures into
/// `DatagramError`s (`call`). Nothing else in the target touches Glibc: addresses leave this file
/// as the bytes of a `sockaddr`, descriptors as plain integers.
enum System {
    /// Runs `body`, a system call that returns -1 and sets errno on failure, again while it is
    /// interrupted by a signal; any other failure becomes the `DatagramError` of its errno, saying
    /// `what` was being done.
    @discardableResult
    static func call<T: FixedWidthInteger & SignedInteger>(_ what: @autoclosure () -> String, _ body: () -> T) throws -> T {
        while true {
            let result = body()
            guard result == -1 else { return result }
            let code = errno
            if code == EINTR { continue }
            throw error(errno: code, what())
        }
    }

    /// The error a failed call with `code` in errno stands for.
    private static func error(errno code: Int32, _ what: String) -> DatagramError {
        let kind: DatagramError
        switch code {
        case EAGAIN, EWOULDBLOCK: kind = .wouldBlock
        case ECONNREFUSED: kind = .refused
        case ENETUNREACH, EHOSTUNREACH, EADDRNOTAVAIL, EAFNOSUPPORT, ENETDOWN, EHOSTDOWN: kind = .unreachable
        case EADDRINUSE: kind = .addressInUse
        case EACCES, EPERM: kind = .notPermitted
        case EMSGSIZE: kind = .tooLarge
        default: kind = .system
        }
        return kind.detailed("\(what): \(String(cString: strerror(code)))")
    }

    // MARK: Addresses

    /// The UDP addresses of `host` (a name, an IPv4 address or an IPv6 address without brackets)
    /// at `port`, as `sockaddr` bytes, in getaddrinfo's order of preference. An empty host with
    /// `passive` is every local address (for binding).
    static func resolve(host: String, port: UInt16, passive: Bool) throws -> [[UInt8]] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_DGRAM.rawValue)
        hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = host.isEmpty && passive
            ? getaddrinfo(nil, String(port), &hints, &list)
            : getaddrinfo(host, String(port), &hints, &list)
        guard status == 0 else {
            let reason = status == EAI_SYSTEM ? String(cString: strerror(errno)) : String(cString: gai_strerror(status))
            throw DatagramError.resolution.detailed("cannot resolve \(host.isEmpty ? "the local address" : host): \(reason)")
        }
        defer { freeaddrinfo(list) }
        var addresses: [[UInt8]] = []
        var entry = list
        while let info = entry?.pointee {
            if let address = info.ai_addr, info.ai_family == AF_INET || info.ai_family == AF_INET6 {
                let bytes = Array(UnsafeRawBufferPointer(start: address, count: Int(info.ai_addrlen)))
                if !addresses.contains(bytes) { addresses.append(bytes) }
            }
            entry = info.ai_next
        }
        guard !addresses.isEmpty else {
            throw DatagramError.resolution.detailed("cannot resolve \(host): no IPv4 or IPv6 address")
        }
        return addresses
    }

    /// The address family of `address` (`sockaddr` bytes).
    static func family(of address: [UInt8]) -> Int32 {
        withSocketAddress(address) { pointer, _ in Int32(pointer.pointee.sa_family) }
    }

    /// True for an IPv6 address.
    static func isIPv6(_ address: [UInt8]) -> Bool { family(of: address) == AF_INET6 }

    /// The numeric host and port of `address` (`sockaddr` bytes).
    static func numericHostAndPort(of address: [UInt8]) -> (host: String, port: UInt16) {
        withSocketAddress(address) { pointer, length in
            var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
            var service = [CChar](repeating: 0, count: 32)
            let status = getnameinfo(pointer, length, &host, socklen_t(host.count), &service, socklen_t(service.count),
                                     NI_NUMERICHOST | NI_NUMERICSERV)
            guard status == 0 else { return ("?", 0) }
            let text = String(decoding: host.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            let port = UInt16(String(decoding: service.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)) ?? 0
            return (text, port)
        }
    }

    /// `address` as a `sockaddr` pointer (copied into storage that is aligned for every family).
    private static func withSocketAddress<R>(_ address: [UInt8], _ body: (UnsafePointer<sockaddr>, socklen_t) throws -> R) rethrows -> R {
        var storage = sockaddr_storage()
        let length = min(address.count, MemoryLayout<sockaddr_storage>.size)
        withUnsafeMutableBytes(of: &storage) { raw in raw.copyBytes(from: address.prefix(length)) }
        return try withUnsafePointer(to: &storage) { pointer in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { try body($0, socklen_t(length)) }
        }
    }

    // MARK: Sockets

    /// A non-blocking UDP socket of `address`'s family, closed on exec.
    static func openSocket(for address: [UInt8]) throws -> Int32 {
        let type = Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        return try call("socket") { socket(family(of: address), type, Int32(IPPROTO_UDP)) }
    }

    /// Fixes the socket's peer: `send` goes there, and datagrams from elsewhere are not received.
    static func connect(_ descriptor: Int32, to address: [UInt8]) throws {
        try withSocketAddress(address) { pointer, length in
            _ = try call("connect to \(numericHostAndPort(of: address).host)") { Glibc.connect(descriptor, pointer, length) }
        }
    }

    /// Binds the socket to a local address (for IPv6, accepting IPv4-mapped peers too).
    static func bind(_ descriptor: Int32, to address: [UInt8]) throws {
        if isIPv6(address) {
            var off: Int32 = 0
            try call("setsockopt IPV6_V6ONLY") {
                setsockopt(descriptor, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &off, socklen_t(MemoryLayout<Int32>.size))
            }
        }
        try withSocketAddress(address) { pointer, length in
            let (host, port) = numericHostAndPort(of: address)
            _ = try call("bind to \(host) port \(port)") { Glibc.bind(descriptor, pointer, length) }
        }
    }

    /// The socket's local address.
    static func localAddress(of descriptor: Int32) throws -> [UInt8] {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        try withUnsafeMutablePointer(to: &storage) { pointer in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                _ = try call("getsockname") { getsockname(descriptor, address, &length) }
            }
        }
        return withUnsafeBytes(of: &storage) { Array($0.prefix(Int(length))) }
    }

    /// Sends one datagram on a connected socket without waiting (the socket is non-blocking).
    static func send(_ descriptor: Int32, _ bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { buffer in
            _ = try call("send") { Glibc.send(descriptor, buffer.baseAddress, buffer.count, 0) }
        }
    }

    /// Waits at most `milliseconds` (-1: for ever) for the socket to have a datagram to read.
    static func waitReadable(_ descriptor: Int32, milliseconds: Int32) throws -> Bool {
        var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        return try call("poll") { poll(&entry, 1, milliseconds) } > 0
    }

    /// Reads one datagram into `buffer` (a longer one is cut) without waiting: its real length
    /// (more than the buffer's when cut) and its sender's address.
    static func receive(_ descriptor: Int32, into buffer: UnsafeMutableRawBufferPointer) throws -> (count: Int, from: [UInt8]) {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let count = try withUnsafeMutablePointer(to: &storage) { pointer in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                // MSG_TRUNC: the datagram's real length, so a cut one is known as cut.
                try call("recvfrom") { recvfrom(descriptor, buffer.baseAddress, buffer.count, Int32(MSG_TRUNC), address, &length) }
            }
        }
        let from = withUnsafeBytes(of: &storage) { Array($0.prefix(Int(length))) }
        return (count, from)
    }

    /// `address` (`sockaddr` bytes) at port 0, an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) as
    /// the IPv4 address, an IPv6 one without its flow label: what two datagrams from one host share.
    static func hostOnly(_ address: [UInt8]) -> [UInt8] {
        withSocketAddress(address) { pointer, _ in
            if pointer.pointee.sa_family == sa_family_t(AF_INET) {
                var v4 = pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee }
                v4.sin_port = 0
                return withUnsafeBytes(of: &v4) { Array($0) }
            }
            guard pointer.pointee.sa_family == sa_family_t(AF_INET6) else { return address }
            var v6 = pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee }
            let bytes = withUnsafeBytes(of: &v6.sin6_addr) { Array($0) }
            if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xff && bytes[11] == 0xff {
                var v4 = sockaddr_in()
                v4.sin_family = sa_family_t(AF_INET)
                withUnsafeMutableBytes(of: &v4.sin_addr) { $0.copyBytes(from: bytes[12..<16]) }
                return withUnsafeBytes(of: &v4) { Array($0) }
            }
            v6.sin6_port = 0
            v6.sin6_flowinfo = 0
            return withUnsafeBytes(of: &v6) { Array($0) }
        }
    }

    /// Closes a descriptor; a failure (only EBADF or EINTR on Linux, where the descriptor is gone
    /// either way) is not reported.
    static func close(_ descriptor: Int32) {
        _ = Glibc.close(descriptor)
    }
}
