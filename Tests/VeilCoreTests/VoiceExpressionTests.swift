import Foundation
import VeilCore
import XCTest

/// Speech from espeak-ng as 16-bit mono samples (22 050 Hz), for voice-driven expression tests.
enum SpeechFixture {
    struct Missing: Error, CustomStringConvertible {
        let description: String
    }

    static let sentence = "The quick brown fox jumps over the lazy dog. Then, after a short pause, it runs away across the field and into the woods."

    /// espeak-ng's voice for `text` (22 050 Hz mono samples).
    static func samples(_ text: String = sentence) throws -> (samples: [Int16], sampleRate: Int) {
        guard let tool = ["/usr/bin/espeak-ng", "/usr/local/bin/espeak-ng"].first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw Missing(description: "espeak-ng is not installed (scripts/bootstrap installs it)")
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = ["-v", "en", "-s", "150", "--stdout", text]
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        // A streamed WAV: RIFF header, fmt chunk, then a data chunk running to the end.
        let bytes = [UInt8](data)
        guard bytes.count > 44, let data = findChunk("data", in: bytes) else { throw Missing(description: "espeak-ng wrote no WAV") }
        let rate = Int(bytes[24]) | Int(bytes[25]) << 8 | Int(bytes[26]) << 16 | Int(bytes[27]) << 24
        var samples: [Int16] = []
        var i = data
        while i + 1 < bytes.count {
            samples.append(Int16(bitPattern: UInt16(bytes[i]) | UInt16(bytes[i + 1]) << 8))
            i += 2
        }
        return (samples, rate)
    }

    private static func findChunk(_ id: String, in bytes: [UInt8]) -> Int? {
        let tag = Array(id.utf8)
        var i = 12
        while i + 8 <= bytes.count {
            let size = Int(bytes[i + 4]) | Int(bytes[i + 5]) << 8 | Int(bytes[i + 6]) << 16 | Int(bytes[i + 7]) << 24
            if Array(bytes[i..<i + 4]) == tag { return i + 8 }
            i += 8 + size
        }
        return nil
    }

    /// RMS levels of consecutive `windowSeconds` windows, each scaled by `gain`.
    static func levels(_ samples: [Int16], sampleRate: Int, windowSeconds: Double = 0.01, gain: Double = 1) -> [Double] {
        let window = max(1, Int(Double(sampleRate) * windowSeconds))
        return stride(from: 0, to: samples.count - window + 1, by: window).map { start in
            var sum = 0.0
            for s in samples[start..<start + window] { sum += Double(s) * Double(s) }
            return min(1, gain * (sum / Double(window)).squareRoot() / 32768)
        }
    }
}

/// Pearson correlation.
func correlation(_ a: [Double], _ b: [Double]) -> Double {
    let n = Double(min(a.count, b.count))
    guard n > 1 else { return 0 }
    let a = Array(a.prefix(Int(n))), b = Array(b.prefix(Int(n)))
    let ma = a.reduce(0, +) / n, mb = b.reduce(0, +) / n
    var sab = 0.0, saa = 0.0, sbb = 0.0
    for i in a.indices {
        sab += (a[i] - ma) * (b[i] - mb)
        saa += (a[i] - ma) * (a[i] - ma)
        sbb += (b[i] - mb) * (b[i] - mb)
    }
    return saa > 0 && sbb > 0 ? sab / (saa * sbb).squareRoot() : 0
}

final class VoiceExpressionTests: XCTestCase {
    /// Runs a generator over levels 10 ms apart.
    func run(_ levels: [Double], seed: UInt64 = 7, step: Double = 0.01) -> [VeilCore.Expression] {
        var generator = VoiceExpressionGenerator(seed: seed)
        return levels.enumerated().map { generator.update(level: $0.element, at: 100 + Double($0.offset) * step) }
    }

