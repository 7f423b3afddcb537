import CGStreamer
import CSoup
import Foundation
import Synchronization
import CVeilGLib
import VeilGLib

/// A WebSocket to the room server (libsoup), living on a `GLibLoop`. It moves text messages and
/// reports when the connection closes; what the messages mean is the call session's business.
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
    private let loop: GLibLoop
    private var session: UnsafeMutablePointer<SoupSession>?
    private var connection: OpaquePointer?
    private var closed = false

    /// Text messages from the server, on the loop's thread.
    public var onMessage: (@Sendable (String) -> Void)?
    /// The end of the connection, on the loop's thread; called once.
    public var onClose: (@Sendable (Closure) -> Void)?

    public init(loop: GLibLoop, url: URL) {
        self.loop = loop
        self.url = url
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

    /// Opens the WebSocket; `completion` runs on the loop's thread with the outcome.
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
            let context = Unmanaged.passRetained(ConnectContext(owner: self, completion: completion)).toOpaque()
            soup_session_websocket_connect_async(session, message, nil, nil, G_PRIORITY_DEFAULT, nil, { source, result, data in
                let context = Unmanaged<ConnectContext>.fromOpaque(data!).takeRetainedValue()
                var error: UnsafeMutablePointer<GError>?
                let connection = soup_session_websocket_connect_finish(SOUP_SESSION(source), result, &error)
                guard let connection else {
                    context.completion(.failure(GLibError(consuming: error, what: "connecting to \(context.owner.url.absoluteString)")))
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
    init(owner: SignalingConnection, completion: @escaping @Sendable (Result<Void, Error>) -> Void) {
        self.owner = owner; self.completion = completion
    }
}

/// SoupSession's "timeout" property (seconds) through the typed setter.
private func veilSetTimeout(_ session: UnsafeMutablePointer<SoupSession>?, _ seconds: UInt32) {
    guard let session else { return }
    veil_object_set_uint(UnsafeMutableRawPointer(session), "timeout", seconds)
}
