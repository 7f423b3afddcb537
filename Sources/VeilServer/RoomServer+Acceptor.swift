internal import CGLib
internal import CSoup
import Foundation
import VeilGLib
#if canImport(Glibc)
import Glibc
#endif

/// The room server's listening socket, and the accepting of its connections, which are handed to
/// libsoup as streams (`soup_server_accept_iostream`) rather than left to `soup_server_listen`.
/// libsoup 3.2 (Debian 12's) does three things wrong here, found by `veil bench`'s server load:
/// - it keeps one reference to every socket it accepts, so each connection ever made leaks its
///   `GSocket` (about 340 bytes; fixed upstream in 3.4, "soup-listener: Plug a leak");
/// - it listens with GLib's default backlog of 10, so a burst of connections while the loop is
///   busy loses SYNs and those clients wait out a TCP retransmission (1 s or more);
/// - one failed `accept` (out of file descriptors, say) removes its watch: the server would never
///   accept again. Here the watch pauses and retries.
///
/// With a certificate, each connection is wrapped in a GLib TLS server connection before libsoup
/// gets it (as `soup_server_listen` does for an HTTPS server); the handshake runs implicitly when
/// libsoup first reads the request, and counts towards the server's handshake deadline.
///
/// Used on the server's loop thread only (created there, its source dispatched there).
final class ServerAcceptor {
    private let socket: UnsafeMutablePointer<GSocket>
    private let server: UnsafeMutablePointer<SoupServer>
    private let tls: ServerCertificate?
    private let onFailure: (String) -> Void
    private let admit: (UnsafeMutablePointer<GSocket>) -> Bool
    private var source: GLibSource?
    private var retry: GLibSource?
    private var closed = false

    /// Connections the kernel completes and queues until the loop accepts them (capped by
    /// `net.core.somaxconn`).
    static let backlog: Int32 = 1024
    /// Connections accepted per wake-up at most, so that a flood cannot starve the loop.
    static let acceptsPerWakeUp = 64
    /// How long accepting pauses after a failure other than "nothing to accept".
    static let pauseAfterFailureMilliseconds: UInt32 = 250

    /// Listens on `address` and starts accepting into `server` on the calling thread's default
    /// main context (the server's loop), over TLS with `tls`. `admit` sees each accepted socket
    /// first and says whether to serve it (false closes it at once: the server is full);
    /// `onFailure` hears of failed accepts (one call per pause).
    /// - Throws: `GLibError` when the socket cannot be made, bound or set listening.
    init(address: UnsafeMutablePointer<GSocketAddress>, server: UnsafeMutablePointer<SoupServer>,
         tls: ServerCertificate? = nil,
         admit: @escaping (UnsafeMutablePointer<GSocket>) -> Bool = { _ in true },
         onFailure: @escaping (String) -> Void) throws {
        socket = try Self.listeningSocket(on: address, backlog: Self.backlog)
        self.server = server
        self.tls = tls
        self.admit = admit
        self.onFailure = onFailure
        g_object_ref(UnsafeMutableRawPointer(server))
        watch()
    }

    deinit {
        close()
        g_object_unref(UnsafeMutableRawPointer(socket))
        g_object_unref(UnsafeMutableRawPointer(server))
    }

    /// The port it listens on (0 if the kernel will not say).
    var port: Int {
        guard let address = g_socket_get_local_address(socket, nil) else { return 0 }
        defer { g_object_unref(UnsafeMutableRawPointer(address)) }
        return Int(g_inet_socket_address_get_port(UnsafeMutableRawPointer(address).assumingMemoryBound(to: GInetSocketAddress.self)))
    }

    /// Stops accepting and closes the listening socket; calling it again does nothing.
    func close() {
        guard !closed else { return }
        closed = true
        source = nil
        retry = nil
        g_socket_close(socket, nil)
    }

