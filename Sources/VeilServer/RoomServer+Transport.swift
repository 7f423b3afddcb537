internal import CGLib
internal import CSoup
import Foundation
import VeilGLib
#if canImport(Glibc)
import Glibc
#endif

// The kernel's view of the room server's TCP connections: every raw socket call the server makes
// about an accepted connection is in this file.

/// One accepted TCP connection, from `accept` until libsoup closes it: when it came, whether it has
/// become a WebSocket, and the kernel's counters for it. Holds a reference to the `GSocket` (the
/// descriptor stays libsoup's: it closes the stream, which closes the socket).
///
/// Used on the server's loop thread only.
final class TransportSocket {
    private let socket: UnsafeMutablePointer<GSocket>
    /// When it was accepted (monotonic seconds).
    let acceptedAt: TimeInterval
    /// Whether it carries a WebSocket (then the room directory watches it; otherwise the HTTP deadline applies).
    var upgraded = false

    /// Takes a reference of its own to `socket`.
    init(_ socket: UnsafeMutablePointer<GSocket>, acceptedAt: TimeInterval) {
        self.socket = socket
        self.acceptedAt = acceptedAt
        g_object_ref(UnsafeMutableRawPointer(socket))
    }

    deinit { g_object_unref(UnsafeMutableRawPointer(socket)) }

    /// The socket, as a key for the server's table of connections.
    var key: UnsafeMutableRawPointer { UnsafeMutableRawPointer(socket) }

    /// Whether libsoup (or anyone) has closed it.
    var isClosed: Bool { g_socket_is_closed(socket) != 0 }

    /// Shuts both directions down: libsoup reads end-of-file and closes the connection itself.
    func shutDown() { g_socket_shutdown(socket, 1, 1, nil) }

    /// Shuts the sending direction down: the client reads the end of the stream after what was sent.
    func shutDownWriting() { g_socket_shutdown(socket, 0, 1, nil) }

    /// The kernel's counters, or nil if it will not say (the socket is closed, or not TCP).
    struct Counters: Equatable {
        /// Bytes received since the connection opened.
        var received: UInt64
        /// Bytes sent and acknowledged by the peer since the connection opened.
        var acknowledged: UInt64
        /// Bytes in the kernel's send queue: not yet sent, or sent and not acknowledged.
        var queued: Int
    }

    /// Reads `TCP_INFO` and `SIOCOUTQ`.
    func counters() -> Counters? {
        guard !isClosed else { return nil }
        let fd = g_socket_get_fd(socket)
        guard let (received, acknowledged) = Self.byteCounts(fd) else { return nil }
        var queued: Int32 = 0
        if ioctl(fd, UInt(TIOCOUTQ), &queued) != 0 { queued = 0 } // SIOCOUTQ: unsent + unacknowledged
        return Counters(received: received, acknowledged: acknowledged, queued: Int(max(0, queued)))
    }

    /// Bytes received and bytes acknowledged by the peer since the connection opened, from the
    /// kernel's `TCP_INFO` for descriptor `fd`; nil if it will not say (not an open TCP socket).
    static func byteCounts(_ fd: Int32) -> (received: UInt64, acknowledged: UInt64)? {
        // Linux's `struct tcp_info` (linux/tcp.h, which Glibc's module does not import; glibc's own
        // copy stops before these fields): tcpi_bytes_acked at byte 120 and tcpi_bytes_received at
        // byte 128, both since Linux 4.1. The kernel only ever appends fields, and says how many
        // bytes it filled in.
        // On the stack: this runs for every connection several times a second.
        withUnsafeTemporaryAllocation(byteCount: 256, alignment: 8) { info in
            var length = socklen_t(info.count)
            guard getsockopt(fd, Int32(IPPROTO_TCP), TCP_INFO, info.baseAddress, &length) == 0, length >= 136 else { return nil }
            let acknowledged = info.loadUnaligned(fromByteOffset: 120, as: UInt64.self)
            let received = info.loadUnaligned(fromByteOffset: 128, as: UInt64.self)
            return (received, acknowledged)
        }
    }

    /// The TCP socket under the stream libsoup hands over after an upgrade: libsoup wraps the stream
    /// the acceptor gave it (a `GSocketConnection`, or a TLS connection over one) in a private
    /// `SoupIOStream`, whose `base-iostream` property is that stream; a TLS connection's
    /// `base-io-stream` is the one beneath it. Nil if the layering is not as expected (another
    /// libsoup version): the connection then works without the kernel's counters.
    static func socket(under stream: UnsafeMutablePointer<GIOStream>) -> UnsafeMutablePointer<GSocket>? {
        var stream = stream
        // SoupIOStream → (TLS connection →) socket connection; each layer holds the one beneath.
        for _ in 0..<3 {
            let typed = UnsafeMutableRawPointer(stream).assumingMemoryBound(to: GTypeInstance.self)
            if g_type_check_instance_is_a(typed, g_socket_connection_get_type()) != 0 {
                return g_socket_connection_get_socket(UnsafeMutableRawPointer(stream).assumingMemoryBound(to: GSocketConnection.self))
            }
            guard let base = baseStream(of: stream) else { return nil }
            stream = base
        }
        return nil
    }

    /// The stream `stream` is layered on (its `base-iostream` or `base-io-stream` property), borrowed.
    private static func baseStream(of stream: UnsafeMutablePointer<GIOStream>) -> UnsafeMutablePointer<GIOStream>? {
        let object = UnsafeMutableRawPointer(stream)
        guard let instance = object.assumingMemoryBound(to: GTypeInstance.self).pointee.g_class else { return nil }
        let objectClass = UnsafeMutableRawPointer(instance).assumingMemoryBound(to: GObjectClass.self)
        for name in ["base-iostream", "base-io-stream"] {
            guard let property = g_object_class_find_property(objectClass, name) else { continue }
            var value = GValue()
            g_value_init(&value, property.pointee.value_type)
            defer { g_value_unset(&value) }
            g_object_get_property(object.assumingMemoryBound(to: GObject.self), name, &value)
            // Borrowed: each layer keeps its base alive as long as it lives.
            guard let base = g_value_get_object(&value) else { return nil }
            return base.assumingMemoryBound(to: GIOStream.self)
        }
        return nil
    }

    /// Whether `error` (from a non-blocking read, write or accept) only says "nothing now, try when
    /// ready". The error stays the caller's to free.
    static func isWouldBlock(_ error: UnsafeMutablePointer<GError>?) -> Bool {
        guard let error else { return false }
        return error.pointee.domain == g_io_error_quark() && error.pointee.code == Int32(G_IO_ERROR_WOULD_BLOCK.rawValue)
    }

    /// The soft open-file limit of this process (nil if unknown or unlimited).
    static var openFileLimit: Int? {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur != rlim_t.max else { return nil }
        return Int(clamping: limit.rlim_cur)
    }
}