    func testTheJawFollowsTheEnvelopeOfRealSpeech() throws {
        let speech = try SpeechFixture.samples()
        // One second of silence before the speech, as at the start of a call.
        let levels = [Double](repeating: 0, count: 100) + SpeechFixture.levels(speech.samples, sampleRate: speech.sampleRate)
        let jaw = run(levels).map { Double($0[.jawOpen]) }
        // The speech envelope: RMS over 50 ms windows, the resolution of a mouth.
        let envelope = levels.indices.map { i -> Double in
            let part = levels[max(0, i - 2)...min(levels.count - 1, i + 2)]
            return (part.map { $0 * $0 }.reduce(0, +) / Double(part.count)).squareRoot()
        }
        let r = correlation(Array(jaw.dropFirst(100)), Array(envelope.dropFirst(100)))
        print("jawOpen vs speech envelope: r = \(String(format: "%.3f", r)) over \(levels.count - 100) windows; max jaw \(jaw.max() ?? 0)")
        XCTAssertGreaterThan(r, 0.7)
        XCTAssertGreaterThan(jaw.max() ?? 0, 0.4, "the mouth hardly opens for speech")
        XCTAssertLessThanOrEqual(jaw.max() ?? 1, VoiceExpressionGenerator.maximumJawOpen + 1e-6)
        XCTAssertEqual(jaw.prefix(100).max() ?? 1, 0, "the mouth moved during the silence before the speech")
        // Attack faster than release: the jaw rises more per 10 ms than it falls.
        let steps = zip(jaw.dropFirst(), jaw).map { $0 - $1 }
        XCTAssertGreaterThan(steps.max() ?? 0, -(steps.min() ?? 0) * 1.3, "opening should be faster than closing")
    }

    func testQuietAndLoudMicrophonesBothMoveTheMouth() throws {
        let speech = try SpeechFixture.samples()
        let normal = SpeechFixture.levels(speech.samples, sampleRate: speech.sampleRate)
        // 26 dB quieter, with a little noise on top (a cheap microphone far away).
        var noise = SplitMix64(seed: 3)
        let quiet = normal.map { $0 * 0.05 + 0.0005 * (1 + Double(noise.next() % 100) / 100) }
        let jawNormal = run(normal).map { Double($0[.jawOpen]) }
        let jawQuiet = run(quiet).map { Double($0[.jawOpen]) }
        // After the auto-gain has settled (2 s), both mouths move alike.
        let r = correlation(Array(jawNormal.dropFirst(200)), Array(jawQuiet.dropFirst(200)))
        let meanNormal = jawNormal.dropFirst(200).reduce(0, +) / Double(jawNormal.count - 200)
        let meanQuiet = jawQuiet.dropFirst(200).reduce(0, +) / Double(jawQuiet.count - 200)
        print("quiet vs normal microphone: r = \(String(format: "%.3f", r)), mean jaw \(String(format: "%.3f", meanQuiet)) vs \(String(format: "%.3f", meanNormal))")
        XCTAssertGreaterThan(r, 0.8)
        XCTAssertGreaterThan(meanQuiet, meanNormal * 0.6)
        XCTAssertLessThan(meanQuiet, meanNormal * 1.6)
    }

    func testSilenceAndSteadyNoiseKeepTheMouthClosed() {
        for level in [0.0, 1e-4, 0.002] {
            var noise = SplitMix64(seed: 11)
            // Steady background noise with ±20 % flicker; the floor has 3 s to settle.
            let levels = (0..<1000).map { _ in level * (0.8 + 0.4 * Double(noise.next() % 1000) / 1000) }
            let expressions = run(levels)
            let jaw = expressions.dropFirst(300).map { Double($0[.jawOpen]) }
            XCTAssertLessThan(jaw.max() ?? 1, 0.02, "noise at \(level) RMS opened the mouth")
            XCTAssertLessThan(expressions.dropFirst(300).map { Double($0[.browInnerUp]) }.max() ?? 1, 0.01)
        }
    }