    /// A TCP socket bound to `address` and listening with room for `backlog` pending connections,
    /// made as libsoup makes its own (address reuse; an IPv6 socket accepts IPv6 only) and
    /// non-blocking. The caller owns the returned reference.
    static func listeningSocket(on address: UnsafeMutablePointer<GSocketAddress>, backlog: Int32) throws -> UnsafeMutablePointer<GSocket> {
        let family = g_socket_address_get_family(address)
        var error: UnsafeMutablePointer<GError>?
        guard let socket = g_socket_new(family, G_SOCKET_TYPE_STREAM, G_SOCKET_PROTOCOL_DEFAULT, &error) else {
            throw GLibError(consuming: error, what: "socket")
        }
        func fail(_ what: String) -> GLibError {
            let problem = GLibError(consuming: error, what: what)
            g_object_unref(UnsafeMutableRawPointer(socket))
            return problem
        }
        if family == G_SOCKET_FAMILY_IPV6, g_socket_set_option(socket, Int32(IPPROTO_IPV6), Int32(IPV6_V6ONLY), 1, &error) == 0 {
            throw fail("IPV6_V6ONLY")
        }
        g_socket_set_blocking(socket, 0)
        g_socket_set_listen_backlog(socket, backlog)
        guard g_socket_bind(socket, address, 1, &error) != 0 else { throw fail("bind") }
        guard g_socket_listen(socket, &error) != 0 else { throw fail("listen") }
        return socket
    }

    // MARK: Accepting

    private func watch() {
        guard !closed, let socketSource = g_socket_create_source(socket, G_IO_IN, nil) else { return }
        source = GLibSource(socketSource, signature: .socket) { [weak self] in self?.acceptPending() ?? false }
    }

    /// Accepts what is queued; false removes the watch (after a failure, `pause` sets a new one up later).
    private func acceptPending() -> Bool {
        for _ in 0..<Self.acceptsPerWakeUp {
            var error: UnsafeMutablePointer<GError>?
            guard let client = g_socket_accept(socket, nil, &error) else {
                if TransportSocket.isWouldBlock(error) {
                    g_error_free(error)
                    return true
                }
                // Out of descriptors, most likely: the connection stays queued, so the watch would
                // fire again at once. Wait a little instead of spinning, then try again.
                onFailure(GLibError(consuming: error, what: "accept").message)
                pause()
                return false
            }
            hand(client)
        }
        return true
    }

    private func pause() {
        source = nil
        guard !closed else { return }
        retry = GLibSource(milliseconds: Self.pauseAfterFailureMilliseconds) { [weak self] in
            self?.retry = nil
            self?.watch()
            return false
        }
    }

    /// Gives an accepted socket to the HTTP server as a stream; consumes the socket's reference.
    private func hand(_ client: UnsafeMutablePointer<GSocket>) {
        defer { g_object_unref(UnsafeMutableRawPointer(client)) }
        guard admit(client) else { return } // dropping our reference closes it
        g_socket_set_option(client, Int32(IPPROTO_TCP), Int32(TCP_NODELAY), 1, nil) // as libsoup does: small messages, no delay
        let local = g_socket_get_local_address(client, nil), remote = g_socket_get_remote_address(client, nil)
        defer {
            if let local { g_object_unref(UnsafeMutableRawPointer(local)) }
            if let remote { g_object_unref(UnsafeMutableRawPointer(remote)) }
        }
        guard let local, let remote, let connection = g_socket_connection_factory_create_connection(client) else {
            return // the peer is already gone: dropping our reference closes the socket
        }
        defer { g_object_unref(UnsafeMutableRawPointer(connection)) }
        var error: UnsafeMutablePointer<GError>?
        var stream = UnsafeMutableRawPointer(connection).assumingMemoryBound(to: GIOStream.self)
        if let tls {
            guard let secured = g_tls_server_connection_new(stream, UnsafeMutablePointer(tls.handle), &error) else {
                return onFailure(GLibError(consuming: error, what: "starting TLS on a connection").message)
            }
            stream = secured
        }
        defer { if tls != nil { g_object_unref(UnsafeMutableRawPointer(stream)) } }
        if soup_server_accept_iostream(server, stream, local, remote, &error) == 0 {
            onFailure(GLibError(consuming: error, what: "taking a connection").message)
        }
    }
}
