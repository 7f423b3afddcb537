import Dispatch
import Foundation
import Synchronization
import VeilCore
#if canImport(Glibc)
import Glibc
#endif

/// A process the benchmark starts and measures (`veil serve`, redis-server, haproxy): its output
/// read line by line as it comes, its memory, CPU, threads and descriptors read from /proc, and
/// `stop()` (or `deinit`) to end it: SIGTERM, then SIGKILL if it has not exited within 5 s.
///
/// `@unchecked Sendable`: what the output threads see goes through the `line` closure the caller
/// gives; the rest is set in `init` and used from the benchmark's thread only.
final class ChildProcess: @unchecked Sendable {
    /// Which of the child's outputs a line came from.
    enum Stream: Sendable { case output, error }

    /// What the command was called, for messages (`node1`, `redis-server`).
    let name: String
    private let process = Process()
    private let exited = DispatchSemaphore(value: 0)
    private var stopped: String?

    /// Starts `executable arguments` with `environment` added to this process's own (an empty value
    /// removes a variable). `line` gets each line of its output as it comes, on a thread of its own
    /// per stream; `ended` once both streams reached their end (the child exited).
    init(name: String, executable: URL, arguments: [String], environment: [String: String] = [:],
         directory: URL? = nil, line: @escaping @Sendable (Stream, String) -> Void,
         ended: @escaping @Sendable () -> Void = {}) throws {
        self.name = name
        process.executableURL = executable
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }.filter { !$0.value.isEmpty }
        if let directory { process.currentDirectoryURL = directory }
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        process.standardInput = FileHandle(forReadingAtPath: "/dev/null")
        let exited = self.exited
        process.terminationHandler = { _ in exited.signal() }
        do { try process.run() } catch {
            throw VeilError.io("cannot start \(executable.path): \(error.localizedDescription)")
        }
        // Both pipes are drained on threads of their own (blocking reads), or the child would block on a full pipe.
        let open = Mutex(2)
        let streamEnded: @Sendable () -> Void = { if open.withLock({ $0 -= 1; return $0 }) == 0 { ended() } }
        Self.readLines(output.fileHandleForReading, name: "veil-bench-\(name)-out", line: { line(.output, $0) }, ended: streamEnded)
        Self.readLines(errors.fileHandleForReading, name: "veil-bench-\(name)-err", line: { line(.error, $0) }, ended: streamEnded)
    }

    deinit { stop() }

    /// Reads `handle` line by line on a thread of its own (named `name`) until end of file, then
    /// calls `ended`: a child's output, or Chromium's log (`ChromiumProcess`).
    static func readLines(_ handle: FileHandle, name: String, line: @escaping @Sendable (String) -> Void,
                          ended: @escaping @Sendable () -> Void) {
        let fd = handle.fileDescriptor
        let thread = Thread {
            withExtendedLifetime(handle) {
                var pending: [UInt8] = []
                var buffer = [UInt8](repeating: 0, count: 65536)
                while true {
                    let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                    if count < 0 && errno == EINTR { continue }
                    guard count > 0 else { break }
                    pending.append(contentsOf: buffer[0..<count])
                    while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                        line(String(decoding: pending[..<newline], as: UTF8.self))
                        pending.removeSubrange(...newline)
                    }
                }
                if !pending.isEmpty { line(String(decoding: pending, as: UTF8.self)) }
                ended()
            }
        }
        thread.name = name
        thread.start()
    }

    var isRunning: Bool { process.isRunning }
    var pid: Int32 { process.processIdentifier }

    /// Ends the child (`signal`, SIGTERM by default, then SIGKILL after 5 s) and says how it ended;
    /// safe to call again.
    @discardableResult
    func stop(signal: Int32 = SIGTERM) -> String {
        if let stopped { return stopped }
        var how: String
        if process.isRunning {
            kill(pid, signal)
            if exited.wait(timeout: .now() + 5) == .timedOut {
                kill(pid, SIGKILL)
                _ = exited.wait(timeout: .now() + 2)
                how = "killed (no exit within 5 s of signal \(signal))"
            } else {
                how = Self.describe(process)
            }
        } else if process.processIdentifier != 0 {
            _ = exited.wait(timeout: .now() + 2)
            how = "had already ended: " + Self.describe(process)
        } else {
            how = "never started"
        }
        stopped = how
        return how
    }

    private static func describe(_ process: Process) -> String {
        guard !process.isRunning else { return "still running" }
        switch process.terminationReason {
        case .exit: return process.terminationStatus == 0 ? "clean" : "exit status \(process.terminationStatus)"
        case .uncaughtSignal: return "killed by signal \(process.terminationStatus)"
        @unknown default: return "ended"
        }
    }

    /// VmRSS in KiB.
    func residentKiB() -> Int? { Self.residentKiB(of: pid) }

    /// VmRSS of process `pid` in KiB.
    static func residentKiB(of pid: Int32) -> Int? { statusField("VmRSS:", of: pid) }

    /// The number of threads.
    func threads() -> Int? { Self.statusField("Threads:", of: pid) }

    /// Its open file descriptors (sockets included).
    func openFileCount() -> Int? {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")).map(\.count)
    }

    /// Waits (reading /proc every 20 ms: another process offers nothing to wait on) until the
    /// child has at most `limit` descriptors open, or `timeout` passes; returns the last count.
    func waitForOpenFiles(atMost limit: Int?, timeout: TimeInterval) -> Int? {
        let deadline = Date().addingTimeInterval(timeout)
        var count = openFileCount()
        while let now = count, now > (limit ?? 0), Date() < deadline, isRunning {
            Thread.sleep(forTimeInterval: 0.02)
            count = openFileCount()
        }
        return count
    }

    private static func statusField(_ name: String, of pid: Int32) -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix(name) {
            return line.dropFirst(name.count).split(whereSeparator: { $0 == " " || $0 == "\t" }).first.flatMap { Int($0) }
        }
        return nil
    }

    /// User and system CPU seconds so far (empty when /proc cannot say).
    func cpuSeconds() -> [Double] { Self.cpuSeconds(of: pid) }

    /// User and system CPU seconds of process `pid` so far (empty when /proc cannot say).
    static func cpuSeconds(of pid: Int32) -> [Double] {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = text.lastIndex(of: ")") else { return [] }
        // After "pid (comm)": state is field 3, utime 14 and stime 15.
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return [] }
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        return ticks > 0 ? [user / ticks, system / ticks] : []
    }

    /// `Max open files` (soft hard) from /proc/PID/limits.
    func openFileLimit() -> String? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/limits", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("Max open files") {
            let words = line.dropFirst("Max open files".count).split(separator: " ")
            if words.count >= 2 { return "\(words[0]) (hard \(words[1]))" }
        }
        return nil
    }

    /// The first directory of `$PATH`, then of `directories`, that holds an executable `name`.
    static func find(_ name: String, in directories: [String] = ["/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin"]) -> URL? {
        let path = (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map(String.init)
        for directory in path + directories {
            let url = URL(fileURLWithPath: directory).appendingPathComponent(name)
            if FileManager.default.isExecutableFile(atPath: url.path) { return url }
        }
        return nil
    }
}