    func testBlinksAreNaturalInRateAndLength() {
        // 60 s of silence at 100 updates/s: blinks do not need a voice.
        let expressions = run([Double](repeating: 0, count: 6000))
        var blinks: [(start: Int, length: Int)] = []
        var current: Int?
        for (i, e) in expressions.enumerated() {
            XCTAssertEqual(e[.eyeBlinkLeft], e[.eyeBlinkRight], "the eyes blink together")
            if e[.eyeBlinkLeft] > 0.5 {
                if current == nil { current = i }
            } else if let start = current {
                blinks.append((start, i - start)); current = nil
            }
        }
        let gaps = zip(blinks.dropFirst(), blinks).map { Double($0.start - $1.start) / 100 }
        print("blinks in 60 s: \(blinks.count); intervals \(String(format: "%.2f", gaps.min() ?? 0))…\(String(format: "%.2f", gaps.max() ?? 0)) s; closed \(blinks.map(\.length).min() ?? 0)…\(blinks.map(\.length).max() ?? 0) × 10 ms")
        XCTAssertGreaterThanOrEqual(blinks.count, 10)
        XCTAssertLessThanOrEqual(blinks.count, 30)
        XCTAssertGreaterThanOrEqual(gaps.min() ?? 0, 1.95)
        XCTAssertLessThanOrEqual(gaps.max() ?? 99, 6.05)
        // More than half closed for about 80 ms of each 150 ms blink.
        for blink in blinks { XCTAssert((5...12).contains(blink.length), "blink closed for \(blink.length * 10) ms") }
        // At 30 fps every blink is still caught shut in at least one frame.
        let frames = stride(from: 0, to: expressions.count, by: 3).map { expressions[$0] }
        var shutFrames = 0
        for (a, b) in zip(frames.dropFirst(), frames) where a[.eyeBlinkLeft] > 0.9 && b[.eyeBlinkLeft] <= 0.9 { shutFrames += 1 }
        XCTAssertEqual(shutFrames, blinks.count)
    }

    func testHeadMotionIsSmallSmoothAndAlive() {
        let expressions = run([Double](repeating: 0, count: 6000))
        let yaw = expressions.map { Double($0.headPose.yaw) }, pitch = expressions.map { Double($0.headPose.pitch) }
        let roll = expressions.map { Double($0.headPose.roll) }
        XCTAssertLessThanOrEqual(yaw.map(abs).max() ?? 99, 3.0 + 1e-4)
        XCTAssertLessThanOrEqual(pitch.map(abs).max() ?? 99, 2.0 + 1e-4)
        XCTAssertLessThanOrEqual(roll.map(abs).max() ?? 99, 1.5 + 1e-4)
        for axis in [yaw, pitch, roll] {
            // Alive: at least a third of its range is used in a minute; smooth: < 0.05° per 10 ms.
            XCTAssertGreaterThan((axis.max() ?? 0) - (axis.min() ?? 0), 0.5)
            let steps = zip(axis.dropFirst(), axis).map { abs($0 - $1) }
            XCTAssertLessThan(steps.max() ?? 1, 0.05)
        }
        XCTAssertNil(expressions[0].gaze)
    }

    func testTheSameSeedGivesTheSameFaceAndAnotherSeedAnother() throws {
        let speech = try SpeechFixture.samples("Hello there, how are you today?")
        let levels = SpeechFixture.levels(speech.samples, sampleRate: speech.sampleRate) + [Double](repeating: 0, count: 500)
        let a = run(levels, seed: 42), b = run(levels, seed: 42), c = run(levels, seed: 43)
        XCTAssertEqual(a, b)
        XCTAssertNotEqual(a.map(\.headPose), c.map(\.headPose))
        XCTAssertNotEqual(a.map { $0[.eyeBlinkLeft] }, c.map { $0[.eyeBlinkLeft] })
        // The mouth is the voice's, whatever the seed.
        XCTAssertEqual(a.map { $0[.jawOpen] }, c.map { $0[.jawOpen] })
    }

