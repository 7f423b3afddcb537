import Foundation
import VeilCore
import VeilTestSupport
import XCTest
#if canImport(Glibc)
import Glibc
#endif
@testable import veil

/// `veil serve --web`: which directory is served at `/`, and what the server says when none is found.
final class ServeWebTests: XCTestCase {
    private var work: URL!

    override func setUpWithError() throws {
        work = FileManager.default.temporaryDirectory.appendingPathComponent("veil-serve-web-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: work)
    }

    func testWhichDirectoryIsServed() throws {
        let site = work.appendingPathComponent("site")
        try FileManager.default.createDirectory(at: site, withIntermediateDirectories: true)
        try Data("<p>hi</p>".utf8).write(to: site.appendingPathComponent("index.html"))

        XCTAssertEqual(try webDirectory(option: site.path, environment: [:]).directory?.path, site.path)
        XCTAssertNil(try webDirectory(option: "none", environment: ["VEIL_WEB": site.path]).directory, "--web none wins")
        XCTAssertThrowsError(try webDirectory(option: work.path, environment: [:]), "a directory without index.html is a usage error")
        XCTAssertEqual(try webDirectory(option: nil, environment: ["VEIL_WEB": site.path]).directory?.path, site.path)
        let wrong = try webDirectory(option: nil, environment: ["VEIL_WEB": work.path])
        XCTAssertNil(wrong.directory)
        XCTAssertTrue(wrong.problem?.contains("VEIL_WEB") == true, wrong.problem ?? "")
        // Without either, the checkout's web/ is found (from the working directory or the executable).
        let found = try webDirectory(option: nil, environment: [:])
        XCTAssertEqual(found.directory?.lastPathComponent, "web", found.problem ?? "")
        XCTAssertTrue(FileManager.default.fileExists(atPath: found.directory?.appendingPathComponent("app.js").path ?? ""))
    }

    /// The real command: started outside the checkout, it still finds web/ next to its executable
    /// and serves the page; `--web none` serves signaling only.
    func testVeilServeServesThePage() throws {
        for (arguments, expectPage) in [([String](), true), (["--web", "none"], false)] {
            let (process, port, log) = try startServe(arguments)
            defer { XCTAssertTrue(stop(process), "veil serve did not stop on SIGTERM") }
            let page = try get(port: port, path: "/")
            if expectPage {
                XCTAssertTrue(page.hasPrefix("HTTP/1.1 200"), page)
                XCTAssertTrue(page.contains("<title>Veil</title>"), page)
                XCTAssertTrue(log.contains("browser client at http://127.0.0.1:\(port)/"), log)
            } else {
                XCTAssertTrue(page.hasPrefix("HTTP/1.1 404"), page)
                XCTAssertTrue(log.contains("no browser client"), log)
            }
            XCTAssertTrue(try get(port: port, path: "/health").hasPrefix("HTTP/1.1 200"))
        }
    }

    /// Stopped the moment it says it listens, `veil serve` ends on SIGTERM every time (the signal is
    /// caught from before it starts listening, never ignored on the way in).
    func testVeilServeStopsOnSIGTERMRightAfterStarting() throws {
        var hung = 0
        for _ in 0..<30 {
            let (process, _, _) = try startServe(["--web", "none"])
            if !stop(process) { hung += 1 }
        }
        XCTAssertEqual(hung, 0, "veil serve ignored SIGTERM \(hung) times in 30")
    }

    /// SIGTERM, then SIGKILL if `process` has not ended within 10 s (a stop takes milliseconds; a
    /// busy machine may stretch it to seconds, an ignored signal forever); whether it ended by itself.
    private func stop(_ process: Process) -> Bool {
        let ended = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in ended.signal() }
        guard process.isRunning else { return true }
        process.terminate()
        if ended.wait(timeout: .now() + 10) == .success { return true }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        return false
    }

    private func startServe(_ extra: [String]) throws -> (Process, Int, String) {
        let process = TestProgram.process(try XCTUnwrap(TestProgram.built("veil"), "veil is not built next to the tests"),
                                          ["serve", "--port", "0", "--secret-file", work.appendingPathComponent("secret").path] + extra,
                                          in: work, environment: ["VEIL_WEB": nil])
        let err = Pipe()
        process.standardError = err
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        var log = ""
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline, !log.contains("Ctrl-C stops.") || !(log.contains("browser client")) {
            log += String(decoding: err.fileHandleForReading.availableData, as: UTF8.self)
        }
        guard let range = log.range(of: #"ws://127\.0\.0\.1:(\d+)/ws"#, options: .regularExpression),
              let port = Int(log[range].dropFirst("ws://127.0.0.1:".count).dropLast(3)) else {
            process.terminate()
            throw WebDriver.Failure(description: "veil serve did not start: \(log)")
        }
        return (process, port, log)
    }

    private func get(port: Int, path: String) throws -> String {
        let request = Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".utf8)
        let (status, body) = try WebDriver.exchange(port: port, request: request, timeout: 5)
        return "HTTP/1.1 \(status)\n" + String(decoding: body, as: UTF8.self)
    }
}
