import Foundation
#if canImport(Glibc)
import Glibc
#endif
import XCTest

/// A small client of the W3C WebDriver HTTP API, enough to drive Debian's chromium through
/// `chromedriver`: it starts chromedriver on a free port, opens sessions with Chrome options,
/// navigates, runs scripts, takes screenshots and always ends what it started.
final class WebDriver {
    struct Failure: Error, CustomStringConvertible { let description: String }

    static let chromium = "/usr/lib/chromium/chromium" // the browser itself, not /usr/bin/chromium's wrapper script
    static let chromedriver = "/usr/bin/chromedriver"

    private let process: Process
    let base: URL
    private let log: URL

    /// Starts chromedriver, or skips the test when chromium or chromedriver is not installed.
    init() throws {
        let fm = FileManager.default
        guard fm.isExecutableFile(atPath: Self.chromium), fm.isExecutableFile(atPath: Self.chromedriver) else {
            throw XCTSkip("chromium and chromedriver are needed for the browser tests (Debian packages chromium, chromium-driver; scripts/bootstrap installs them)")
        }
        let port = try Self.freePort()
        log = fm.temporaryDirectory.appendingPathComponent("veil-chromedriver-\(port).log")
        process = Process()
        process.executableURL = URL(fileURLWithPath: Self.chromedriver)
        process.arguments = ["--port=\(port)", "--log-path=\(log.path)"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        base = URL(string: "http://127.0.0.1:\(port)")!
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if let status = try? request("GET", "status") as? [String: Any],
               (status["value"] as? [String: Any])?["ready"] as? Bool == true { return }
            Thread.sleep(forTimeInterval: 0.05)
        }
        stop()
        throw Failure(description: "chromedriver did not become ready on port \(port)")
    }

    deinit { stop() }

    /// Ends chromedriver (sessions should be deleted first: that is what closes their browsers).
    func stop() {
        guard process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
        try? FileManager.default.removeItem(at: log)
    }

