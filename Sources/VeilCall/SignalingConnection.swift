import CGStreamer
import CSoup
import Foundation
import Synchronization
import CVeilGLib
import VeilGLib

/// A WebSocket to the room server (libsoup), living on a `GLibLoop`. It moves text messages and
/// reports when the connection closes; what the messages mean is the call session's business.
/// A `wss://` server must show a certificate that `trust` vouches for, or the connection fails
/// with a `ServerCertificateError` saying why.
///
/// `@unchecked Sendable`: libsoup objects are touched only on `loop`'s thread (every method hops
/// there); the callbacks are set before `connect` and only read afterwards.
public final class SignalingConnection: @unchecked Sendable {
    /// Why the connection ended.
    public enum Closure: Sendable, Equatable {
        /// `close()` was called.
        case closedByClient
        /// The server closed it, or the network dropped it.
        case lost(String)
    }

    public let url: URL
    /// Whom a `wss://` server's certificate must be vouched for by.
    public let trust: ServerTrust
    private let loop: GLibLoop
    private var session: UnsafeMutablePointer<SoupSession>?
    private var connection: OpaquePointer?
    private var closed = false

    /// Text messages from the server, on the loop's thread.
    public var onMessage: (@Sendable (String) -> Void)?
    /// The end of the connection, on the loop's thread; called once.
    public var onClose: (@Sendable (Closure) -> Void)?

    public init(loop: GLibLoop, url: URL, trust: ServerTrust = .system) {
        self.loop = loop
        self.url = url
        self.trust = trust
    }

    deinit {
        // libsoup objects are released on their own thread.
        let handles = UnsafeHandles(connection: connection.map { UnsafeMutableRawPointer($0) },
                                    session: session.map { UnsafeMutableRawPointer($0) })
        guard handles.connection != nil || handles.session != nil else { return }
        loop.perform {
            if let c = handles.connection { g_object_unref(c) }
            if let s = handles.session { g_object_unref(s) }
        }
    }

    /// Opens the WebSocket; `completion` runs on the loop's thread with the outcome: a
    /// `ServerCertificateError` for a `wss://` server whose certificate is refused.
    public func connect(timeoutSeconds: UInt32 = 5, completion: @escaping @Sendable (Result<Void, Error>) -> Void) {
        loop.perform { [self] in
            guard session == nil else { completion(.failure(GLibError(consuming: nil, what: "connecting twice"))); return }
            guard let message = soup_message_new("GET", url.absoluteString) else {
                completion(.failure(GLibError(consuming: nil, what: "invalid server URL \(url.absoluteString)")))
                return
            }
            let session = soup_session_new()
            self.session = session
            veilSetTimeout(session, timeoutSeconds)
            if let authorities = trust.certificateAuthorities {
                do {
                    let database = try ServerTrust.database(authorities)
                    soup_session_set_tls_database(session, database)
                    g_object_unref(UnsafeMutableRawPointer(database))
                } catch {
                    g_object_unref(UnsafeMutableRawPointer(message))
                    completion(.failure(error))
                    return
                }
            }
            let connectContext = ConnectContext(owner: self, completion: completion)
            // libsoup asks here when GLib's verification failed: refuse, and keep GLib's reasons.
            GSignal.connect(UnsafeMutableRawPointer(message), "accept-certificate") { [url] certificate, flags in
                connectContext.refusal = ServerCertificateError(server: url, problems: .init(rawValue: flags),
                                                                notBefore: certificate.flatMap { validity(of: $0, "not-valid-before") },
                                                                notAfter: certificate.flatMap { validity(of: $0, "not-valid-after") })
                return false
            }
            let context = Unmanaged.passRetained(connectContext).toOpaque()
            soup_session_websocket_connect_async(session, message, nil, nil, G_PRIORITY_DEFAULT, nil, { source, result, data in
                let context = Unmanaged<ConnectContext>.fromOpaque(data!).takeRetainedValue()
                var error: UnsafeMutablePointer<GError>?
                let connection = soup_session_websocket_connect_finish(SOUP_SESSION(source), result, &error)
                guard let connection else {
                    let failure = GLibError(consuming: error, what: "connecting to \(context.owner.url.absoluteString)")
                    context.completion(.failure(context.refusal ?? failure))
                    return
                }
                context.owner.attach(connection)
                context.completion(.success(()))
            }, context)
            g_object_unref(UnsafeMutableRawPointer(message))
        }
    }

    private func attach(_ connection: OpaquePointer) {
        self.connection = connection
        let object = UnsafeMutableRawPointer(connection)
        GSignal.connect(object, "message") { [weak self] (type: Int32, data: gpointer?) in
            guard let self, type == 1 /* SOUP_WEBSOCKET_DATA_TEXT */, let data else { return }
            let text = String(decoding: bytes(of: OpaquePointer(data)), as: UTF8.self)
            self.onMessage?(text)
        }
        GSignal.connect(object, "closed") { [weak self] () -> Void in
            guard let self, !self.closed else { return }
            self.closed = true
            self.onClose?(.lost("the server closed the connection"))
        }
    }

    /// Sends a text message (dropped when not connected).
    public func send(_ text: String) {
        loop.perform { [self] in
            guard let connection, !closed, soup_websocket_connection_get_state(connection) == SOUP_WEBSOCKET_STATE_OPEN else { return }
            soup_websocket_connection_send_text(connection, text)
        }
    }

    /// Closes the connection politely.
    public func close() {
        loop.perform { [self] in
            guard !closed else { return }
            closed = true
            if let connection, soup_websocket_connection_get_state(connection) == SOUP_WEBSOCKET_STATE_OPEN {
                soup_websocket_connection_close(connection, 1000, nil)
            }
            onClose?(.closedByClient)
        }
    }
}

/// Raw handles handed to the loop thread for release.
private struct UnsafeHandles: @unchecked Sendable {
    let connection: UnsafeMutableRawPointer?
    let session: UnsafeMutableRawPointer?
}

private final class ConnectContext {
    let owner: SignalingConnection
    let completion: @Sendable (Result<Void, Error>) -> Void
    /// Why the server's certificate was refused, if it was.
    var refusal: ServerCertificateError?
    init(owner: SignalingConnection, completion: @escaping @Sendable (Result<Void, Error>) -> Void) {
        self.owner = owner; self.completion = completion
    }
}

/// A `GTlsCertificate`'s "not-valid-before" or "not-valid-after" (a `GDateTime`), as a date.
private func validity(of certificate: gpointer, _ property: String) -> Date? {
    var value = GValue()
    g_value_init(&value, g_date_time_get_type())
    defer { g_value_unset(&value) }
    g_object_get_property(certificate.assumingMemoryBound(to: GObject.self), property, &value)
    guard let time = g_value_get_boxed(&value) else { return nil }
    return Date(timeIntervalSince1970: TimeInterval(g_date_time_to_unix(OpaquePointer(time))))
}

/// SoupSession's "timeout" property (seconds) through the typed setter.
private func veilSetTimeout(_ session: UnsafeMutablePointer<SoupSession>?, _ seconds: UInt32) {
    guard let session else { return }
    veil_object_set_uint(UnsafeMutableRawPointer(session), "timeout", seconds)
}
