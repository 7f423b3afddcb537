import CGLib
import Foundation

/// A Swift value carried through a C `gpointer user_data`, released by GLib's destroy notify.
final class SignalBox<T> {
    let value: T
    init(_ value: T) { self.value = value }
}

private let releaseClosure: GClosureNotify = { data, _ in
    if let data { Unmanaged<AnyObject>.fromOpaque(data).release() }
}

@inline(__always) private func unboxed<T>(_ data: gpointer?) -> T? {
    guard let data else { return nil }
    return Unmanaged<SignalBox<T>>.fromOpaque(data).takeUnretainedValue().value
}

/// Connects Swift closures to GObject signals, one trampoline per C signature. The closure is
/// retained by the connection and released when GLib drops the handler (disconnect or object
/// finalisation). Callbacks arrive on whatever thread emits the signal.
public enum GSignal {
    /// `void (*)(GObject *self, gpointer user_data)`
    @discardableResult
    public static func connect(_ object: gpointer, _ signal: String, _ body: @escaping () -> Void) -> UInt {
        typealias F = () -> Void
        let trampoline: @convention(c) (gpointer?, gpointer?) -> Void = { _, data in (unboxed(data) as F?)?() }
        return UInt(g_signal_connect_data(object, signal, unsafeBitCast(trampoline, to: GCallback.self),
                                          Unmanaged.passRetained(SignalBox(body as F)).toOpaque(), releaseClosure,
                                          GConnectFlags(rawValue: 0)))
    }

    /// `void (*)(GObject *self, gpointer argument, gpointer user_data)`
    @discardableResult
    public static func connect(_ object: gpointer, _ signal: String, _ body: @escaping (gpointer?) -> Void) -> UInt {
        typealias F = (gpointer?) -> Void
        let trampoline: @convention(c) (gpointer?, gpointer?, gpointer?) -> Void = { _, argument, data in
            (unboxed(data) as F?)?(argument)
        }
        return UInt(g_signal_connect_data(object, signal, unsafeBitCast(trampoline, to: GCallback.self),
                                          Unmanaged.passRetained(SignalBox(body as F)).toOpaque(), releaseClosure,
                                          GConnectFlags(rawValue: 0)))
    }

    /// `void (*)(GObject *self, guint number, gchar *text, gpointer user_data)` (webrtcbin's on-ice-candidate)
    @discardableResult
    public static func connect(_ object: gpointer, _ signal: String, _ body: @escaping (UInt32, String) -> Void) -> UInt {
        typealias F = (UInt32, String) -> Void
        let trampoline: @convention(c) (gpointer?, guint, UnsafePointer<gchar>?, gpointer?) -> Void = { _, number, text, data in
            (unboxed(data) as F?)?(number, text.map { String(cString: $0) } ?? "")
        }
        return UInt(g_signal_connect_data(object, signal, unsafeBitCast(trampoline, to: GCallback.self),
                                          Unmanaged.passRetained(SignalBox(body as F)).toOpaque(), releaseClosure,
                                          GConnectFlags(rawValue: 0)))
    }

    /// `void (*)(GObject *self, gint number, gpointer argument, gpointer user_data)` (e.g. a
    /// WebSocket's "message": type and GBytes)
    @discardableResult
    public static func connect(_ object: gpointer, _ signal: String, _ body: @escaping (Int32, gpointer?) -> Void) -> UInt {
        typealias F = (Int32, gpointer?) -> Void
        let trampoline: @convention(c) (gpointer?, gint, gpointer?, gpointer?) -> Void = { _, number, argument, data in
            (unboxed(data) as F?)?(number, argument)
        }
        return UInt(g_signal_connect_data(object, signal, unsafeBitCast(trampoline, to: GCallback.self),
                                          Unmanaged.passRetained(SignalBox(body as F)).toOpaque(), releaseClosure,
                                          GConnectFlags(rawValue: 0)))
    }

    /// `gboolean (*)(GObject *self, gpointer argument, guint flags, gpointer user_data)` (e.g. a
    /// SoupMessage's "accept-certificate": the certificate and its `GTlsCertificateFlags`)
    @discardableResult
    public static func connect(_ object: gpointer, _ signal: String, _ body: @escaping (gpointer?, UInt32) -> Bool) -> UInt {
        typealias F = (gpointer?, UInt32) -> Bool
        let trampoline: @convention(c) (gpointer?, gpointer?, guint, gpointer?) -> gboolean = { _, argument, flags, data in
            (unboxed(data) as F?)?(argument, flags) == true ? 1 : 0
        }
        return UInt(g_signal_connect_data(object, signal, unsafeBitCast(trampoline, to: GCallback.self),
                                          Unmanaged.passRetained(SignalBox(body as F)).toOpaque(), releaseClosure,
                                          GConnectFlags(rawValue: 0)))
    }

    /// Disconnects a handler returned by `connect`.
    public static func disconnect(_ object: gpointer, _ handler: UInt) {
        g_signal_handler_disconnect(object, gulong(handler))
    }
}

/// An error reported by GLib or a library built on it, with its domain and code.
public struct GLibError: Error, CustomStringConvertible, Sendable {
    public let domain: String
    public let code: Int32
    public let message: String
    public var description: String { message }

    /// Converts and frees `error` (nil gives a generic error naming `what`).
    public init(consuming error: UnsafeMutablePointer<GError>?, what: String) {
        if let error {
            domain = g_quark_to_string(error.pointee.domain).map { String(cString: $0) } ?? "?"
            code = error.pointee.code
            message = "\(what): " + (error.pointee.message.map { String(cString: $0) } ?? "unknown error")
            g_error_free(error)
        } else {
            domain = "veil"; code = 0; message = "\(what) failed"
        }
    }
}

/// GLib's GBytes contents as Swift bytes.
public func bytes(of gbytes: OpaquePointer?) -> [UInt8] {
    guard let gbytes else { return [] }
    var size: gsize = 0
    guard let data = g_bytes_get_data(gbytes, &size), size > 0 else { return [] }
    return Array(UnsafeRawBufferPointer(start: data, count: Int(size)))
}
