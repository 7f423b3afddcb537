import Foundation
import VeilCore
import XCTest

/// web/voice.js, run in headless Chromium, against the Swift `VoiceExpressionGenerator`: the same
/// levels at the same (irregular) times with the same seed give the same expressions.
final class VoiceExpressionBrowserTests: XCTestCase {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// Loads `html` (written to a temporary directory) in headless Chromium and returns the text
    /// of the element with id "out" once the page's scripts have run.
    static func runInChromium(_ html: String) throws -> String {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("veil-voice-js-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let page = directory.appendingPathComponent("page.html")
        try html.write(to: page, atomically: true, encoding: .utf8)
        return try output(of: page, profile: directory.appendingPathComponent("profile"),
                          arguments: ["--allow-file-access-from-files", "--virtual-time-budget=20000"])
    }

    /// Headless Chromium's DOM of `page` (with `arguments` and a profile in `profile`) once it has
    /// loaded: the text of the element with id "out". A page that never finishes is ended after 60 s.
    static func output(of page: URL, profile: URL, arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try chromiumPath())
        process.arguments = ["--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=\(profile.path)"] + arguments
            + ["--dump-dom", page.absoluteString]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        let killer = DispatchWorkItem { if process.isRunning { process.terminate() } }
        DispatchQueue.global().asyncAfter(deadline: .now() + 60, execute: killer)
        let dom = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        killer.cancel()
        guard let start = dom.range(of: "<pre id=\"out\">"), let end = dom.range(of: "</pre>", range: start.upperBound..<dom.endIndex) else {
            throw SpeechFixture.Missing(description: "the page produced no output (chromium exit \(process.terminationStatus)): \(dom.prefix(500))")
        }
        return String(dom[start.upperBound..<end.lowerBound])
    }

