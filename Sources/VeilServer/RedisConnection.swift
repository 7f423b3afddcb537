internal import CGLib
internal import CHiredis
internal import CVeilRedis
import Foundation
import VeilCore

/// A reply from Redis, as Swift values.
enum RedisReply: Equatable, Sendable {
    case string(String)
    case status(String)
    case integer(Int64)
    case array([RedisReply])
    case null
    case error(String)

    /// Reads a hiredis reply (which stays hiredis's to free).
    init(_ reply: UnsafePointer<redisReply>) {
        let r = reply.pointee
        func text() -> String {
            guard let str = r.str else { return "" }
            return String(decoding: UnsafeRawBufferPointer(start: str, count: Int(r.len)), as: UTF8.self)
        }
        switch r.type {
        case REDIS_REPLY_STRING: self = .string(text())
        case REDIS_REPLY_STATUS: self = .status(text())
        case REDIS_REPLY_ERROR: self = .error(text())
        case REDIS_REPLY_INTEGER: self = .integer(Int64(r.integer))
        case REDIS_REPLY_ARRAY:
            self = .array((0..<Int(r.elements)).map { i in r.element[i].map { RedisReply(UnsafePointer($0)) } ?? .null })
        default: self = .null
        }
    }
}

/// The error of a Redis connection or command, in words.
struct RedisError: Error, CustomStringConvertible {
    let description: String
}

/// Arguments as the C strings and lengths hiredis's `…CommandArgv` functions take (binary-safe;
/// hiredis copies them into its output buffer before returning).
private func withArgv<T>(_ arguments: [String], _ body: (Int32, UnsafeMutablePointer<UnsafePointer<CChar>?>, UnsafePointer<Int>) -> T) -> T {
    let copies = arguments.map { strdup($0) }
    defer { copies.forEach { free($0) } }
    var argv = copies.map { UnsafePointer($0) }
    let lengths = arguments.map { $0.utf8.count }
    return argv.withUnsafeMutableBufferPointer { argv in
        lengths.withUnsafeBufferPointer { argvlen in body(Int32(arguments.count), argv.baseAddress!, argvlen.baseAddress!) }
    }
}

/// One asynchronous connection to Redis (hiredis), driven by the calling thread's GLib main
/// context: the room server's loop. Commands are sent without blocking and their replies come back
/// as callbacks on the same loop, so the broker's state needs no lock.
///
/// (hiredis also has a blocking API, which could run on a thread of its own; the loop's own
/// adapter keeps one thread, one order of events, and no lock between Redis and the rooms.)
///
/// Used on the loop thread only. `onClosed` runs once, when the connection fails to open or is
/// lost; after it the object is inert (make a new one to reconnect). Pending replies are then
/// delivered as nil.
final class RedisConnection {
    private var context: UnsafeMutablePointer<redisAsyncContext>?
    private var source: UnsafeMutablePointer<GSource>?
    private let endpoint: String
    private var subscriptions: [SubscriptionBox] = []
    private var onOpen: (() -> Void)?
    private var onClosed: ((String) -> Void)?
    private var finished = false
    /// Whether the connection is open (connected and not lost).
    private(set) var isOpen = false

    /// Starts connecting to `host:port`; `opened` runs once connected, `closed` once it fails or is lost (with why).
    /// - Throws: when hiredis cannot even start (out of memory, an address it cannot use).
    init(host: String, port: Int, opened: @escaping () -> Void, closed: @escaping (String) -> Void) throws {
        endpoint = "\(host):\(port)"
        guard let context = redisAsyncConnect(host, Int32(port)) else { throw RedisError(description: "cannot start a connection to Redis at \(endpoint)") }
        if context.pointee.err != 0 {
            let reason = context.pointee.errstr.map { String(cString: $0) } ?? "error \(context.pointee.err)"
            redisAsyncFree(context)
            throw RedisError(description: "cannot connect to Redis at \(endpoint): \(reason)")
        }
        guard let source = veil_redis_attach(context, g_main_context_get_thread_default()) else {
            redisAsyncFree(context)
            throw RedisError(description: "cannot attach the Redis connection to the server's loop")
        }
        self.context = context
        self.source = source
        onOpen = opened
        onClosed = closed
        // The context points back at us while it lives; `close()` (deinit too) frees it before we go.
        context.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        redisAsyncSetConnectCallback(context) { context, status in
            guard let data = context?.pointee.data else { return }
            let connection = Unmanaged<RedisConnection>.fromOpaque(data).takeUnretainedValue()
            if status == REDIS_OK {
                connection.isOpen = true
                connection.onOpen?()
            } else {
                // hiredis frees the context after this callback, without a disconnect callback.
                let reason = context?.pointee.errstr.map { String(cString: $0) } ?? "connection failed"
                connection.lost("cannot connect to Redis at \(connection.endpoint): \(reason)")
            }
        }
        redisAsyncSetDisconnectCallback(context) { context, status in
            guard let data = context?.pointee.data else { return }
            let connection = Unmanaged<RedisConnection>.fromOpaque(data).takeUnretainedValue()
            let reason = status == REDIS_OK ? "closed" : context?.pointee.errstr.map { String(cString: $0) } ?? "connection lost"
            connection.lost("lost the connection to Redis at \(connection.endpoint): \(reason)")
        }
    }

    deinit { close() }