    /// A port nobody listens on right now.
    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket failed") }
        defer { close(fd) }
        var address = loopback(port: 0)
        var size = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, size) == 0 && getsockname(fd, $0, &size) == 0 }
        }
        guard bound else { throw Failure(description: "bind failed") }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// 127.0.0.1:`port` (0: any free port, for `bind`).
    static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(truncatingIfNeeded: port).bigEndian)
        address.sin_addr.s_addr = in_addr_t(UInt32(0x7F00_0001).bigEndian)
        return address
    }

    /// One WebDriver command; returns the decoded JSON answer. Throws on HTTP or WebDriver errors.
    /// Plain HTTP/1.1 over a socket (Foundation's URLSession on Linux fails on chromedriver's
    /// answers with "Failed writing header").
    @discardableResult
    func request(_ method: String, _ path: String, _ body: [String: Any]? = nil, timeout: TimeInterval = 30) throws -> Any {
        let payload = try body.map { try JSONSerialization.data(withJSONObject: $0) } ?? Data()
        var head = "\(method) /\(path) HTTP/1.1\r\nHost: \(base.host ?? "127.0.0.1"):\(base.port ?? 0)\r\nConnection: close\r\n"
        if body != nil { head += "Content-Type: application/json; charset=utf-8\r\n" }
        head += "Content-Length: \(payload.count)\r\n\r\n"
        let (status, data) = try Self.exchange(port: base.port ?? 0, request: Array(head.utf8) + Array(payload), timeout: timeout)
        let json = data.isEmpty ? [String: Any]() : try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
        if status >= 400 {
            let value = (json as? [String: Any])?["value"] as? [String: Any]
            throw Failure(description: "\(method) \(path): \(value?["error"] ?? status): \(String(describing: value?["message"] ?? "").prefix(600))")
        }
        return json
    }

    /// Sends `request` to 127.0.0.1:`port` and reads the answer until the server closes:
    /// the status and the body (Content-Length or chunked).
    static func exchange(port: Int, request: [UInt8], timeout: TimeInterval) throws -> (Int, Data) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket failed") }
        defer { close(fd) }
        var tv = timeval(tv_sec: Int(timeout.rounded(.up)), tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var address = loopback(port: port)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw Failure(description: "cannot connect to chromedriver on port \(port)") }
        var offset = 0
        while offset < request.count {
            let n = request[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw Failure(description: "cannot send to chromedriver") }
            offset += n
        }
        // chromedriver keeps the connection open: read the header, then as much body as it announces.
        var answer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        let separator: [UInt8] = [13, 10, 13, 10]
        var headerEnd: Int?
        func complete() -> Bool {
            if headerEnd == nil {
                headerEnd = answer.count >= 4 ? answer.indices.dropLast(3).first(where: { Array(answer[$0..<$0 + 4]) == separator }) : nil
            }
            guard let end = headerEnd else { return false }
            let header = String(decoding: answer[..<end], as: UTF8.self).lowercased()
            if let line = header.split(separator: "\r\n").first(where: { $0.hasPrefix("content-length:") }),
               let length = Int(line.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) {
                return answer.count >= end + 4 + length
            }
            if header.contains("transfer-encoding: chunked") { return answer.suffix(5) == [48, 13, 10, 13, 10] }
            return false
        }
        while !complete() {
            let n = recv(fd, &chunk, chunk.count, 0)
            if n == 0 { break }
            guard n > 0 else { throw Failure(description: "no answer from chromedriver within \(Int(timeout)) s") }
            answer += chunk[0..<n]
        }
        guard let end = headerEnd else { throw Failure(description: "malformed answer from chromedriver") }
        let header = String(decoding: answer[..<end], as: UTF8.self)
        let status = Int(header.split(separator: " ").dropFirst().first ?? "") ?? 0
        var body = Array(answer[(end + 4)...])
        if header.lowercased().contains("transfer-encoding: chunked") {
            var decoded: [UInt8] = [], index = 0
            while let lineEnd = body[index...].indices.dropLast().first(where: { body[$0] == 13 && body[$0 + 1] == 10 }),
                  let size = Int(String(decoding: body[index..<lineEnd], as: UTF8.self).split(separator: ";").first ?? "", radix: 16),
                  size > 0, lineEnd + 2 + size <= body.count {
                decoded += body[(lineEnd + 2)..<(lineEnd + 2 + size)]
                index = lineEnd + 2 + size + 2
                if index >= body.count { break }
            }
            body = decoded
        }
        return (status, Data(body))
    }

    /// A new browser session: headless chromium with fake media devices (audio from `audioFile`
    /// when given) and permission prompts accepted.
    /// `fakeMediaPermission: false` leaves out the flag that grants the microphone without asking.
    func session(audioFile: URL? = nil, extraArguments: [String] = [], fakeMediaPermission: Bool = true) throws -> BrowserSession {
        let profile = FileManager.default.temporaryDirectory.appendingPathComponent("veil-chromium-\(UUID().uuidString)")
        var arguments = ["--headless=new", "--no-sandbox", "--autoplay-policy=no-user-gesture-required",
                         "--use-fake-device-for-media-stream",
                         "--disable-dev-shm-usage", "--no-first-run", "--no-default-browser-check",
                         "--window-size=1000,700", "--user-data-dir=\(profile.path)"]
        if fakeMediaPermission { arguments.append("--use-fake-ui-for-media-stream") }
        if let audioFile { arguments.append("--use-file-for-fake-audio-capture=\(audioFile.path)") }
        arguments += extraArguments
        // chromedriver turns off the throttling of background pages' timers by default; a user's
        // browser has it, and the page must work with it (a hidden page's timers run about once a second).
        let capabilities: [String: Any] = ["capabilities": ["alwaysMatch": [
            "browserName": "chrome",
            "goog:chromeOptions": ["binary": Self.chromium, "args": arguments,
                                   "excludeSwitches": ["disable-background-timer-throttling", "disable-backgrounding-occluded-windows"]],
            "goog:loggingPrefs": ["browser": "ALL"],
        ]]]
        let answer = try request("POST", "session", capabilities, timeout: 60) as? [String: Any]
        guard let value = answer?["value"] as? [String: Any], let id = value["sessionId"] as? String else {
            throw Failure(description: "no session: \(String(describing: answer))")
        }
        return BrowserSession(driver: self, id: id, profile: profile)
    }
}

/// One browser (one chromium process) driven through `WebDriver`. `delete()` ends it; tests call
/// it in a `defer` so that no browser outlives its test.
final class BrowserSession {
    let driver: WebDriver
    let id: String
    private let profile: URL
    private var deleted = false

    init(driver: WebDriver, id: String, profile: URL) {
        self.driver = driver; self.id = id; self.profile = profile
    }

    deinit { delete() }

    /// Closes the browser.
    func delete() {
        guard !deleted else { return }
        deleted = true
        _ = try? driver.request("DELETE", "session/\(id)", timeout: 15)
        try? FileManager.default.removeItem(at: profile)
    }

    func navigate(_ url: URL) throws {
        try driver.request("POST", "session/\(id)/url", ["url": url.absoluteString])
    }

    /// Runs `script` (a function body; `arguments` holds `args`) in the page and returns its result.
    @discardableResult
    func execute(_ script: String, _ args: [Any] = []) throws -> Any? {
        let answer = try driver.request("POST", "session/\(id)/execute/sync", ["script": script, "args": args]) as? [String: Any]
        let value = answer?["value"]
        return value is NSNull ? nil : value
    }

