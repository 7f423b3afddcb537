import Foundation
import VeilCore
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// A participant's process dies without a word (`kill -9`): the other `veil call`, through a real
/// `veil serve`, reports them as left with reason `timeout` within 5 s.
final class KilledParticipantTests: XCTestCase {
    func testAKilledCallIsReportedAsTimeoutWithinFiveSeconds() throws {
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("veil-kill-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: work) }
        func process(_ args: [String]) throws -> (Process, LineCollector) {
            let p = try VeilCommandTests.process(args, in: work, headless: true)
            let out = Pipe()
            p.standardOutput = out
            p.standardError = out
            return (p, LineCollector(out.fileHandleForReading))
        }
        let secret = work.appendingPathComponent("secret").path

        let (server, serverLines) = try process(["serve", "--port", "0", "--secret-file", secret])
        try server.run()
        defer { if server.isRunning { server.terminate() }; server.waitUntilExit() }
        let listen = try XCTUnwrap(serverLines.wait(for: { $0.contains("listen url=ws://") }, timeout: 10), "\(serverLines.all)")
        let url = try XCTUnwrap(listen.split(separator: " ").first { $0.hasPrefix("url=") }).dropFirst(4)

        func token(_ user: String) throws -> String {
            let (p, lines) = try process(["token", "--room", "r1", "--user", user, "--ttl", "5m", "--secret-file", secret])
            try p.run()
            p.waitUntilExit()
            return try XCTUnwrap(lines.wait(for: { $0.hasPrefix("v1.") }, timeout: 5))
        }
        func call(_ user: String) throws -> (Process, LineCollector) {
            let (p, lines) = try process(["call", "--server", String(url), "--room", "r1", "--user", user, "--token", try token(user),
                                      "--audio-in", "tone", "--audio-out", "none", "--out", "none", "--duration", "40", "--json"])
            try p.run()
            return (p, lines)
        }
        let (alice, aliceLines) = try call("alice")
        defer { if alice.isRunning { alice.terminate() }; alice.waitUntilExit() }
        XCTAssertNotNil(aliceLines.wait(for: { $0.contains(#""event":"joined""#) }, timeout: 15), "\(aliceLines.all)")
        let (bob, bobLines) = try call("bob")
        defer { if bob.isRunning { bob.terminate() }; bob.waitUntilExit() }
        XCTAssertNotNil(aliceLines.wait(for: { $0.contains(#""event":"participantJoined""#) && $0.contains(#""user":"bob""#) }, timeout: 15),
                        "alice: \(aliceLines.all)\nbob: \(bobLines.all)")
        // Let the call settle (peer connection up, pings flowing), then kill bob outright.
        XCTAssertNotNil(bobLines.wait(for: { $0.contains(#""event":"statistics""#) }, timeout: 10), "\(bobLines.all)")

        let killedAt = Date()
        XCTAssertEqual(kill(bob.processIdentifier, SIGKILL), 0)
        let left = aliceLines.wait(for: { $0.contains(#""event":"participantLeft""#) }, timeout: 8)
        let elapsed = Date().timeIntervalSince(killedAt)
        let line = try XCTUnwrap(left, "alice never saw bob leave: \(aliceLines.all.suffix(5))")
        let event = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        XCTAssertEqual(event["user"] as? String, "bob")
        XCTAssertEqual(event["reason"] as? String, "timeout")
        XCTAssertLessThanOrEqual(elapsed, 5, "participantLeft(timeout) came \(elapsed) s after the kill")
        XCTAssertTrue(serverLines.all.contains { $0.contains("leave room=r1 user=bob reason=timeout") }
                      || serverLines.wait(for: { $0.contains("leave room=r1 user=bob reason=timeout") }, timeout: 1) != nil)
        print(String(format: "kill -9: alice saw participantLeft(bob, timeout) %.2f s after SIGKILL", elapsed))
        XCTAssertTrue(alice.isRunning, "alice carries on alone")
    }
}

/// Collects a child's output lines on a thread of its own; `wait(for:)` blocks until a matching line arrives.
private final class LineCollector: @unchecked Sendable {
    private let condition = NSCondition()
    private var lines: [String] = []
    private var partial = ""

    init(_ handle: FileHandle) {
        Thread.detachNewThread { [self] in
            while true {
                let data = handle.availableData
                if data.isEmpty { break }
                condition.lock()
                partial += String(decoding: data, as: UTF8.self)
                while let newline = partial.firstIndex(of: "\n") {
                    lines.append(String(partial[..<newline]))
                    partial = String(partial[partial.index(after: newline)...])
                }
                condition.broadcast()
                condition.unlock()
            }
        }
    }

    var all: [String] { condition.lock(); defer { condition.unlock() }; return lines }

    /// The first line (from the start) matching `match`, waiting up to `timeout`.
    func wait(for match: (String) -> Bool, timeout: TimeInterval) -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock()
        defer { condition.unlock() }
        while true {
            if let line = lines.first(where: match) { return line }
            if !condition.wait(until: deadline) { return lines.first(where: match) }
        }
    }
}
