import CGLib
import CSoup
import Foundation
import Synchronization
import VeilCore
import VeilGLib

/// A real WebSocket client of the room server for tests: libsoup's client on a GLib loop of the
/// test's own, pinging every second like a real client, collecting what the server sends.
///
/// `@unchecked Sendable`: the libsoup objects are touched only on `loop`'s thread; the inbox is
/// guarded by `condition`.
final class WebSocketTestClient: @unchecked Sendable {
    struct ConnectError: Error, CustomStringConvertible { let description: String }

    let name: String
    private let loop: GLibLoop
    private var session: UnsafeMutablePointer<SoupSession>?
    private var connection: OpaquePointer?
    private var pingTimer: GLibTimer?

    private let condition = NSCondition()
    private var inbox: [ServerMessage] = []
    private var undecodable: [String] = []
    private var closeCode: UInt16?
    private(set) var lastSentAt = Date.distantPast

    private init(name: String, loop: GLibLoop) {
        self.name = name
        self.loop = loop
    }

    /// Connects to `url` and starts pinging every second; a `wss://` server's certificate must be
    /// signed by one of `certificateAuthorities` (a PEM file) when given.
    static func connect(to url: URL, name: String = "client", loop: GLibLoop, timeout: TimeInterval = 5,
                        certificateAuthorities: URL? = nil) throws -> WebSocketTestClient {
        let client = WebSocketTestClient(name: name, loop: loop)
        let result = Mutex<Result<Void, ConnectError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        try loop.sync {
            client.session = soup_session_new()
            if let certificateAuthorities, let database = g_tls_file_database_new(certificateAuthorities.path, nil) {
                soup_session_set_tls_database(client.session, UnsafeMutableRawPointer(database).assumingMemoryBound(to: GTlsDatabase.self))
                g_object_unref(UnsafeMutableRawPointer(database))
            }
            let message = soup_message_new("GET", url.absoluteString)
            let box = Unmanaged.passRetained(ConnectBox { outcome in
                result.withLock { $0 = outcome }
                done.signal()
            }).toOpaque()
            soup_session_websocket_connect_async(client.session, message, nil, nil, G_PRIORITY_DEFAULT, nil, { source, asyncResult, data in
                guard let data else { return }
                let box = Unmanaged<ConnectBox>.fromOpaque(data).takeRetainedValue()
                var error: UnsafeMutablePointer<GError>?
                guard let connection = soup_session_websocket_connect_finish(SOUP_SESSION(source), asyncResult, &error) else {
                    box.done(.failure(ConnectError(description: GLibError(consuming: error, what: "WebSocket connect").message)))
                    return
                }
                box.client?.attach(connection)
                box.done(.success(()))
            }, box)
            Unmanaged<ConnectBox>.fromOpaque(box).takeUnretainedValue().client = client
            g_object_unref(UnsafeMutableRawPointer(message))
        }
        guard done.wait(timeout: .now() + timeout) == .success else { throw ConnectError(description: "connect timed out") }
        try result.withLock { $0 }?.get()
        client.setPinging(true)
        return client
    }

    private final class ConnectBox {
        let done: (Result<Void, ConnectError>) -> Void
        var client: WebSocketTestClient?
        init(_ done: @escaping (Result<Void, ConnectError>) -> Void) { self.done = done }
    }

    private func attach(_ connection: OpaquePointer) {
        self.connection = connection
        let object = UnsafeMutableRawPointer(connection)
        GSignal.connect(object, "message") { [weak self] (type: Int32, data: gpointer?) in
            guard let self else { return }
            let text = String(decoding: bytes(of: OpaquePointer(data)), as: UTF8.self)
            self.condition.lock()
            do {
                let message = try SignalingMessage.decode(ServerMessage.self, from: text)
                if case .pong = message {} else { self.inbox.append(message) }
            } catch {
                self.undecodable.append(text)
            }
            self.condition.broadcast()
            self.condition.unlock()
        }
        GSignal.connect(object, "closed") { [weak self] in
            guard let self else { return }
            let code = soup_websocket_connection_get_close_code(connection)
            self.pingTimer?.cancel()
            self.condition.lock()
            self.closeCode = code
            self.condition.broadcast()
            self.condition.unlock()
        }
    }

