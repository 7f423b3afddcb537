import Foundation
import XCTest

/// Runs a generated test page in headless Debian chromium (no WebDriver): the page imports the
/// modules of `web/` by file URL, reads its input from an inline JSON block, and writes a JSON
/// result into `<pre id="result">`; `--dump-dom` hands the DOM back once the page is idle.
struct HeadlessChromium {
    /// The repository's `web/` directory.
    static let webDirectory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("web", isDirectory: true)

    let executable: URL

    /// The system chromium ($VEIL_CHROMIUM, else chromium or chromium-browser on the PATH); skips
    /// the test when there is none.
    static func require() throws -> HeadlessChromium {
        let environment = ProcessInfo.processInfo.environment
        var candidates: [String] = []
        if let explicit = environment["VEIL_CHROMIUM"], !explicit.isEmpty { candidates.append(explicit) }
        for dir in (environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
            candidates += ["\(dir)/chromium", "\(dir)/chromium-browser"]
        }
        guard let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw XCTSkip("chromium is not installed (apt-get install chromium, as scripts/bootstrap does); the browser tests need it")
        }
        return HeadlessChromium(executable: URL(fileURLWithPath: found))
    }

    /// A page that imports `imports` (module specifiers relative to `web/`, e.g.
    /// `{ decodeFrame } from 'wire.js'`), binds the inline `input` JSON to `input`, runs `body`
    /// (an async function body that returns the result) and publishes the result.
    static func page(imports: [String], input: Data, body: String) -> String {
        let lines = imports.map { spec -> String in
            guard let from = spec.range(of: " from '") else { return "import \(spec);" }
            let module = spec[from.upperBound...].dropLast()
            return "import \(spec[..<from.lowerBound]) from '\(webDirectory.appendingPathComponent(String(module)).absoluteString)';"
        }
        // Inside <script>, "</" would end the element.
        let inputText = String(decoding: input, as: UTF8.self).replacingOccurrences(of: "</", with: "<\\/")
        return """
            <!doctype html><html><head><meta charset="utf-8"></head><body>
            <pre id="result"></pre>
            <script type="application/json" id="input">\(inputText)</script>
            <script type="module">
            \(lines.joined(separator: "\n"))
            const input = JSON.parse(document.getElementById('input').textContent);
            const publish = (value) => { document.getElementById('result').textContent = JSON.stringify(value); };
            try {
              publish({ result: await (async () => { \(body) })() });
            } catch (error) {
              publish({ error: String(error && error.stack || error) });
            }
            </script></body></html>
            """
    }

    /// Loads `html` (written to a fresh directory) and returns the value the page published.
    func run(_ html: String, timeout: TimeInterval = 120) throws -> Any {
        let fm = FileManager.default
        let dir = fm.temporaryDirectory.appendingPathComponent("veil-chromium-\(getpid())-\(UUID().uuidString)", isDirectory: true)
        try fm.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? fm.removeItem(at: dir) }
        let pageURL = dir.appendingPathComponent("page.html")
        try Data(html.utf8).write(to: pageURL)
        let dump = dir.appendingPathComponent("dom.html"), log = dir.appendingPathComponent("chromium.log")
        guard fm.createFile(atPath: dump.path, contents: nil), fm.createFile(atPath: log.path, contents: nil) else {
            throw BrowserTestError("cannot create files in \(dir.path)")
        }
        let out = try FileHandle(forWritingTo: dump), err = try FileHandle(forWritingTo: log)
        defer { try? out.close(); try? err.close() }

        let process = Process()
        process.executableURL = executable
        process.arguments = [
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-extensions", "--no-first-run",
            "--user-data-dir=\(dir.appendingPathComponent("profile").path)",
            // file:// module imports and fetches of the rig need this; the page is generated here.
            "--allow-file-access-from-files",
            // Lets the page's async work (fetch, awaits) finish before the DOM is dumped.
            "--virtual-time-budget=60000",
            "--dump-dom", pageURL.absoluteString,
        ]
        process.standardOutput = out
        process.standardError = err
        let exited = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in exited.signal() }
        try process.run()
        if exited.wait(timeout: .now() + timeout) == .timedOut {
            process.terminate()
            _ = exited.wait(timeout: .now() + 5)
            throw BrowserTestError("chromium did not finish the page within \(Int(timeout)) s")
        }
        let dom = String(decoding: try Data(contentsOf: dump), as: UTF8.self)
        guard let start = dom.range(of: "<pre id=\"result\">"), let end = dom.range(of: "</pre>", range: start.upperBound..<dom.endIndex) else {
            let stderr = String(decoding: (try? Data(contentsOf: log)) ?? Data(), as: UTF8.self).suffix(2000)
            throw BrowserTestError("chromium (exit \(process.terminationStatus)) returned no result element; stderr: \(stderr)")
        }
        let text = String(dom[start.upperBound..<end.lowerBound])
            .replacingOccurrences(of: "&lt;", with: "<").replacingOccurrences(of: "&gt;", with: ">")
            .replacingOccurrences(of: "&nbsp;", with: "\u{A0}").replacingOccurrences(of: "&amp;", with: "&")
        guard !text.isEmpty else { throw BrowserTestError("the page did not finish: its result element is empty") }
        let object = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
        if let error = object?["error"] as? String { throw BrowserTestError("the page threw: \(error)") }
        guard let object, let result = object["result"] else { throw BrowserTestError("the page published no result: \(text.prefix(300))") }
        return result
    }
}

struct BrowserTestError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Hex text of bytes, "01 0A FF".
func hexString(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02X", $0) }.joined(separator: " ") }

/// Bytes of hex text, separated by spaces or newlines.
func bytes(hex: String) -> [UInt8] {
    hex.split(whereSeparator: { $0 == " " || $0 == "\n" }).compactMap { UInt8($0, radix: 16) }
}