    /// Runs an async script: it ends by calling `arguments[arguments.length - 1](result)`.
    @discardableResult
    func executeAsync(_ script: String, _ args: [Any] = [], timeout: TimeInterval = 20) throws -> Any? {
        try driver.request("POST", "session/\(id)/timeouts", ["script": Int(timeout * 1000)])
        let answer = try driver.request("POST", "session/\(id)/execute/async", ["script": script, "args": args],
                                        timeout: timeout + 5) as? [String: Any]
        let value = answer?["value"]
        return value is NSNull ? nil : value
    }

    /// A Chrome DevTools Protocol command through chromedriver.
    @discardableResult
    func devtools(_ command: String, _ parameters: [String: Any] = [:]) throws -> Any? {
        try driver.request("POST", "session/\(id)/goog/cdp/execute", ["cmd": command, "params": parameters])
    }

    /// Runs `source` in every page this session loads from now on, before the page's own scripts.
    func addScriptAtDocumentStart(_ source: String) throws {
        try devtools("Page.addScriptToEvaluateOnNewDocument", ["source": source])
    }

    /// The visible page as PNG bytes.
    func screenshot() throws -> Data {
        let answer = try driver.request("GET", "session/\(id)/screenshot") as? [String: Any]
        guard let text = answer?["value"] as? String, let data = Data(base64Encoded: text) else {
            throw WebDriver.Failure(description: "no screenshot")
        }
        return data
    }

    /// Clicks the element `selector` finds as a user would (a real input event, which gives the page
    /// the user activation that APIs such as picture-in-picture require; a script's `click()` does not).
    func click(_ selector: String) throws {
        let answer = try driver.request("POST", "session/\(id)/element", ["using": "css selector", "value": selector]) as? [String: Any]
        guard let element = (answer?["value"] as? [String: Any])?.values.first as? String else {
            throw WebDriver.Failure(description: "no element \(selector)")
        }
        try driver.request("POST", "session/\(id)/element/\(element)/click", [:])
    }

    /// Minimises the browser window: its page becomes hidden, as when the user switches to another
    /// tab or application (in headless chromium a second tab in front does not hide the first).
    func minimize() throws {
        try driver.request("POST", "session/\(id)/window/minimize", [:])
    }

    /// Brings the minimised window back: its page is visible again.
    func restore() throws {
        try driver.request("POST", "session/\(id)/window/rect", ["width": 1000, "height": 700])
    }

    /// Window handles, open a new tab, switch to one, close the current one.
    func windowHandles() throws -> [String] {
        ((try driver.request("GET", "session/\(id)/window/handles") as? [String: Any])?["value"] as? [String]) ?? []
    }

    func newTab() throws -> String {
        let answer = try driver.request("POST", "session/\(id)/window/new", ["type": "tab"]) as? [String: Any]
        guard let handle = (answer?["value"] as? [String: Any])?["handle"] as? String else { throw WebDriver.Failure(description: "no new tab") }
        return handle
    }

    func switchTo(_ handle: String) throws {
        try driver.request("POST", "session/\(id)/window", ["handle": handle])
    }

    func closeCurrentTab() throws {
        try driver.request("DELETE", "session/\(id)/window")
    }

    /// The browser console so far (for failure messages).
    func consoleLog() -> String {
        let answer = try? driver.request("POST", "session/\(id)/se/log", ["type": "browser"]) as? [String: Any]
        let entries = (answer?["value"] as? [[String: Any]]) ?? []
        return entries.map { "\($0["level"] ?? "") \($0["message"] ?? "")" }.joined(separator: "\n")
    }

    /// Polls `condition` (a script returning a boolean) until it holds or `timeout` passes.
    func wait(for condition: String, timeout: TimeInterval, every interval: TimeInterval = 0.1) throws -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        repeat {
            if (try execute("return !!(\(condition));")) as? Bool == true { return true }
            Thread.sleep(forTimeInterval: interval)
        } while Date() < deadline
        return false
    }
}

extension BrowserSession {
    /// What the Veil page says of itself (status, errors, each remote's state) and its console:
    /// for a failure message.
    func pageState() -> String {
        let state = (try? execute("""
            const v = window.veil || {};
            return JSON.stringify({ status: v.status, error: v.error, message: v.message, callMessage: v.callMessage,
              remotes: Object.fromEntries(Object.entries(v.remotes || {}).map(([k, r]) => [k, { ...r, lastExpression: undefined, remoteSdp: undefined }])) });
            """)) as? String ?? ""
        return "page: \(state)\nconsole:\n\(consoleLog())"
    }
}

/// Whether `condition` holds within `timeout` seconds, asked every 50 ms.
func waitUntil(_ timeout: TimeInterval, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if condition() { return true }
        Thread.sleep(forTimeInterval: 0.05)
    }
    return condition()
}
