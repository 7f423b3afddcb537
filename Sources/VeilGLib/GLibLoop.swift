import CGLib
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A GLib main context running on a thread of its own. Everything that belongs to GLib's world
/// (libsoup sessions and servers, webrtcbin negotiation, timers) is created and touched inside
/// `perform` / `sync`, on this thread; callbacks from GStreamer's streaming threads hop here too.
///
/// `@unchecked Sendable`: the only mutable state is the GMainContext/GMainLoop pair, which GLib
/// makes safe to wake and invoke from any thread; everything else is immutable after `init`.
public final class GLibLoop: @unchecked Sendable {
    private let context: OpaquePointer
    private let loop: OpaquePointer
    private let thread: Thread
    private let started = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)
    private let stopped = Mutex(false)

    /// Starts a new context and runs it on a new thread named `name`.
    public init(name: String) {
        context = g_main_context_new()
        loop = g_main_loop_new(context, 0)
        let context = self.context, loop = self.loop
        let started = self.started, finished = self.finished
        let threadName = String(name.utf8.prefix(15)) ?? "glib-loop" // the kernel keeps 15 bytes
        thread = Thread {
            // Foundation on Linux does not hand a thread's name to the kernel; this is the one
            // `top -H` and /proc/<pid>/task/*/comm show (pthread_setname_np is not in Swift's Glibc).
            if let comm = fopen("/proc/thread-self/comm", "w") { fputs(threadName, comm); fclose(comm) }
            g_main_context_push_thread_default(context)
            // Signal from inside the running loop (an idle source is only dispatched by it).
            let idle = g_idle_source_new()
            let box = Unmanaged.passRetained(CallbackBox { started.signal() }).toOpaque()
            g_source_set_callback(idle, { data in
                Unmanaged<CallbackBox>.fromOpaque(data!).takeUnretainedValue().body()
                return 0
            }, box, { data in Unmanaged<CallbackBox>.fromOpaque(data!).release() })
            g_source_attach(idle, context)
            g_source_unref(idle)
            g_main_loop_run(loop)
            g_main_context_pop_thread_default(context)
            finished.signal()
        }
        thread.name = name
        thread.start()
        started.wait()
    }

    deinit {
        stop()
        g_main_loop_unref(loop)
        g_main_context_unref(context)
    }

    /// Stops the loop and waits for its thread to end (not when called from the loop itself).
    /// Pending work is dropped. Calling it again does nothing.
    public func stop() {
        let first = stopped.withLock { wasStopped -> Bool in
            defer { wasStopped = true }
            return !wasStopped
        }
        guard first else { return }
        if isCurrent {
            g_main_loop_quit(loop)
            return
        }
        // Quit from inside the loop: a quit that lands before g_main_loop_run starts is lost.
        let loop = UncheckedLoop(loop: self.loop)
        perform { g_main_loop_quit(loop.loop) }
        _ = finished.wait(timeout: .now() + 5)
    }

    /// Whether the caller runs on this loop's thread.
    public var isCurrent: Bool { g_main_context_is_owner(context) != 0 }

    /// Runs `body` on the loop's thread, soon.
    public func perform(_ body: @escaping @Sendable () -> Void) {
        let box = Unmanaged.passRetained(CallbackBox(body)).toOpaque()
        g_main_context_invoke_full(context, G_PRIORITY_DEFAULT, { data in
            Unmanaged<CallbackBox>.fromOpaque(data!).takeUnretainedValue().body()
            return 0 // G_SOURCE_REMOVE
        }, box, { data in Unmanaged<CallbackBox>.fromOpaque(data!).release() })
    }

    /// Runs `body` on the loop's thread and waits for its result (directly when already there).
    public func sync<T>(_ body: @escaping @Sendable () throws -> T) throws -> T {
        if isCurrent { return try body() }
        let result = Mutex<Result<T, Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        perform {
            let r = Result { try body() }
            result.withLock { $0 = r }
            done.signal()
        }
        done.wait()
        return try result.withLock { $0 }!.get()
    }

    /// Calls `body` on the loop's thread every `milliseconds` until it returns false or the
    /// returned timer is cancelled.
    @discardableResult
    public func every(milliseconds: UInt32, _ body: @escaping @Sendable () -> Bool) -> GLibTimer {
        schedule(milliseconds: milliseconds, repeating: true, body)
    }

    /// Calls `body` once on the loop's thread after `milliseconds`.
    @discardableResult
    public func after(milliseconds: UInt32, _ body: @escaping @Sendable () -> Void) -> GLibTimer {
        schedule(milliseconds: milliseconds, repeating: false) { body(); return false }
    }

    private func schedule(milliseconds: UInt32, repeating: Bool, _ body: @escaping @Sendable () -> Bool) -> GLibTimer {
        let source = g_timeout_source_new(milliseconds)!
        let box = Unmanaged.passRetained(SourceCallback(body)).toOpaque()
        g_source_set_callback(source, { data in
            Unmanaged<SourceCallback>.fromOpaque(data!).takeUnretainedValue().body() ? 1 : 0
        }, box, { data in Unmanaged<SourceCallback>.fromOpaque(data!).release() })
        g_source_attach(source, context)
        return GLibTimer(source: source)
    }
}

/// A timer on a `GLibLoop`; `cancel()` stops it (also safe after it has fired).
public final class GLibTimer: @unchecked Sendable {
    // GSource is reference-counted and g_source_destroy is thread-safe.
    private let source: UnsafeMutablePointer<GSource>
    init(source: UnsafeMutablePointer<GSource>) { self.source = source }
    deinit { g_source_unref(source) }
    public func cancel() { g_source_destroy(source) }
}

/// The GMainLoop handed to a callback on its own thread.
private struct UncheckedLoop: @unchecked Sendable { let loop: OpaquePointer }

private final class CallbackBox {
    let body: @Sendable () -> Void
    init(_ body: @escaping @Sendable () -> Void) { self.body = body }
}