    /// Sends a command; `reply` gets the answer, or nil when the connection is lost first.
    func command(_ arguments: [String], reply: @escaping (RedisReply?) -> Void) {
        guard let context, !finished else { return reply(nil) }
        let box = Unmanaged.passRetained(ReplyBox(reply)).toOpaque()
        let status = withArgv(arguments) { argc, argv, argvlen in
            redisAsyncCommandArgv(context, { _, reply, data in
                guard let data else { return }
                let box = Unmanaged<ReplyBox>.fromOpaque(data).takeRetainedValue()
                box.body(reply.map { RedisReply($0.assumingMemoryBound(to: redisReply.self)) })
            }, box, argc, argv, argvlen)
        }
        if status != REDIS_OK {
            Unmanaged<ReplyBox>.fromOpaque(box).release()
            reply(nil)
        }
    }

    /// Subscribes to `channel`: `subscribed` once Redis confirms, `message` with each message's text.
    /// Only SUBSCRIBE may be sent on this connection afterwards (Redis's rule).
    func subscribe(_ channel: String, subscribed: @escaping () -> Void, message: @escaping (String) -> Void) {
        guard let context, !finished else { return }
        // hiredis calls a subscription's callback for every message: the box lives as long as we do.
        let box = SubscriptionBox(subscribed: subscribed, message: message)
        subscriptions.append(box)
        _ = withArgv(["SUBSCRIBE", channel]) { argc, argv, argvlen in
            redisAsyncCommandArgv(context, { _, reply, data in
                guard let data, let reply else { return }
                let box = Unmanaged<SubscriptionBox>.fromOpaque(data).takeUnretainedValue()
                guard case .array(let parts) = RedisReply(reply.assumingMemoryBound(to: redisReply.self)), parts.count == 3,
                      case .string(let kind) = parts[0] else { return }
                if kind == "subscribe" { box.subscribed() }
                if kind == "message", case .string(let text) = parts[2] { box.message(text) }
            }, Unmanaged.passUnretained(box).toOpaque(), argc, argv, argvlen)
        }
    }

    /// Closes the connection now (pending replies get nil; `onClosed` is not called).
    func close() {
        onClosed = nil
        onOpen = nil
        guard let context, !finished else { return releaseSource() }
        finished = true
        self.context = nil
        // Inside one of this connection's own callbacks hiredis frees the context (and calls the
        // adapter's cleanup) once the callback returns: the source must outlive that.
        let inCallback = context.pointee.c.flags & REDIS_IN_CALLBACK != 0
        redisAsyncFree(context)
        if inCallback { return releaseSource() }
        // Freed now: the source goes at once, before the loop can dispatch it (it may have polled
        // readable in this very iteration) to a context that no longer exists.
        if let source {
            self.source = nil
            g_source_destroy(source)
            g_source_unref(source)
        }
    }

    private func lost(_ reason: String) {
        guard !finished else { return }
        finished = true
        isOpen = false
        context = nil // hiredis frees it after this callback
        let closed = onClosed
        onClosed = nil
        onOpen = nil
        releaseSource()
        closed?(reason)
    }

    /// Detaches the GLib source once hiredis is done with it: hiredis still calls the adapter's
    /// cleanup (which reads the source's context) after our callbacks, so the source is destroyed
    /// and released from the loop's next iteration, not from inside them.
    private func releaseSource() {
        guard let source else { return }
        self.source = nil
        let idle = g_idle_source_new()
        g_source_set_callback(idle, { data in
            guard let data else { return 0 }
            let source = data.assumingMemoryBound(to: GSource.self)
            g_source_destroy(source)
            g_source_unref(source)
            return 0
        }, UnsafeMutableRawPointer(source), nil)
        g_source_attach(idle, g_main_context_get_thread_default())
        g_source_unref(idle)
    }
}

private final class ReplyBox {
    let body: (RedisReply?) -> Void
    init(_ body: @escaping (RedisReply?) -> Void) { self.body = body }
}

private final class SubscriptionBox {
    let subscribed: () -> Void
    let message: (String) -> Void
    init(subscribed: @escaping () -> Void, message: @escaping (String) -> Void) { self.subscribed = subscribed; self.message = message }
}

/// A blocking connection for one exchange before the server starts (hiredis's synchronous API,
/// with a timeout): whether Redis answers, and whether it takes this node.
enum RedisOnce {
    /// Runs one command at `host:port` within `timeout` seconds.
    static func command(host: String, port: Int, timeout: TimeInterval, _ arguments: [String]) throws -> RedisReply {
        let tv = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - timeout.rounded(.down)) * 1_000_000))
        guard let context = redisConnectWithTimeout(host, Int32(port), tv) else {
            throw RedisError(description: "cannot start a connection to Redis at \(host):\(port)")
        }
        defer { redisFree(context) }
        func reason() -> String {
            withUnsafeBytes(of: &context.pointee.errstr) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        }
        if context.pointee.err != 0 {
            throw RedisError(description: "cannot connect to Redis at \(host):\(port): \(reason())")
        }
        redisSetTimeout(context, tv)
        let raw = withArgv(arguments) { argc, argv, argvlen in redisCommandArgv(context, argc, argv, argvlen) }
        guard let raw else {
            throw RedisError(description: "Redis at \(host):\(port) did not answer: \(reason())")
        }
        defer { freeReplyObject(raw) }
        return RedisReply(raw.assumingMemoryBound(to: redisReply.self))
    }
}
