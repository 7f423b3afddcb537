import CGLib

/// A GLib event source (a socket's or a stream's readiness, a timeout) attached to the calling
/// thread's default main context and dispatching to a Swift closure until the closure returns
/// false, `cancel()` is called, or the owner lets go of it.
///
/// Used on the thread whose main context it is attached to: sources are how a loop-confined
/// object (the room server's connections, its listening socket) hears that it can read or write.
public final class GLibSource {
    /// The C signature GLib calls the source's callback with.
    public enum Signature {
        /// `GSourceFunc`: timeouts and idle sources.
        case plain
        /// `GPollableSourceFunc` (stream, user data): `g_pollable_input_stream_create_source` and the output twin.
        case pollable
        /// `GSocketSourceFunc` (socket, condition, user data): `g_socket_create_source`.
        case socket
    }

    private let source: UnsafeMutablePointer<GSource>
    private var cancelled = false

    /// Takes over `source` (a new reference, as the `…_create_source` functions return), sets
    /// `body` as its callback and attaches it to the thread-default main context.
    public init(_ source: UnsafeMutablePointer<GSource>, signature: Signature, _ body: @escaping () -> Bool) {
        self.source = source
        let box = Unmanaged.passRetained(SourceCallback(body)).toOpaque()
        let callback: GSourceFunc
        switch signature {
        case .plain:
            callback = { data in
                guard let data else { return 0 }
                return Unmanaged<SourceCallback>.fromOpaque(data).takeUnretainedValue().body() ? 1 : 0
            }
        case .pollable:
            let pollable: @convention(c) (gpointer?, gpointer?) -> gboolean = { _, data in
                guard let data else { return 0 }
                return Unmanaged<SourceCallback>.fromOpaque(data).takeUnretainedValue().body() ? 1 : 0
            }
            callback = unsafeBitCast(pollable, to: GSourceFunc.self)
        case .socket:
            let socket: @convention(c) (gpointer?, UInt32, gpointer?) -> gboolean = { _, _, data in
                guard let data else { return 0 }
                return Unmanaged<SourceCallback>.fromOpaque(data).takeUnretainedValue().body() ? 1 : 0
            }
            callback = unsafeBitCast(socket, to: GSourceFunc.self)
        }
        g_source_set_callback(source, callback, box) { data in
            if let data { Unmanaged<SourceCallback>.fromOpaque(data).release() }
        }
        g_source_attach(source, g_main_context_get_thread_default())
    }

    /// A timeout source: `body` runs after `milliseconds`, and again every `milliseconds` while it returns true.
    public convenience init(milliseconds: UInt32, _ body: @escaping () -> Bool) {
        self.init(g_timeout_source_new(milliseconds), signature: .plain, body)
    }

    deinit {
        cancel()
        g_source_unref(source)
    }

    /// Detaches the source (its closure is released by GLib); calling it again does nothing.
    public func cancel() {
        guard !cancelled else { return }
        cancelled = true
        g_source_destroy(source)
    }
}

/// A closure carried through a GSource's user data (`GLibSource`, and `GLibLoop`'s timers).
final class SourceCallback {
    let body: () -> Bool
    init(_ body: @escaping () -> Bool) { self.body = body }
}
