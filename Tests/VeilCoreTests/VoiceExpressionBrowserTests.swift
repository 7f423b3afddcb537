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
        guard let chromium = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw SpeechFixture.Missing(description: "chromium is not installed (scripts/bootstrap installs it)")
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("veil-voice-js-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let page = directory.appendingPathComponent("page.html")
        try html.write(to: page, atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: chromium)
        process.arguments = ["--headless", "--no-sandbox", "--disable-gpu", "--allow-file-access-from-files",
                             "--user-data-dir=\(directory.appendingPathComponent("profile").path)",
                             "--virtual-time-budget=20000", "--dump-dom", page.absoluteString]
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
            throw SpeechFixture.Missing(description: "the page produced no output: \(dom.prefix(500))")
        }
        return String(dom[start.upperBound..<end.lowerBound])
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

        var generator = VoiceExpressionGenerator(seed: seed)
        let swift = zip(levels, times).map { generator.update(level: $0, at: $1) }

        let voiceURL = Self.repository.appendingPathComponent("web/voice.js")
        XCTAssertTrue(FileManager.default.fileExists(atPath: voiceURL.path))
        func list(_ values: [Double]) -> String { "[" + values.map { String($0) }.joined(separator: ",") + "]" }
        let html = """
        <!doctype html><html><body><pre id="out">not run</pre>
        <script type="module">
        import { VoiceExpression } from '\(voiceURL.absoluteString)';
        const levels = \(list(levels));
        const times = \(list(times));
        const voice = new VoiceExpression({ seed: \(seed)n });
        const rows = [];
        for (let i = 0; i < levels.length; i++) {
          const e = voice.update(levels[i], times[i]);
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
        XCTAssertGreaterThan(jaw.prefix(loud.count).max() ?? 0, 0.4)
        XCTAssertGreaterThan(jaw.suffix(loud.count).max() ?? 0, 0.3)
        XCTAssertGreaterThan(swift.map { $0[.eyeBlinkLeft] }.max() ?? 0, 0.9)
    }
}
