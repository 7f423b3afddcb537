import Foundation
import VeilCore
#if canImport(Glibc)
import Glibc
#endif

/// A blocking TCP connection to 127.0.0.1 with send and receive timeouts: how the bench asks the
/// processes it started (a node's `/health`, Redis's `INFO`) without a loop of its own.
final class LoopbackConnection {
    let port: Int
    let timeoutSeconds: Int
    private let fd: Int32

    /// Connects, or says why not.
    init(port: Int, timeoutSeconds: Int = 3) throws {
        self.port = port
        self.timeoutSeconds = timeoutSeconds
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw VeilError.io("socket: \(String(cString: strerror(errno)))") }
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(truncatingIfNeeded: port).bigEndian)
        address.sin_addr.s_addr = in_addr_t(UInt32(0x7F00_0001).bigEndian)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw VeilError.io("cannot connect to 127.0.0.1:\(port): \(reason)")
        }
    }

    deinit { close(fd) }

    /// Sends all of `text`.
    func send(_ text: String) throws {
        let bytes = Array(text.utf8)
        guard bytes.withUnsafeBytes({ Glibc.send(fd, $0.baseAddress, $0.count, 0) }) == bytes.count else {
            throw VeilError.io("cannot send to 127.0.0.1:\(port)")
        }
    }

    /// Reads what has come into `buffer`: the byte count, 0 at the end of the stream, -1 on an
    /// error or when nothing came within the timeout.
    func receive(into buffer: inout [UInt8]) -> Int {
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count < 0 && errno == EINTR { continue }
            return count
        }
    }
}
