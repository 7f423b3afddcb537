import Foundation
import VeilCore
import VeilTestSupport
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
        /// `veil args`, headless, started; its standard output and error collected as lines.
        func start(_ args: [String]) throws -> ChildProcess {
            try ChildProcess(name: args[0], executable: try TestProgram.veil, arguments: args, directory: work,
                             environment: VeilCommandTests.environment(headless: true))
        }
        let secret = work.appendingPathComponent("secret").path

        let server = try start(["serve", "--port", "0", "--secret-file", secret])
        defer { server.stop() }
        let listen = try XCTUnwrap(server.line(timeout: 10) { $0.contains("listen url=ws://") }, "\(server.lines)")
        let url = try XCTUnwrap(listen.split(separator: " ").first { $0.hasPrefix("url=") }).dropFirst(4)

        func token(_ user: String) throws -> String {
            let p = try start(["token", "--room", "r1", "--user", user, "--ttl", "5m", "--secret-file", secret])
            p.process.waitUntilExit()
            return try XCTUnwrap(p.line(timeout: 5) { $0.hasPrefix("v1.") })
        }
        func call(_ user: String) throws -> ChildProcess {
            try start(["call", "--server", String(url), "--room", "r1", "--user", user, "--token", try token(user),
                       "--audio-in", "tone", "--audio-out", "none", "--out", "none", "--duration", "40", "--json"])
        }
        let alice = try call("alice")
        defer { alice.stop() }
        XCTAssertNotNil(alice.line(timeout: 15) { $0.contains(#""event":"joined""#) }, "\(alice.lines)")
        let bob = try call("bob")
        defer { bob.stop() }
        XCTAssertNotNil(alice.line(timeout: 15) { $0.contains(#""event":"participantJoined""#) && $0.contains(#""user":"bob""#) },
                        "alice: \(alice.lines)\nbob: \(bob.lines)")
        // Let the call settle (peer connection up, pings flowing), then kill bob outright.
        XCTAssertNotNil(bob.line(timeout: 10) { $0.contains(#""event":"statistics""#) }, "\(bob.lines)")

        let killedAt = Date()
        XCTAssertEqual(kill(bob.process.processIdentifier, SIGKILL), 0)
        let left = alice.line(timeout: 8) { $0.contains(#""event":"participantLeft""#) }
        let elapsed = Date().timeIntervalSince(killedAt)
        let line = try XCTUnwrap(left, "alice never saw bob leave: \(alice.lines.suffix(5))")
        let event = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        XCTAssertEqual(event["user"] as? String, "bob")
        XCTAssertEqual(event["reason"] as? String, "timeout")
        XCTAssertLessThanOrEqual(elapsed, 5, "participantLeft(timeout) came \(elapsed) s after the kill")
        XCTAssertTrue(server.lines.contains { $0.contains("leave room=r1 user=bob reason=timeout") }
                      || server.line(timeout: 1) { $0.contains("leave room=r1 user=bob reason=timeout") } != nil)
        print(String(format: "kill -9: alice saw participantLeft(bob, timeout) %.2f s after SIGKILL", elapsed))
        XCTAssertTrue(alice.process.isRunning, "alice carries on alone")
    }
}
