import Foundation
import Synchronization

/// The thread an `ExpressionSource` delivers from, and its lifetime: started once, asked to stop,
/// waited for. The loop it runs checks `isRunning` between frames (and should not sleep long
/// without doing so); `stop()` clears it and waits for the loop to return.
///
/// `@unchecked Sendable`: `thread` is set and read only by the owner's thread (`start`, `stop`);
/// what the loop's thread reads sits behind a `Mutex`.
public final class ExpressionSourceThread: @unchecked Sendable {
    /// The thread's name (`veil-capture`), as debuggers and `top -H` show it.
    public let name: String
    /// Longest `stop()` waits for the loop to return; nil: as long as it takes.
    public let stopTimeout: TimeInterval?
    private let running = Mutex(false)
    private let finished = DispatchSemaphore(value: 0)
    private var thread: Thread?

    /// A thread named `name`, not started yet.
    public init(name: String, stopTimeout: TimeInterval? = nil) {
        self.name = name
        self.stopTimeout = stopTimeout
    }

    /// Whether the loop should go on: true from `start` until `stop`.
    public var isRunning: Bool { running.withLock { $0 } }

    /// Runs `loop` on the thread; calls after the first do nothing. The loop returns when
    /// `isRunning` turns false, or earlier when its input ends.
    public func start(_ loop: @escaping @Sendable () -> Void) {
        guard thread == nil else { return }
        running.withLock { $0 = true }
        let thread = Thread { [finished] in
            loop()
            finished.signal()
        }
        thread.name = name
        self.thread = thread
        thread.start()
    }

    /// Clears `isRunning` and waits for the loop to return (at most `stopTimeout`). Idempotent.
    /// Returns false only when the wait timed out.
    @discardableResult
    public func stop() -> Bool {
        let wasRunning = running.withLock { r -> Bool in defer { r = false }; return r }
        guard wasRunning, thread != nil else { return true }
        guard let stopTimeout else { finished.wait(); return true }
        return finished.wait(timeout: .now() + stopTimeout) == .success
    }
}
