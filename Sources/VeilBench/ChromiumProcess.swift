import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One headless chromium started on a page, whose stderr is read line by line on a thread of its
/// own: the page's console events (`ChromiumAnchor.PageEvent`) are handed over through a mailbox,
/// the rest of the log is kept as a short tail for error messages. `stop()` (or deinit) ends the
/// browser: SIGTERM, then SIGKILL to its process group, and waits until every process of it has
/// let go of stderr.
final class ChromiumProcess {
    /// What the reader thread hands to the driver.
    private final class Mailbox: Sendable {
        struct State {
            var events: [ChromiumAnchor.PageEvent] = []
            var exited = false
            /// The last lines of chromium's own log (D-Bus complaints left out: there is no bus here).
            var tail: [String] = []
        }
        let state = Mutex(State())
        /// Signalled at each event and at the end of stderr.
        let arrived = DispatchSemaphore(value: 0)
    }

    private let process = Process()
    private let mailbox = Mailbox()
    private let terminated = DispatchSemaphore(value: 0)
    private let readerFinished = DispatchSemaphore(value: 0)
    private var stopped = false

    /// Starts `executable` with `arguments`.
    init(executable: String, arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        let errors = Pipe()
        process.standardError = errors
        let terminated = self.terminated
        process.terminationHandler = { _ in terminated.signal() }
        do { try process.run() } catch {
            throw ChromiumAnchorError.browserFailed("cannot start \(executable): \(error.localizedDescription)")
        }
        // The child has its copy of the write end; ours must go, or the reader never sees the end.
        try? errors.fileHandleForWriting.close()
        Self.read(errors.fileHandleForReading, into: mailbox, finished: readerFinished)
    }

    deinit { stop() }

    /// The events that arrived since the last call, and whether chromium's stderr has ended
    /// (the browser exited).
    func takeEvents() -> (events: [ChromiumAnchor.PageEvent], exited: Bool) {
        mailbox.state.withLock { state in
            defer { state.events.removeAll() }
            return (state.events, state.exited)
        }
    }

    /// Blocks until an event arrives or until `seconds` have passed.
    func waitForEvents(seconds: Double) {
        _ = mailbox.arrived.wait(timeout: .now() + max(0, seconds))
    }

    /// The last lines chromium logged, for an error message.
    var logTail: String {
        mailbox.state.withLock { $0.tail.joined(separator: "\n") }
    }

    /// Ends the browser and waits (up to 10 s) until all its processes are gone. Safe to call again.
    func stop() {
        guard !stopped else { return }
        stopped = true
        let pid = process.processIdentifier
        if process.isRunning {
            process.terminate()
            if terminated.wait(timeout: .now() + 5) == .timedOut {
                kill(pid, SIGKILL)
                _ = terminated.wait(timeout: .now() + 2)
            }
        }
        // Renderer, GPU and audio processes hold stderr too: its end means they are all gone. Any
        // left over are in the browser's process group (Foundation makes the child a group leader).
        if readerFinished.wait(timeout: .now() + 3) == .timedOut, pid > 0 {
            kill(-pid, SIGKILL)
            _ = readerFinished.wait(timeout: .now() + 5)
        }
    }

    /// Reads `handle` line by line on a thread of its own until end of file.
    private static func read(_ handle: FileHandle, into mailbox: Mailbox, finished: DispatchSemaphore) {
        ChildProcess.readLines(handle, name: "veil-bench-chromium-log", line: { line in
            if let event = ChromiumAnchor.PageEvent(logLine: line) {
                mailbox.state.withLock { $0.events.append(event) }
                mailbox.arrived.signal()
            } else if !line.isEmpty, !line.contains("dbus") {
                mailbox.state.withLock { state in
                    state.tail.append(String(line.prefix(400)))
                    if state.tail.count > 12 { state.tail.removeFirst() }
                }
            }
        }, ended: {
            mailbox.state.withLock { $0.exited = true }
            mailbox.arrived.signal()
            finished.signal()
        })
    }
}
