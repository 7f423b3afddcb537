import Foundation
import XCTest

/// Programs a test starts: the executables built beside the tests (`veil`) and the system's tools,
/// run to their end (`run`) or left running with their output collected as it comes (`ChildProcess`).
public enum TestProgram {
    /// The executable `name` built next to the test bundle (in `.build/<configuration>/`), nil when it is not built.
    public static func built(_ name: String) -> URL? {
        var directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = directory.appendingPathComponent(name)
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
            directory = directory.deletingLastPathComponent()
        }
        return nil
    }

    /// The `veil` executable built next to the tests; skips the test when it is not built.
    public static var veil: URL {
        get throws {
            guard let veil = built("veil") else { throw XCTSkip("the veil executable is not built next to the tests (run `make test`)") }
            return veil
        }
    }

    /// What a program left when it ended: its exit status, and what it wrote.
    public struct Run: Sendable {
        /// The exit status (or the signal that ended it).
        public var status: Int32
        /// Its standard output.
        public var stdout: String
        /// Its standard error.
        public var stderr: String
    }

    /// `executable arguments` in `directory` (the test's own when nil), not started; its environment
    /// is the test's with `environment` applied: a value sets a variable, nil removes it.
    public static func process(_ executable: URL, _ arguments: [String], in directory: URL? = nil,
                               environment: [String: String?] = [:]) -> Process {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        if let directory { process.currentDirectoryURL = directory }
        if !environment.isEmpty {
            var merged = ProcessInfo.processInfo.environment
            for (name, value) in environment { merged[name] = value }
            process.environment = merged
        }
        return process
    }

    /// Runs `executable arguments` to its end (see `process` for `directory` and `environment`).
    public static func run(_ executable: URL, _ arguments: [String], in directory: URL? = nil,
                           environment: [String: String?] = [:]) throws -> Run {
        try run(process(executable, arguments, in: directory, environment: environment))
    }

    /// Runs `process` (set up, not started) to its end. Its standard output and error are read at
    /// the same time, so that neither pipe fills and stalls it.
    public static func run(_ process: Process) throws -> Run {
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let errors = ChildProcess.Collector()
        let reader = Thread { errors.read(err.fileHandleForReading) }
        reader.start()
        let output = out.fileHandleForReading.readDataToEndOfFile()
        errors.waitForEnd()
        process.waitUntilExit()
        return Run(status: process.terminationStatus, stdout: String(decoding: output, as: UTF8.self), stderr: errors.text)
    }
}

/// A program left running by a test, its standard output (and error, unless told otherwise)
/// collected as it comes; `wait(timeout:for:)` blocks until the output says what the test waits for.
public final class ChildProcess: Sendable {
    /// What the test calls it (in messages).
    public let name: String
    /// The running process (to signal it, or wait for its end).
    public let process: Process
    private let output = Collector()

    /// Starts `executable arguments` in `directory` (see `TestProgram.process` for `environment`);
    /// its standard error is collected with its output unless `standardError` is false (then dropped).
    public init(name: String, executable: URL, arguments: [String], directory: URL? = nil,
                environment: [String: String?] = [:], standardError: Bool = true) throws {
        self.name = name
        process = TestProgram.process(executable, arguments, in: directory, environment: environment)
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = standardError ? pipe : FileHandle.nullDevice
        pipe.fileHandleForReading.readabilityHandler = { [output] handle in
            let data = handle.availableData
            if data.isEmpty { handle.readabilityHandler = nil }
            output.append(data)
        }
        try process.run()
    }

    /// The output so far.
    public var text: String { output.text }

    /// The complete lines of the output so far.
    public var lines: [String] { output.lines }

    /// The JSON objects among the output's lines (`veil … --json`'s events).
    public var events: [[String: Any]] {
        lines.compactMap { line in
            guard line.hasPrefix("{") else { return nil }
            return (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
        }
    }

    /// Waits up to `timeout` for `predicate` to hold of the output so far (it is tried again as
    /// output arrives, and once more when the output ends); whether it does.
    public func wait(timeout: TimeInterval, for predicate: (String) -> Bool) -> Bool {
        output.wait(until: Date().addingTimeInterval(timeout)) { text, _ in predicate(text) ? true : nil } ?? false
    }

    /// The first complete line of the output that matches `match`, waiting up to `timeout` for it.
    public func line(timeout: TimeInterval, where match: (String) -> Bool) -> String? {
        output.wait(until: Date().addingTimeInterval(timeout)) { _, lines in lines.first(where: match) }
    }

    /// Ends the program (SIGTERM) if it still runs, and waits for its end.
    public func stop() {
        guard process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
    }

    /// Output gathered from a pipe on another thread; readers wait on its condition.
    final class Collector: @unchecked Sendable { // every field under `condition`
        private let condition = NSCondition()
        private var data = Data()
        private var ended = false

        /// Adds what was read; empty data means the pipe has closed.
        func append(_ chunk: Data) {
            condition.lock()
            if chunk.isEmpty { ended = true } else { data.append(chunk) }
            condition.broadcast()
            condition.unlock()
        }

        /// Reads `handle` to its end (on the calling thread).
        func read(_ handle: FileHandle) {
            while true {
                let chunk = handle.availableData
                append(chunk)
                if chunk.isEmpty { return }
            }
        }

        var text: String {
            condition.lock()
            defer { condition.unlock() }
            return String(decoding: data, as: UTF8.self)
        }

        var lines: [String] { Self.lines(of: text) }

        func waitForEnd() {
            condition.lock()
            defer { condition.unlock() }
            while !ended { condition.wait() }
        }

        /// The first non-nil answer of `look` at the text and its complete lines so far, waiting
        /// until `deadline` for output that gives one (or for the pipe to close). `look` runs
        /// outside the lock: it may read the child's output itself.
        func wait<T>(until deadline: Date, _ look: (String, [String]) -> T?) -> T? {
            while true {
                condition.lock()
                let (seen, over) = (data, ended)
                condition.unlock()
                let text = String(decoding: seen, as: UTF8.self)
                if let found = look(text, Self.lines(of: text)) { return found }
                if over { return nil }
                condition.lock()
                var timedOut = false
                while data.count == seen.count, !ended, !timedOut { timedOut = !condition.wait(until: deadline) }
                condition.unlock()
                if timedOut {
                    let text = self.text
                    return look(text, Self.lines(of: text))
                }
            }
        }

        private static func lines(of text: String) -> [String] {
            text.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init)
        }
    }
}
