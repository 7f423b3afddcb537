import Foundation
import VeilCore
import VeilServer
import XCTest
#if canImport(Glibc)
import Glibc
#endif

/// The room server serving a web directory at `/`: content types, caching, HEAD, and every way
/// out of the directory tried on the wire (raw requests, so that no client library normalises them).
final class StaticFilesTests: XCTestCase {
    private var work: URL!
    private var root: URL!
    private var server: RoomServer!
    private var port = 0

    override func setUpWithError() throws {
        work = FileManager.default.temporaryDirectory.appendingPathComponent("veil-web-\(UUID().uuidString)")
        root = work.appendingPathComponent("web")
        let fm = FileManager.default
        try fm.createDirectory(at: root.appendingPathComponent("sub"), withIntermediateDirectories: true)
        try fm.createDirectory(at: root.appendingPathComponent(".git"), withIntermediateDirectories: true)
        try Data("<!doctype html><title>Veil</title>".utf8).write(to: root.appendingPathComponent("index.html"))
        try Data("export const x = 1;\n".utf8).write(to: root.appendingPathComponent("app.js"))
        try Data("body{}".utf8).write(to: root.appendingPathComponent("veil.css"))
        try Data(#"{"version":1}"#.utf8).write(to: root.appendingPathComponent("avatar-rig.json"))
        try Data("<svg xmlns='http://www.w3.org/2000/svg'/>".utf8).write(to: root.appendingPathComponent("sub/icon.svg"))
        try Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]).write(to: root.appendingPathComponent("sub/dot.png"))
        try Data("<p>sub</p>".utf8).write(to: root.appendingPathComponent("sub/index.html"))
        try Data("[core]".utf8).write(to: root.appendingPathComponent(".git/config"))
        try Data("secret".utf8).write(to: root.appendingPathComponent("notes.key"))
        try Data(count: StaticFiles.maximumFileSize + 1).write(to: root.appendingPathComponent("huge.json"))
        // Outside the root, reachable only by escaping it.
        try Data("TOP SECRET".utf8).write(to: work.appendingPathComponent("secret.txt"))
        try fm.createSymbolicLink(atPath: root.appendingPathComponent("leak.txt").path, withDestinationPath: work.appendingPathComponent("secret.txt").path)
        try fm.createSymbolicLink(atPath: root.appendingPathComponent("up").path, withDestinationPath: work.path)
        try fm.createSymbolicLink(atPath: root.appendingPathComponent("alias.js").path, withDestinationPath: "app.js")

