import Foundation
import VeilTestSupport
import XCTest

/// `veil serve --tls-cert --tls-key` and `veil call` over wss://, with a certificate authority
/// and certificates the test makes with openssl: a call that completes, the three certificates a
/// call must refuse (and says why), and the files `veil serve` must refuse before it listens.
final class TLSCommandTests: XCTestCase {
    /// A server over TLS and two calls that trust its authority through --ca-file: both join,
    /// hear and see each other. The same port speaks HTTPS (/health) and nothing in plain HTTP.
    func testACallOverWSSWithTheAuthorityGivenByCAFile() throws {
        let work = try CallWorkspace("veil-tls-call")
        defer { work.remove() }
        let authority = try TestCertificateAuthority(in: work.directory)
        let issued = try authority.server()
        let (server, serverURL) = try work.startServer(["--tls-cert", issued.certificate.path, "--tls-key", issued.key.path])
        defer { server.terminate(); server.waitUntilExit() }
        XCTAssertTrue(serverURL.hasPrefix("wss://127.0.0.1:"), serverURL)
        let port = try XCTUnwrap(URLComponents(string: serverURL)?.port)
        let tokens = try work.tokens(["alice", "bob"], room: "secure")

        // /health over HTTPS, verified against the authority; plain HTTP gets no answer from the TLS port.
        if FileManager.default.isExecutableFile(atPath: "/usr/bin/curl") {
            let health = try curl(["--cacert", authority.certificate.path, "https://127.0.0.1:\(port)/health"])
            XCTAssertEqual(health.status, 0, health.stderr)
            XCTAssertTrue(health.stdout.contains(#""status":"ok""#), health.stdout)
            let plain = try curl(["http://127.0.0.1:\(port)/health"])
            XCTAssertNotEqual(plain.status, 0, "plain HTTP answered on the TLS port: \(plain.stdout)")
        }

        let calls = try [("alice", tokens[0]), ("bob", tokens[1])].map { user, token in
            try work.process(["call", "--server", serverURL, "--ca-file", authority.certificate.path, "--room", "secure", "--user", user,
                              "--token", token, "--camera", "none", "--audio-in", "tone", "--out", "none", "--duration", "8", "--json"])
        }
        let lines = try CallWorkspace.run(calls).map(CallWorkspace.events)
        for (user, other, events) in [("alice", "bob", lines[0]), ("bob", "alice", lines[1])] {
            XCTAssertTrue(events.contains { $0["event"] as? String == "joined" }, "\(user) did not join: \(events)")
            XCTAssertTrue(events.contains { $0["event"] as? String == "peerState" && $0["user"] as? String == other && $0["state"] as? String == "connected" },
                          "\(user)'s connection to \(other) never connected")
            let report = try XCTUnwrap(events.last { $0["event"] as? String == "report" }, "\(user): no report line")
            // A few seconds of the other's voice-driven expression frames (30 a second) and voice.
            XCTAssertGreaterThan(report["expressionFramesReceived"] as? Int ?? 0, 60, "\(user): \(report)")
            XCTAssertGreaterThan(report["audioBytesSent"] as? Int ?? 0, 1000, "\(user): \(report)")
            XCTAssertFalse(events.contains { $0["event"] as? String == "error" }, "\(user): \(events.filter { $0["event"] as? String == "error" })")
        }
    }

    func testACertificateFromAnUnknownAuthorityIsRefused() throws {
        // The right certificate for 127.0.0.1, but its authority is in no trust store: no --ca-file.
        try assertRefused(expecting: "unknown authority", certificate: { try $0.server() }, giveAuthority: false)
    }

    func testAnExpiredCertificateIsRefused() throws {
        try assertRefused(expecting: "expired", certificate: { try $0.expired() }, giveAuthority: true)
    }

    func testACertificateForAnotherHostNameIsRefused() throws {
        try assertRefused(expecting: "wrong host name", certificate: { try $0.wrongHost() }, giveAuthority: true)
    }

    /// `veil serve` refuses certificate and key files that cannot serve, before it listens: exit 1
    /// (2 for a missing option) and a message naming the file and what is wrong with it.
    func testServeRefusesUnusableCertificateFilesBeforeListening() throws {
        let work = try CallWorkspace("veil-tls-files")
        defer { work.remove() }
        let authority = try TestCertificateAuthority(in: work.directory)
        let good = try authority.server(), other = try authority.wrongHost()
        let garbage = work.directory.appendingPathComponent("garbage.pem")
        try Data("this is not a PEM file\n".utf8).write(to: garbage)
        let missing = work.directory.appendingPathComponent("missing.pem").path
        let cases: [(arguments: [String], status: Int32, message: String)] = [
            (["--tls-cert", missing, "--tls-key", good.key.path], 1, "\(missing): no such file"),
            (["--tls-cert", good.certificate.path, "--tls-key", missing], 1, "\(missing): no such file"),
            (["--tls-cert", work.directory.path, "--tls-key", good.key.path], 1, "is a directory"),
            (["--tls-cert", garbage.path, "--tls-key", good.key.path], 1, "not a PEM certificate"),
            (["--tls-cert", good.certificate.path, "--tls-key", garbage.path], 1, "not an unencrypted PEM private key"),
            (["--tls-cert", good.certificate.path, "--tls-key", other.key.path], 1, "does not belong to --tls-cert"),
            (["--tls-cert", good.certificate.path], 2, "--tls-cert needs --tls-key"),
            (["--tls-key", good.key.path], 2, "--tls-key needs --tls-cert"),
        ]
        for (arguments, status, message) in cases {
            let serve = try work.run(["serve", "--port", "0", "--secret-file", work.secret] + arguments)
            let (output, errors) = (serve.stdout, serve.stderr)
            XCTAssertEqual(serve.status, status, "\(arguments): \(errors)")
            XCTAssertTrue(errors.contains(message), "\(arguments): \(errors)")
            XCTAssertFalse(errors.contains("clients connect to") || output.contains("listen"), "\(arguments) listened: \(errors)\(output)")
        }
        // Unreadable files can only be made for a user other than root.
        if geteuid() != 0 {
            let locked = work.directory.appendingPathComponent("locked.key")
            try FileManager.default.copyItem(at: good.key, to: locked)
            try FileManager.default.setAttributes([.posixPermissions: 0], ofItemAtPath: locked.path)
            let serve = try work.run(["serve", "--port", "0", "--secret-file", work.secret,
                                      "--tls-cert", good.certificate.path, "--tls-key", locked.path])
            let errors = serve.stderr
            XCTAssertEqual(serve.status, 1, errors)
            XCTAssertTrue(errors.contains("not readable"), errors)
        }
    }

    /// `--ca-file` is checked before the call starts: only with a wss:// server (usage, exit 2),
    /// and it must be a readable file of PEM certificates (exit 1).
    func testCAFileMustBeAFileOfCertificatesForAWSSServer() throws {
        let work = try CallWorkspace("veil-tls-ca-file")
        defer { work.remove() }
        let garbage = work.directory.appendingPathComponent("garbage.pem")
        try Data("this is not a PEM file\n".utf8).write(to: garbage)
        let missing = work.directory.appendingPathComponent("missing.pem").path
        let cases: [(server: String, caFile: String, status: Int32, message: String)] = [
            ("ws://127.0.0.1:9/ws", garbage.path, 2, "--ca-file is for a wss:// server"),
            ("wss://127.0.0.1:9/ws", missing, 1, "--ca-file \(missing): no such file, or not readable"),
            ("wss://127.0.0.1:9/ws", garbage.path, 1, "--ca-file \(garbage.path): not a PEM file of certificates"),
        ]
        for (server, caFile, status, message) in cases {
            let call = try work.run(["call", "--server", server, "--ca-file", caFile, "--room", "r", "--user", "alice",
                                     "--token", "v1.x", "--camera", "none", "--audio-in", "none", "--out", "none", "--duration", "30"])
            let errors = call.stderr
            XCTAssertEqual(call.status, status, "\(server) --ca-file \(caFile): \(errors)")
            XCTAssertTrue(errors.contains(message), "\(server) --ca-file \(caFile): \(errors)")
        }
    }

    // MARK: Helpers

    /// Serves TLS with the certificate `certificate` issues and runs a call (trusting the test's
    /// authority when `giveAuthority`): it must end at once with exit status 1 and `expecting`
    /// in its message, not retry for its 60 s; the server stays up for others.
    private func assertRefused(expecting reason: String, certificate: (TestCertificateAuthority) throws -> TestCertificateAuthority.Issued,
                               giveAuthority: Bool, file: StaticString = #filePath, line: UInt = #line) throws {
        let work = try CallWorkspace("veil-tls-refused")
        defer { work.remove() }
        let authority = try TestCertificateAuthority(in: work.directory)
        let issued = try certificate(authority)
        let (server, serverURL) = try work.startServer(["--tls-cert", issued.certificate.path, "--tls-key", issued.key.path])
        defer { server.terminate(); server.waitUntilExit() }
        let token = try work.tokens(["alice"], room: "secure")[0]
        let started = Date()
        let call = try work.run(["call", "--server", serverURL, "--room", "secure", "--user", "alice", "--token", token,
                                 "--camera", "none", "--audio-in", "none", "--out", "none", "--duration", "60", "--json"]
                                + (giveAuthority ? ["--ca-file", authority.certificate.path] : []))
        let (output, errors) = (call.stdout, call.stderr)
        let seconds = Date().timeIntervalSince(started)
        XCTAssertEqual(call.status, 1, errors, file: file, line: line)
        XCTAssertTrue(errors.contains("refused the TLS certificate of \(serverURL): \(reason):"), errors, file: file, line: line)
        // Said once, as an error event too; never joined, never retried until the end.
        let events = CallWorkspace.events(output)
        XCTAssertTrue(events.contains { $0["event"] as? String == "error" && $0["code"] as? String == "certificate"
                                        && ($0["message"] as? String ?? "").contains(reason) }, output, file: file, line: line)
        XCTAssertFalse(events.contains { $0["event"] as? String == "joined" }, output, file: file, line: line)
        XCTAssertFalse(events.contains { $0["event"] as? String == "connection" && $0["state"] as? String == "reconnecting" }, output,
                       file: file, line: line)
        XCTAssertLessThan(seconds, 45, "the refused call went on for \(seconds) s", file: file, line: line)
        print("refused in \(String(format: "%.1f", seconds)) s: \(errors.trimmingCharacters(in: .whitespacesAndNewlines))")
        // The server still serves over TLS after the refused handshake.
        if FileManager.default.isExecutableFile(atPath: "/usr/bin/curl") {
            let port = try XCTUnwrap(URLComponents(string: serverURL)?.port)
            let health = try curl(["--insecure", "https://127.0.0.1:\(port)/health"])
            XCTAssertTrue(health.stdout.contains(#""status":"ok""#), "\(health.stdout) \(health.stderr)", file: file, line: line)
        }
    }

    private func curl(_ arguments: [String]) throws -> TestProgram.Run {
        try TestProgram.run(URL(fileURLWithPath: "/usr/bin/curl"), ["-sS", "--max-time", "20"] + arguments)
    }
}