    deinit {
        pingTimer?.cancel()
        // Release on the loop thread, where libsoup expects its objects to die.
        struct Handles: @unchecked Sendable { let connection: OpaquePointer?; let session: UnsafeMutablePointer<SoupSession>? }
        let handles = Handles(connection: connection, session: session)
        loop.perform {
            let connection = handles.connection, session = handles.session
            if let connection {
                if soup_websocket_connection_get_state(connection) == SOUP_WEBSOCKET_STATE_OPEN {
                    soup_websocket_connection_close(connection, 1000, nil)
                }
                g_object_unref(UnsafeMutableRawPointer(connection))
            }
            if let session { g_object_unref(UnsafeMutableRawPointer(session)) }
        }
    }

    // MARK: Sending

    func send(_ message: ClientMessage) { sendText(SignalingMessage.encode(message)) }

    func sendText(_ text: String) {
        lastSentAt = Date()
        loop.perform { [self] in
            guard let connection, soup_websocket_connection_get_state(connection) == SOUP_WEBSOCKET_STATE_OPEN else { return }
            soup_websocket_connection_send_text(connection, text)
        }
    }

    func sendBinary(_ bytes: [UInt8]) {
        loop.perform { [self] in
            guard let connection, soup_websocket_connection_get_state(connection) == SOUP_WEBSOCKET_STATE_OPEN else { return }
            bytes.withUnsafeBytes { soup_websocket_connection_send_binary(connection, $0.baseAddress, gsize($0.count)) }
        }
    }

    /// Pings every second (on) or falls silent (off) while keeping the socket open.
    func setPinging(_ on: Bool) {
        try? loop.sync { [self] in
            pingTimer?.cancel()
            pingTimer = nil
            guard on else { return }
            pingTimer = loop.every(milliseconds: 1000) { [weak self] in
                self?.send(.ping(t: nil))
                return self != nil
            }
        }
    }

    /// Kills the transport without a WebSocket close or a leave, as a crashed client would.
    func dropAbruptly() {
        try? loop.sync { [self] in
            pingTimer?.cancel()
            pingTimer = nil
            if let connection, let stream = soup_websocket_connection_get_io_stream(connection) {
                g_io_stream_close(stream, nil, nil)
            }
        }
    }

    // MARK: Receiving

    /// The first received message matching `match` (removed from the inbox), waiting up to `timeout`.
    func next(timeout: TimeInterval = 3, where match: (ServerMessage) -> Bool = { _ in true }) -> ServerMessage? {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock()
        defer { condition.unlock() }
        while true {
            if let index = inbox.firstIndex(where: match) { return inbox.remove(at: index) }
            if !condition.wait(until: deadline) { return nil }
        }
    }

    /// The next error's code.
    func nextError(timeout: TimeInterval = 3) -> SignalingErrorCode? {
        guard case let .error(code, _)? = next(timeout: timeout, where: { if case .error = $0 { true } else { false } }) else { return nil }
        return code
    }

    /// Everything received and not yet taken.
    var pending: [ServerMessage] {
        condition.lock()
        defer { condition.unlock() }
        return inbox
    }

    /// Text frames that did not decode as server messages (should stay empty).
    var undecodableMessages: [String] {
        condition.lock()
        defer { condition.unlock() }
        return undecodable
    }

    /// The close code once the connection has closed, waiting up to `timeout`.
    func waitClosed(timeout: TimeInterval = 3) -> UInt16? {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock()
        defer { condition.unlock() }
        while closeCode == nil {
            if !condition.wait(until: deadline) { return nil }
        }
        return closeCode
    }
}

/// A GET with libsoup's synchronous API; returns the status and the body.
func httpGet(_ url: URL) throws -> (status: UInt32, body: String) {
    let session = soup_session_new()
    defer { g_object_unref(UnsafeMutableRawPointer(session)) }
    guard let message = soup_message_new("GET", url.absoluteString) else {
        throw WebSocketTestClient.ConnectError(description: "bad URL \(url)")
    }
    defer { g_object_unref(UnsafeMutableRawPointer(message)) }
    var error: UnsafeMutablePointer<GError>?
    guard let body = soup_session_send_and_read(session, message, nil, &error) else {
        throw GLibError(consuming: error, what: "GET \(url)")
    }
    defer { g_bytes_unref(body) }
    return (UInt32(soup_message_get_status(message).rawValue), String(decoding: bytes(of: body), as: UTF8.self))
}