        server = RoomServer(configuration: .init(secret: ServerSecret.random(), host: "127.0.0.1", port: 0, webRoot: root))
        try server.start()
        port = try XCTUnwrap(server.port)
    }

    override func tearDownWithError() throws {
        server?.stop()
        try? FileManager.default.removeItem(at: work)
    }

    /// One raw HTTP/1.1 request; the whole answer, read until the server closes.
    private func request(_ target: String, method: String = "GET", headers: String = "") throws -> HTTPAnswer {
        let socket = try RawWebSocket(port: port)
        try socket.write(Array("\(method) \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\n\(headers)\r\n".utf8))
        return try answer(on: socket)
    }

    /// The answer on `socket`, read until the server closes (at most 5 s between reads).
    private func answer(on socket: RawWebSocket) throws -> HTTPAnswer {
        var tv = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(socket.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var data: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = recv(socket.fd, &chunk, chunk.count, 0)
            if n <= 0 { break }
            data += chunk[0..<n]
        }
        return try HTTPAnswer(data)
    }

    struct HTTPAnswer {
        var status: Int
        var headers: [String: String]
        var body: [UInt8]
        var text: String { String(decoding: body, as: UTF8.self) }

        init(_ data: [UInt8]) throws {
            let separator = Array("\r\n\r\n".utf8)
            guard let end = (0...(max(data.count - 4, 0))).first(where: { Array(data[$0..<min($0 + 4, data.count)]) == separator }) else {
                throw RawWebSocket.Failure(description: "no HTTP answer: \(String(decoding: data, as: UTF8.self))")
            }
            let head = String(decoding: data[..<end], as: UTF8.self).components(separatedBy: "\r\n")
            status = Int(head[0].split(separator: " ")[1]) ?? 0
            headers = [:]
            for line in head.dropFirst() {
                guard let colon = line.firstIndex(of: ":") else { continue }
                headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
            body = Array(data[(end + 4)...])
        }
    }

    func testServesThePageAndItsFilesWithTheirTypes() throws {
        let page = try request("/")
        XCTAssertEqual(page.status, 200)
        XCTAssertEqual(page.headers["content-type"], "text/html; charset=utf-8")
        XCTAssertEqual(page.text, "<!doctype html><title>Veil</title>")
        XCTAssertEqual(page.headers["connection"], "close")
        XCTAssertEqual(page.headers["x-content-type-options"], "nosniff")
        XCTAssertTrue(page.headers["permissions-policy"]?.contains("camera=()") == true, "the page may never use the camera")
        XCTAssertTrue(page.headers["content-security-policy"]?.contains("default-src 'self'") == true)
        XCTAssertEqual(try request("/index.html").text, page.text)

        let expected: [(String, String)] = [
            ("/app.js", "text/javascript; charset=utf-8"), ("/veil.css", "text/css; charset=utf-8"),
            ("/avatar-rig.json", "application/json"), ("/sub/icon.svg", "image/svg+xml"), ("/sub/dot.png", "image/png"),
            ("/sub/", "text/html; charset=utf-8"), ("/alias.js", "text/javascript; charset=utf-8"),
        ]
        for (path, type) in expected {
            let answer = try request(path)
            XCTAssertEqual(answer.status, 200, path)
            XCTAssertEqual(answer.headers["content-type"], type, path)
            XCTAssertNil(answer.headers["content-security-policy"].flatMap { type.hasPrefix("text/html") ? nil : $0 }, path)
        }
        XCTAssertEqual(try request("/sub/dot.png").body, [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
        XCTAssertEqual(try request("/app.js?v=2").text, "export const x = 1;\n", "a query does not change the file")
        // /health and /ws keep their meaning.
        XCTAssertEqual(try request("/health").status, 200)
        XCTAssertEqual(try request("/ws").status, 426, "a GET without upgrade is told to upgrade")
    }

    func testHeadAndRevalidation() throws {
        let head = try request("/app.js", method: "HEAD")
        XCTAssertEqual(head.status, 200)
        XCTAssertEqual(head.headers["content-length"], "20")
        XCTAssertTrue(head.body.isEmpty, "HEAD has no body: \(head.text)")

        let first = try request("/app.js")
        let tag = try XCTUnwrap(first.headers["etag"])
        XCTAssertEqual(first.headers["cache-control"], "no-cache")
        let again = try request("/app.js", headers: "If-None-Match: \(tag)\r\n")
        XCTAssertEqual(again.status, 304)
        XCTAssertTrue(again.body.isEmpty)
        XCTAssertEqual(try request("/app.js", headers: "If-None-Match: \"other\"\r\n").status, 200)

        // A changed file has a new tag.
        Thread.sleep(forTimeInterval: 0.01)
        try Data("export const x = 22;\n".utf8).write(to: root.appendingPathComponent("app.js"))
        let changed = try request("/app.js", headers: "If-None-Match: \(tag)\r\n")
        XCTAssertEqual(changed.status, 200)
        XCTAssertEqual(changed.text, "export const x = 22;\n")
        XCTAssertNotEqual(changed.headers["etag"], tag)

        XCTAssertEqual(try request("/app.js", method: "POST").status, 405)
        XCTAssertEqual(try request("/app.js", method: "PUT").status, 405)
    }

    /// Every request the server answers is bodiless: one that carries a body is refused (413), and
    /// the body is not kept: 256 MiB sent to the server (this process) leave its memory as it was.
    func testARequestWithABodyIsRefusedAndItsBodyNotKept() throws {
        let size = 256 << 20
        let socket = try RawWebSocket(port: port)
        let sampler = ResidentMemorySampler()
        try socket.write(Array("POST /index.html HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: \(size)\r\n\r\n".utf8))
        let chunk = [UInt8](repeating: 0x61, count: 1 << 20)
        for _ in 0..<(size >> 20) { try socket.write(chunk) }
        let refused = try answer(on: socket)
        let grown = sampler.stop()
        print("a 256 MiB request body: the server's resident memory grew by at most \(grown >> 20) MiB")
        XCTAssertEqual(refused.status, 413)
        XCTAssertLessThan(grown, 64 << 20, "the server kept the request's body in memory")

        let chunked = try request("/app.js", method: "PUT", headers: "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n")
        XCTAssertEqual(chunked.status, 413)
        XCTAssertEqual(try request("/ws", headers: "Content-Length: 5\r\n\r\nhello").status, 413)
        XCTAssertEqual(try request("/app.js", headers: "Content-Length: 0\r\n").status, 200, "an empty body is no body")
        XCTAssertEqual(try request("/health").status, 200)
    }

    func testNothingOutsideTheDirectoryNorHiddenNorUnknownIsServed() throws {
        let attempts = [
            "/../secret.txt", "/sub/../../secret.txt", "/%2e%2e/secret.txt", "/%2E%2E%2Fsecret.txt", "/sub/%2e%2e/%2e%2e/secret.txt",
            "/..%2fsecret.txt", "/..%5csecret.txt", "/sub\\..\\..\\secret.txt", "/%252e%252e/secret.txt",
            "/leak.txt", "/up/secret.txt",
            "/.git/config", "/%2egit/config", "/sub/./dot.png", "//etc/passwd", "/etc/passwd", "/index.html%00.png",
            "/notes.key", "/huge.json", "/sub", "/missing.js", "/" + String(repeating: "a/", count: 600) + "x.js",
        ]
        for target in attempts {
            let answer = try request(target)
            // libsoup itself answers 400 to an encoded slash or NUL; libsoup may also remove a "."
            // segment before the resolver sees the path, which then serves sub/dot.png.
            if target == "/sub/./dot.png" {
                XCTAssertTrue([200, 404].contains(answer.status), target)
            } else {
                XCTAssertTrue([400, 404].contains(answer.status), "\(target): \(answer.status)")
            }
            XCTAssertFalse(answer.text.contains("TOP SECRET"), target)
            XCTAssertFalse(answer.text.contains("[core]"), target)
            if answer.status == 404 {
                XCTAssertEqual(answer.headers["content-type"], "application/json", target)
                XCTAssertNotNil(try? JSONSerialization.jsonObject(with: Data(answer.body)), target)
            }
        }
        // A link that leads back inside the directory reaches only what the directory serves anyway.
        XCTAssertEqual(try request("/up/web/index.html").text, "<!doctype html><title>Veil</title>")
        // An absolute-form target names this server's own path, nothing else.
        XCTAssertNotEqual(try request("http://127.0.0.1/../secret.txt").text, "TOP SECRET")
    }

    func testTheResolverRefusesEachEscapeOnItsOwn() throws {
        let files = try StaticFiles(directory: root)
        XCTAssertNotNil(files.response(method: "GET", path: "/"))
        XCTAssertNotNil(files.response(method: "GET", path: "/alias.js"), "a link inside the directory is followed")
        for path in ["/../secret.txt", "/%2e%2e/secret.txt", "/leak.txt", "/up/secret.txt", "/.git/config", "/sub/./dot.png",
                     "/sub//dot.png", "relative.js", "/notes.key", "/huge.json", "/sub", "/a%00.js", "/%ZZ.js"] {
            XCTAssertNil(files.response(method: "GET", path: path), path)
        }
        XCTAssertNil(files.response(method: "DELETE", path: "/app.js"))
        XCTAssertThrowsError(try StaticFiles(directory: work.appendingPathComponent("absent")))
    }

    func testWithoutAWebRootOnlyHealthAndTheWebSocketAnswer() throws {
        let plain = RoomServer(configuration: .init(secret: ServerSecret.random(), host: "127.0.0.1", port: 0))
        try plain.start()
        defer { plain.stop() }
        port = try XCTUnwrap(plain.port)
        XCTAssertEqual(try request("/").status, 404)
        XCTAssertEqual(try request("/index.html").status, 404)
        XCTAssertEqual(try request("/health").status, 200)
        XCTAssertThrowsError(try RoomServer(configuration: .init(secret: ServerSecret.random(), port: 0,
                                                                  webRoot: work.appendingPathComponent("absent"))).start())
    }
}

/// The highest resident memory of this process while it runs, sampled every 5 ms from /proc.
final class ResidentMemorySampler: @unchecked Sendable {
    private let lock = NSLock()
    private var peak = 0
    private var running = true
    private let baseline: Int
    private let done = DispatchSemaphore(value: 0)

    init() {
        baseline = Self.resident()
        Thread.detachNewThread { [self] in
            while lock.withLock({ running }) {
                let now = Self.resident()
                lock.withLock { peak = max(peak, now) }
                usleep(5000)
            }
            done.signal()
        }
    }

    /// Stops sampling; returns how far the peak rose above the start, in bytes.
    func stop() -> Int {
        lock.withLock { running = false }
        done.wait()
        return max(0, lock.withLock { peak } - baseline)
    }

    static func resident() -> Int {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
              let kilobytes = Int(line.split(separator: " ").dropFirst().first ?? "") else { return 0 }
        return kilobytes * 1024
    }
}
