import Foundation
import VeilTestSupport
import XCTest

/// A temporary directory in which a test runs `veil` programs without a display or sound server,
/// and the steps every call between programs takes: a spoken recording, `veil serve` on a free
/// port, tokens, and the calls' JSON lines.
struct CallWorkspace {
    let directory: URL

    /// A fresh directory named after `prefix`; `remove()` deletes it.
    init(_ prefix: String) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    func remove() { try? FileManager.default.removeItem(at: directory) }

    /// `veil args` in the directory, not yet running, with its standard output and error piped.
    func process(_ args: [String]) throws -> (Process, Pipe, Pipe) {
        let p = try VeilCommandTests.process(args, in: directory, headless: true)
        let out = Pipe(), err = Pipe()
        p.standardOutput = out; p.standardError = err
        return (p, out, err)
    }

    /// Runs `veil args` in the directory to its end.
    func run(_ args: [String]) throws -> TestProgram.Run {
        try TestProgram.run(VeilCommandTests.process(args, in: directory, headless: true))
    }

    /// Runs `veil args` to its end (it must succeed) and returns its standard output, trimmed.
    @discardableResult
    func runToEnd(_ args: [String], file: StaticString = #filePath, line: UInt = #line) throws -> String {
        let run = try run(args)
        XCTAssertEqual(run.status, 0, "veil \(args.joined(separator: " "))", file: file, line: line)
        return run.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// espeak-ng's recording of `text` (English, `wordsPerMinute`) as `name` in the directory.
    func speak(_ text: String, to name: String = "speech.wav", wordsPerMinute: Int = 150) throws {
        let espeak = try XCTUnwrap(["/usr/bin/espeak-ng", "/usr/local/bin/espeak-ng"].first { FileManager.default.isExecutableFile(atPath: $0) },
                                   "espeak-ng is not installed (scripts/bootstrap installs it)")
        let speak = try TestProgram.run(URL(fileURLWithPath: espeak),
                                        ["-v", "en", "-s", String(wordsPerMinute), "-w", directory.appendingPathComponent(name).path, text])
        XCTAssertEqual(speak.status, 0, "espeak-ng")
    }

    /// The secret file `veil serve` and `veil token` share.
    var secret: String { directory.appendingPathComponent("secret").path }

    /// `veil serve` on a free port with `arguments` added (the caller terminates it) and its
    /// WebSocket URL (ws:// or wss://), read from its standard error.
    func startServer(_ arguments: [String] = []) throws -> (server: Process, url: String) {
        let (server, _, serverErr) = try process(["serve", "--port", "0", "--secret-file", secret] + arguments)
        try server.run()
        var url: String?
        var log = ""
        let deadline = Date().addingTimeInterval(10)
        while url == nil, Date() < deadline {
            log += String(decoding: serverErr.fileHandleForReading.availableData, as: UTF8.self)
            url = log.split(separator: " ").first { $0.hasPrefix("ws://") || $0.hasPrefix("wss://") }.map { String($0).trimmingCharacters(in: CharacterSet(charactersIn: ";,\n")) }
        }
        do {
            return (server, try XCTUnwrap(url, "no URL from veil serve: \(log)"))
        } catch {
            server.terminate(); server.waitUntilExit()
            throw error
        }
    }

    /// Five-minute tokens for `users` in `room`.
    func tokens(_ users: [String], room: String) throws -> [String] {
        try users.map { try runToEnd(["token", "--room", room, "--user", $0, "--ttl", "5m", "--secret-file", secret]) }
    }

    /// Starts `calls` in order, `apart` seconds from one another (the first to join is the one
    /// the others connect to), waits for them all to end (each must succeed) and returns each
    /// one's standard output, in the order given.
    static func run(_ calls: [(Process, Pipe, Pipe)], apart: TimeInterval = 0.5, file: StaticString = #filePath,
                    line: UInt = #line) throws -> [String] {
        for (n, call) in calls.enumerated() {
            if n > 0 { Thread.sleep(forTimeInterval: apart) }
            try call.0.run()
        }
        return outputs(of: calls, file: file, line: line)
    }

    /// Waits for every running call to end (each must succeed) and returns each one's standard output.
    static func outputs(of calls: [(Process, Pipe, Pipe)], file: StaticString = #filePath, line: UInt = #line) -> [String] {
        calls.map { p, out, err in
            let data = out.fileHandleForReading.readDataToEndOfFile()
            let errText = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            p.waitUntilExit()
            XCTAssertEqual(p.terminationStatus, 0, errText, file: file, line: line)
            return String(decoding: data, as: UTF8.self)
        }
    }

    /// The JSON objects of `--json` output, one a line.
    static func events(_ output: String) -> [[String: Any]] {
        output.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
    }
}