    /// Debian's chromium (or chromium-browser elsewhere).
    static func chromiumPath() throws -> String {
        guard let chromium = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw SpeechFixture.Missing(description: "chromium is not installed (scripts/bootstrap installs it)")
        }
        return chromium
    }

    func testTheJavaScriptPortMatchesSwift() throws {
        // Real speech, silence, then the same speech 30 dB quieter; updates at irregular times
        // (between 5 and 40 ms apart, like animation frames) so that every time constant matters.
        let speech = try SpeechFixture.samples("Veil sends your expressions, never your face. Can you hear me?")
        let loud = SpeechFixture.levels(speech.samples, sampleRate: speech.sampleRate)
        let levels = loud + [Double](repeating: 0, count: 150) + loud.map { $0 * 0.03 }
        var random = SplitMix64(seed: 5)
        var times: [Double] = []
        var t = 12.5
        for _ in levels {
            t += 0.005 + Double(random.next() % 36) / 1000
            times.append(t)
        }
        let seed: UInt64 = 0xC0FF_EE12_3456_789A
        // Muted for a stretch in the middle of the loud speech.
        let mutedSpan = (loud.count * 2 / 5)..<(loud.count * 3 / 5)
        let muted = levels.indices.map { mutedSpan.contains($0) }

        var generator = VoiceExpressionGenerator(seed: seed)
        let swift = levels.indices.map { generator.update(level: levels[$0], at: times[$0], muted: muted[$0]) }

        let voiceURL = Self.repository.appendingPathComponent("web/voice.js")
        XCTAssertTrue(FileManager.default.fileExists(atPath: voiceURL.path))
        func list(_ values: [Double]) -> String { "[" + values.map { String($0) }.joined(separator: ",") + "]" }
        let html = """
        <!doctype html><html><body><pre id="out">not run</pre>
        <script type="module">
        import { VoiceExpression } from '\(voiceURL.absoluteString)';
        const levels = \(list(levels));
        const times = \(list(times));
        const muted = [\(muted.map { $0 ? "true" : "false" }.joined(separator: ","))];
        const voice = new VoiceExpression({ seed: \(seed)n });
        const rows = [];
        for (let i = 0; i < levels.length; i++) {
          const e = voice.update(levels[i], times[i], muted[i]);
          rows.push([...e.coefficients, e.headPose.yaw, e.headPose.pitch, e.headPose.roll, e.gaze === null ? 1 : 0].join(' '));
        }
        document.getElementById('out').textContent = rows.join(';');
        </script></body></html>
        """
        let text = try Self.runInChromium(html)
        let rows = text.split(separator: ";").map { $0.split(separator: " ").compactMap { Double($0) } }
        XCTAssertEqual(rows.count, swift.count, "output: \(text.prefix(200))")
        var worst = 0.0, worstPose = 0.0
        for (row, expected) in zip(rows, swift) {
            guard row.count == 56 else { XCTFail("a row of \(row.count) numbers"); break }
            for k in 0..<52 { worst = max(worst, abs(row[k] - Double(expected.coefficients[k]))) }
            worstPose = max(worstPose, abs(row[52] - Double(expected.headPose.yaw)), abs(row[53] - Double(expected.headPose.pitch)),
                            abs(row[54] - Double(expected.headPose.roll)))
            XCTAssertEqual(row[55], 1, "gaze should be null")
        }
        print("voice.js vs Swift over \(rows.count) updates: largest coefficient difference \(worst), head pose \(worstPose)°")
        XCTAssertLessThan(worst, 1e-4)
        XCTAssertLessThan(worstPose, 1e-3)
        // The comparison covered a moving face: the mouth opened in both halves, the eyes blinked.
        let jaw = swift.map { $0[.jawOpen] }
        XCTAssertGreaterThan(jaw.prefix(mutedSpan.lowerBound).max() ?? 0, 0.4)
        XCTAssertEqual(jaw[mutedSpan].max(), 0, "muted: the mouth is closed from the first update")
        XCTAssertGreaterThan(jaw[mutedSpan.upperBound..<loud.count].max() ?? 0, 0.3, "unmuted: the mouth follows the voice again")
        XCTAssertGreaterThan(jaw.suffix(loud.count).max() ?? 0, 0.3)
        XCTAssertGreaterThan(swift.map { $0[.eyeBlinkLeft] }.max() ?? 0, 0.9)
    }

    /// `MicrophoneLevel` on Chromium's fake microphone (periodic beeps): the level rises and falls
    /// with the beeps and a `VoiceExpression` fed from it opens and closes the mouth. Served over
    /// HTTP (getUserMedia needs a real origin) by a small Python server that also holds the page's
    /// load event for 4 s, so that `--dump-dom` waits while real audio flows.
    func testMicrophoneLevelFollowsAFakeMicrophone() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("veil-voice-mic-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try FileManager.default.copyItem(at: Self.repository.appendingPathComponent("web/voice.js"), to: directory.appendingPathComponent("voice.js"))
        try """
        import http.server, sys, time
        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *a, **k): super().__init__(*a, directory=sys.argv[1], **k)
            def log_message(self, *a): pass
            def do_GET(self):
                if self.path.startswith('/hold'):
                    time.sleep(4); self.send_response(204); self.end_headers(); return
                super().do_GET()
        server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        print(server.server_address[1], flush=True)
        server.serve_forever()
        """.write(to: directory.appendingPathComponent("serve.py"), atomically: true, encoding: .utf8)
        try """
        <!doctype html><html><body><pre id="out">not run</pre><img src="/hold">
        <script type="module">
        import { MicrophoneLevel, VoiceExpression } from './voice.js';
        const out = document.getElementById('out');
        try {
          const stream = await navigator.mediaDevices.getUserMedia({ audio: true });
          const mic = new MicrophoneLevel(stream);
          await mic.context.resume();
          const voice = new VoiceExpression({ seed: 3 });
          const rows = [];
          const started = performance.now();
          await new Promise((resolve) => {
            const tick = () => {
              const level = mic.read();
              rows.push([level, voice.update(level, mic.time).coefficients[17]]);
              if (performance.now() - started > 3000) resolve(); else setTimeout(tick, 16);
            };
            tick();
          });
          mic.close();
          out.textContent = JSON.stringify(rows);
        } catch (e) { out.textContent = 'error ' + e; }
        </script></body></html>
        """.write(to: directory.appendingPathComponent("mic.html"), atomically: true, encoding: .utf8)

        let server = Process()
        server.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        server.arguments = [directory.appendingPathComponent("serve.py").path, directory.path]
        let serverOut = Pipe()
        server.standardOutput = serverOut
        try server.run()
        defer { server.terminate(); server.waitUntilExit() }
        var portText = ""
        while !portText.contains("\n") {
            let chunk = serverOut.fileHandleForReading.availableData
            guard !chunk.isEmpty else { break }
            portText += String(decoding: chunk, as: UTF8.self)
        }
        let port = try XCTUnwrap(Int(portText.trimmingCharacters(in: .whitespacesAndNewlines)), "the page server did not start")

        let text = try Self.output(of: URL(string: "http://127.0.0.1:\(port)/mic.html")!, profile: directory.appendingPathComponent("profile"),
                                   arguments: ["--use-fake-device-for-media-stream", "--use-fake-ui-for-media-stream",
                                               "--autoplay-policy=no-user-gesture-required"])
        let rows = try XCTUnwrap(try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [[Double]], "page output: \(text.prefix(300))")
        let levels = rows.map { $0[0] }, jaw = rows.map { $0[1] }
        print("MicrophoneLevel on the fake microphone: \(rows.count) reads, level \(levels.min() ?? 0)…\(levels.max() ?? 0), jaw up to \(jaw.max() ?? 0), last \(jaw.last ?? 0)")
        XCTAssertGreaterThan(rows.count, 60)
        XCTAssertGreaterThan(levels.max() ?? 0, 0.05, "the fake microphone's beeps were not measured")
        XCTAssertLessThan(levels.min() ?? 1, 0.01, "no quiet between the beeps")
        XCTAssertGreaterThan(jaw.max() ?? 0, 0.3, "the mouth did not open with the beeps")
        XCTAssertTrue(zip(levels, jaw).contains { $0 < 0.001 && $1 < 0.01 }, "the mouth never closed between the beeps")
    }
}