    func testUpdateRateDoesNotChangeTheShape() throws {
        // 100 updates/s and 30 updates/s on the same speech give the same mouth within a little.
        let speech = try SpeechFixture.samples()
        let levels = SpeechFixture.levels(speech.samples, sampleRate: speech.sampleRate)
        let fine = run(levels).map { Double($0[.jawOpen]) }
        var generator = VoiceExpressionGenerator(seed: 7)
        var coarse: [Double] = [], matching: [Double] = []
        for i in stride(from: 0, to: levels.count - 3, by: 3) {
            let part = levels[i..<i + 3]
            let level = (part.map { $0 * $0 }.reduce(0, +) / 3).squareRoot()
            coarse.append(Double(generator.update(level: level, at: 100 + Double(i + 2) * 0.01)[.jawOpen]))
            matching.append(fine[i + 2])
        }
        XCTAssertGreaterThan(correlation(coarse, matching), 0.9)
    }

    func testNonsenseInputIsHarmless() {
        var generator = VoiceExpressionGenerator(seed: 1)
        for (level, time) in [(Double.nan, 0.0), (.infinity, 0.01), (-1, 0.02), (5, -3), (0.1, 1e9)] {
            let e = generator.update(level: level, at: time)
            XCTAssertTrue(e.coefficients.allSatisfy { $0.isFinite && $0 >= 0 && $0 <= 1 })
            XCTAssertTrue(e.headPose.yaw.isFinite && e.headPose.pitch.isFinite)
        }
    }
}

final class VoiceFallbackTests: XCTestCase {
    func testWithoutACameraTheVoiceAlwaysDrives() {
        let fallback = VoiceFallback(hasCamera: false, at: 1_000)
        XCTAssertEqual(fallback.source(at: 1_000), .voice)
        XCTAssertEqual(fallback.source(at: 90_000_000), .voice)
    }

    func testAShortLossKeepsTheCameraAndALongOneHandsOverUntilTheFaceReturns() {
        var fallback = VoiceFallback(hasCamera: true, at: 0)
        var t: UInt64 = 0
        func frame(_ state: ExpressionFrame.State) -> Bool {
            t += 33_333
            return fallback.cameraFrame(state, at: t)
        }
        for _ in 0..<30 { XCTAssertTrue(frame(.tracked)) }
        XCTAssertEqual(fallback.source(at: t), .camera)
        // Lost for 0.5 s: lost frames go out, the camera still drives.
        let lostAt = t + 33_333
        for _ in 0..<15 { XCTAssertTrue(frame(.lost)) }
        XCTAssertEqual(fallback.source(at: t), .camera)
        for _ in 0..<3 { XCTAssertTrue(frame(.tracked)) }
        // Lost for longer: after 1 s the voice takes over and lost frames are held back.
        var firstVoice: UInt64?
        for _ in 0..<60 {
            let sent = frame(.lost)
            if !sent, firstVoice == nil { firstVoice = t }
            XCTAssertEqual(sent, fallback.source(at: t) == .camera)
        }
        guard let firstVoice else { return XCTFail("the voice never took over") }
        let handover = firstVoice - (lostAt + 18 * 33_333)
        XCTAssert((1_000_000..<1_040_000).contains(handover), "voice took over \(handover) µs after the face was lost")
        XCTAssertEqual(fallback.source(at: t), .voice)
        // The face comes back: the camera drives from its first tracked frame.
        XCTAssertTrue(frame(.tracked))
        XCTAssertEqual(fallback.source(at: t), .camera)
    }

    func testACameraThatStopsDeliveringHandsOverToo() {
        var fallback = VoiceFallback(hasCamera: true, at: 0)
        XCTAssertEqual(fallback.source(at: 500_000), .camera, "a camera starting up gets a second")
        XCTAssertEqual(fallback.source(at: 1_000_000), .voice, "no face within a second of starting")
        XCTAssertTrue(fallback.cameraFrame(.tracked, at: 1_100_000))
        XCTAssertEqual(fallback.source(at: 1_500_000), .camera)
        XCTAssertEqual(fallback.source(at: 2_200_000), .voice, "no camera frame for 1.1 s")
    }
}
