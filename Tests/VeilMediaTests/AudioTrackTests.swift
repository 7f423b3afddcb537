import Foundation
import VeilCore
import VeilVision
import XCTest
import CGStreamer
@testable import VeilMedia

/// Video files with sound: written by VideoWriter, read back by VideoSource and AudioSource through
/// GStreamer, every step under a 10 s deadline.
final class AudioTrackTests: XCTestCase {
    static let rate = 48_000

    // MARK: The 3-second call, in MP4 and WebM

    func testMP4WithToneRoundTrip() throws {
        try checkCallRoundTrip(try makeTemporaryDirectory().appendingPathComponent("call one.mp4"))
    }

    func testWebMWithToneRoundTrip() throws {
        try checkCallRoundTrip(try makeTemporaryDirectory().appendingPathComponent("call 'two'.webm"))
    }

    func testMatroskaWithToneRoundTrip() throws {
        try checkCallRoundTrip(try makeTemporaryDirectory().appendingPathComponent("call.mkv"))
    }

    /// 3 s of 640×480 frames at 30 fps and 3 s of a 440 Hz tone, written in time order as a call does.
    private func checkCallRoundTrip(_ url: URL) throws {
        try runWithDeadline {
            try CallRecording(url: url).write(audio: 0..<3_000_000)
        }
        guard let read = try runWithDeadline(10, { try readBack(url) }) else { return }
        XCTAssertEqual(read.frames.count, 90, "video frames")
        XCTAssertEqual(read.frames.first?.image.width, 640)
        XCTAssertEqual(read.frames.first?.image.height, 480)
        XCTAssertEqual(read.audio.duration, 3.0, accuracy: 0.05, "audio duration")
        XCTAssertEqual(Tone.frequency(read.audio.samples(from: 0.5, to: 2.5)), 440, accuracy: 10, "tone frequency")
        let videoStart = Double(read.frames.first?.timestampMicros ?? .max) / 1e6
        XCTAssertEqual(read.audio.start, videoStart, accuracy: 0.04, "first audio and video timestamps")
        XCTAssertEqual(read.audio.onset() ?? -1, 0, accuracy: 0.05, "the tone starts with the video")
        print("\(url.lastPathComponent): \(read.frames.count) frames from \(videoStart) s, audio \(read.audio.start) s + \(read.audio.duration) s, onset \(read.audio.onset() ?? -1) s, \(Tone.frequency(read.audio.samples(from: 0.5, to: 2.5))) Hz")
    }

    // MARK: Timing

    func testAudioStartingOneSecondLate() throws {
        for name in ["late.mp4", "late.webm"] {
            let url = try makeTemporaryDirectory().appendingPathComponent(name)
            try runWithDeadline { try CallRecording(url: url).write(audio: 1_000_000..<3_000_000) }
            guard let read = try runWithDeadline(10, { try readBack(url) }) else { return }
            XCTAssertEqual(read.frames.count, 90, name)
            XCTAssertEqual(read.audio.start, 0, accuracy: 0.04, "\(name): silence fills the audio from the start")
            XCTAssertEqual(read.audio.duration, 3.0, accuracy: 0.05, name)
            XCTAssertEqual(read.audio.onset() ?? -1, 1.0, accuracy: 0.05, "\(name): the tone sits at 1 s")
            print("\(name): tone onset at \(read.audio.onset() ?? -1) s")
            XCTAssertLessThan(read.audio.peak(from: 0, to: 0.95), 300, "\(name): silence before the tone")
            XCTAssertEqual(Tone.frequency(read.audio.samples(from: 1.5, to: 2.5)), 440, accuracy: 10, name)
        }
    }

    func testMutedStretchBecomesSilence() throws {
        // A peer muted from 1 s to 2 s sends nothing; video keeps coming.
        let url = try makeTemporaryDirectory().appendingPathComponent("muted.mp4")
        try runWithDeadline {
            let recording = try CallRecording(url: url)
            try recording.write(audio: 0..<1_000_000, 2_000_000..<3_000_000)
        }
        guard let read = try runWithDeadline(10, { try readBack(url) }) else { return }
        XCTAssertEqual(read.frames.count, 90)
        XCTAssertEqual(read.audio.duration, 3.0, accuracy: 0.05)
        XCTAssertGreaterThan(read.audio.peak(from: 0.2, to: 0.8), 5000, "tone before the gap")
        XCTAssertLessThan(read.audio.peak(from: 1.1, to: 1.9), 300, "silence in the gap")
        XCTAssertEqual(read.audio.onset(after: 1.5) ?? -1, 2.0, accuracy: 0.05, "the tone resumes at 2 s")
    }

    func testVideoRunningAheadOfTheLagFillsSilence() throws {
        // The muxer must never hold the video back waiting for audio: with no audio at all and a
        // small lag, writing 3 s of video returns promptly and the file gets a silent track.
        let url = try makeTemporaryDirectory().appendingPathComponent("no audio written.webm")
        try runWithDeadline {
            try CallRecording(url: url, audio: AudioTrackFormat(maximumLag: 0.5)).write(audio: [])
        }
        guard let read = try runWithDeadline(10, { try readBack(url) }) else { return }
        XCTAssertEqual(read.frames.count, 90)
        XCTAssertEqual(read.audio.duration, 3.0, accuracy: 0.05)
        XCTAssertLessThan(read.audio.peak(from: 0, to: 3), 300)
    }

    func testLateAudioForAFilledStretchIsDropped() throws {
        // Video reaches 3 s, so with a 1 s lag silence covers 0…2 s; audio then written from 0 s
        // keeps only its part after 2 s.
        let url = try makeTemporaryDirectory().appendingPathComponent("late chunks.mp4")
        try runWithDeadline {
            let writer = try VideoWriter(url: url, width: 64, height: 48, framesPerSecond: 30, audio: AudioTrackFormat(maximumLag: 1))
            let image = RGBImage(width: 64, height: 48)
            for _ in 0..<90 { try writer.write(image) }
            for chunk in 0..<150 {
                try writer.write(audio: Tone.samples(from: chunk * 960, count: 960), at: UInt64(chunk) * 20_000)
            }
            try writer.finish()
        }
        guard let read = try runWithDeadline(10, { try readBack(url) }) else { return }
        XCTAssertEqual(read.audio.duration, 3.0, accuracy: 0.05)
        XCTAssertEqual(read.audio.onset() ?? -1, 2.0 - 0.033, accuracy: 0.05, "tone only after the filled stretch")
    }

    func testAllVideoThenAllAudioWithoutLagLimit() throws {
        // Tools may write the picture first and the sound afterwards: without a lag limit the muxer
        // queues the encoded video until the audio arrives.
        let url = try makeTemporaryDirectory().appendingPathComponent("video first.mp4")
        try runWithDeadline {
            let writer = try VideoWriter(url: url, width: 160, height: 120, framesPerSecond: 30, audio: AudioTrackFormat(maximumLag: nil))
            for i in 0..<90 { try writer.write(MovingSquare.image(frame: i % 40)) }
            for chunk in 0..<150 {
                try writer.write(audio: Tone.samples(from: chunk * 960, count: 960), at: UInt64(chunk) * 20_000)
            }
            try writer.finish()
        }
        guard let read = try runWithDeadline(10, { try readBack(url) }) else { return }
        XCTAssertEqual(read.frames.count, 90)
        XCTAssertEqual(read.audio.duration, 3.0, accuracy: 0.05)
        XCTAssertEqual(read.audio.onset() ?? -1, 0, accuracy: 0.05)
    }

    func testVideoAndAudioFromTwoThreads() throws {
        // A call writes frames from its render thread and audio from its decoder thread.
        let url = try makeTemporaryDirectory().appendingPathComponent("two threads.webm")
        try runWithDeadline {
            let writer = try VideoWriter(url: url, width: 160, height: 120, framesPerSecond: 30, audio: AudioTrackFormat())
            let group = DispatchGroup()
            let errors = NSLock()
            var failures: [Error] = []
            DispatchQueue.global().async(group: group) {
                do {
                    for i in 0..<60 { try writer.write(MovingSquare.image(frame: i % 40), at: UInt64(i) * 33_333) }
                } catch { errors.lock(); failures.append(error); errors.unlock() }
            }
            DispatchQueue.global().async(group: group) {
                do {
                    for chunk in 0..<100 {
                        try writer.write(audio: Tone.samples(from: chunk * 960, count: 960), at: UInt64(chunk) * 20_000)
                    }
                } catch { errors.lock(); failures.append(error); errors.unlock() }
            }
            group.wait()
            XCTAssertTrue(failures.isEmpty, "\(failures)")
            try writer.finish()
        }
        guard let read = try runWithDeadline(10, { try readBack(url) }) else { return }
        XCTAssertEqual(read.frames.count, 60)
        XCTAssertEqual(read.audio.duration, 2.0, accuracy: 0.05)
        XCTAssertEqual(Tone.frequency(read.audio.samples(from: 0.5, to: 1.5)), 440, accuracy: 10)
    }

    func testFramesAtRenderTimes() throws {
        // Calls render when expression frames arrive: irregular times, kept by the file.
        let times: [UInt64] = (0..<40).map { i in UInt64(i) * 33_333 + UInt64((i * 7919) % 9) * 1_000 }
        for name in ["render times.mkv", "render times.mp4", "render times.webm"] {
            let url = try makeTemporaryDirectory().appendingPathComponent(name)
            try runWithDeadline {
                let writer = try VideoWriter(url: url, width: 160, height: 120, framesPerSecond: 30, audio: AudioTrackFormat())
                for (i, time) in times.enumerated() { try writer.write(MovingSquare.image(frame: i), at: time) }
                XCTAssertEqual(writer.framesWritten, 40)
                try writer.finish()
            }
            guard let frames = try runWithDeadline(10, { try readAll(VideoSource(file: url)) }) else { return }
            XCTAssertEqual(frames.count, 40, name)
            for (frame, time) in zip(frames, times) {
                XCTAssertEqual(frame.timestampMicros, time, accuracy: 1_000, "\(name): within the container's millisecond")
            }
        }
    }

    func testStereoChannelsStayApart() throws {
        let url = try makeTemporaryDirectory().appendingPathComponent("stereo.mp4")
        try runWithDeadline {
            let writer = try VideoWriter(url: url, width: 64, height: 48, framesPerSecond: 10, audio: AudioTrackFormat(channels: 2))
            let image = RGBImage(width: 64, height: 48)
            for i in 0..<10 {
                try writer.write(image)
                let left = Tone.samples(frequency: 440, from: i * 4800, count: 4800)
                let right = Tone.samples(frequency: 880, from: i * 4800, count: 4800)
                try writer.write(audio: zip(left, right).flatMap { [$0, $1] }, at: UInt64(i) * 100_000)
            }
            try writer.finish()
        }
        guard let samples = try runWithDeadline(10, { () -> [Int16] in
            let source = try AudioSource(file: url, channels: 2)
            XCTAssertEqual(source.channels, 2)
            return try readAllAudio(source).samples
        }) else { return }
        XCTAssertEqual(samples.count, 96_000, accuracy: 2_000, "1 s of stereo")
        guard samples.count >= 72_000 else { return }
        let middle = samples[(12_000 * 2)..<(36_000 * 2)]
        let left = stride(from: middle.startIndex, to: middle.endIndex, by: 2).map { middle[$0] }
        let right = stride(from: middle.startIndex + 1, to: middle.endIndex, by: 2).map { middle[$0] }
        XCTAssertEqual(Tone.frequency(left), 440, accuracy: 10, "left")
        XCTAssertEqual(Tone.frequency(right), 880, accuracy: 15, "right")
    }

    // MARK: Refusals

    func testAudioTimestampsGoingBackwardsAreRefused() throws {
        let url = try makeTemporaryDirectory().appendingPathComponent("backwards.webm")
        try runWithDeadline {
            let writer = try VideoWriter(url: url, width: 64, height: 48, framesPerSecond: 30, audio: AudioTrackFormat())
            try writer.write(RGBImage(width: 64, height: 48))
            try writer.write(audio: Tone.samples(from: 0, count: 4800), at: 100_000)
            let error = assertMediaError(.invalidArgument) {
                try writer.write(audio: Tone.samples(from: 0, count: 960), at: 50_000)
            }
            XCTAssertTrue(error?.message.contains("backwards") ?? false, error?.message ?? "")
            // The writer is still usable.
            try writer.write(audio: Tone.samples(from: 4800, count: 960), at: 200_000)
            try writer.write(RGBImage(width: 64, height: 48), at: 300_000)
            let videoError = assertMediaError(.invalidArgument) { try writer.write(RGBImage(width: 64, height: 48), at: 300_000) }
            XCTAssertTrue(videoError?.message.contains("not later") ?? false, videoError?.message ?? "")
            try writer.finish()
        }
        XCTAssertNotNil(try runWithDeadline { try AudioSource(file: url) })
    }

    func testAudioArgumentErrors() throws {
        let directory = try makeTemporaryDirectory()
        let image = RGBImage(width: 64, height: 48)
        assertMediaError(.invalidArgument) {
            try VideoWriter(url: directory.appendingPathComponent("f_%03d.png"), width: 64, height: 48, framesPerSecond: 30, audio: AudioTrackFormat())
        }
        assertMediaError(.invalidArgument) {
            try VideoWriter(url: directory.appendingPathComponent("a.mp4"), width: 64, height: 48, framesPerSecond: 30, audio: AudioTrackFormat(sampleRate: 1000))
        }
        assertMediaError(.invalidArgument) {
            try VideoWriter(url: directory.appendingPathComponent("a.mp4"), width: 64, height: 48, framesPerSecond: 30, audio: AudioTrackFormat(channels: 6))
        }
        assertMediaError(.invalidArgument) {
            try VideoWriter(url: directory.appendingPathComponent("a.mp4"), width: 64, height: 48, framesPerSecond: 30, audio: AudioTrackFormat(maximumLag: -1))
        }
        guard let silent = try runWithDeadline(10, {
            try VideoWriter(url: directory.appendingPathComponent("silent.mp4"), width: 64, height: 48, framesPerSecond: 30)
        }) else { return }
        assertMediaError(.invalidState) { try silent.write(audio: [0, 0], at: 0) }
        guard let stereo = try runWithDeadline(10, {
            try VideoWriter(url: directory.appendingPathComponent("stereo.webm"), width: 64, height: 48, framesPerSecond: 30,
                            audio: AudioTrackFormat(channels: 2))
        }) else { return }
        assertMediaError(.invalidArgument) { try stereo.write(audio: [1, 2, 3], at: 0) }
        assertMediaError(.invalidArgument) { try stereo.write(audio: [1, 2], at: VideoWriter.maximumTimestampMicros + 1) }
        assertMediaError(.invalidArgument) { try stereo.write(image, at: VideoWriter.maximumTimestampMicros + 1) }
        try runWithDeadline {
            try stereo.write(image)
            try stereo.finish()
        }
        assertMediaError(.invalidState) { try stereo.write(audio: [1, 2], at: 0) }
    }

    func testAudioSourceErrors() throws {
        let directory = try makeTemporaryDirectory()
        assertMediaError(.notFound) { try AudioSource(file: directory.appendingPathComponent("none.mp4")) }
        assertMediaError(.invalidArgument) { try AudioSource(file: directory) }
        let clip = directory.appendingPathComponent("video only.webm")
        try runWithDeadline {
            let writer = try VideoWriter(url: clip, width: 64, height: 48, framesPerSecond: 10)
            for i in 0..<5 { try writer.write(MovingSquare.image(frame: i, width: 64, height: 48)) }
            try writer.finish()
        }
        let error = assertMediaError(.unsupportedInput) { try AudioSource(file: clip) }
        XCTAssertTrue(error?.message.contains("no audio") ?? false, error?.message ?? "")
        let text = directory.appendingPathComponent("notes.wav")
        try Data(String(repeating: "not audio\n", count: 300).utf8).write(to: text)
        assertMediaError(.unsupportedInput) { try AudioSource(file: text) }
        assertMediaError(.invalidArgument) { try AudioSource(file: clip, channels: 3) }
        assertMediaError(.invalidArgument) { try AudioSource(file: clip, chunkDuration: 0) }
    }

    func testAudioOnlyFileHasNoVideoQuickly() throws {
        // MP4's demuxer queues streams, so an unlinked audio stream does not fail by itself.
        let url = try makeTemporaryDirectory().appendingPathComponent("sound only.mp4")
        let pipeline = try MediaPipeline(description: "audiotestsrc num-buffers=20 ! avenc_aac ! mp4mux ! filesink name=sink")
        try GStreamer.setString(pipeline.element(named: "sink"), "location", url.path)
        pipeline.setState(GST_STATE_PLAYING)
        guard case .endOfStream? = pipeline.next(GST_MESSAGE_EOS | GST_MESSAGE_ERROR, timeout: 10) else {
            return XCTFail("could not make an audio-only MP4")
        }
        pipeline.setState(GST_STATE_NULL)
        let started = Date()
        assertMediaError(.unsupportedInput, within: 5) { try VideoSource(file: url) }
        XCTAssertLessThan(Date().timeIntervalSince(started), 2, "known at preroll, not after the timeout")
        XCTAssertNotNil(try runWithDeadline { try AudioSource(file: url) })
    }

    // MARK: AudioSource and WAV

    func testWAVRoundTripAndAudioSourceChunks() throws {
        let url = try makeTemporaryDirectory().appendingPathComponent("tone.wav")
        let tone = WAVAudio(samples: Tone.samples(from: 0, count: 16_000, rate: 16_000), sampleRate: 16_000)
        try tone.write(to: url)
        XCTAssertEqual(try WAVAudio(contentsOf: url), tone)
        XCTAssertEqual(tone.duration, 1.0, accuracy: 1e-9)

        guard let chunks = try runWithDeadline(10, { () -> [(UInt64, [Int16])] in
            let source = try AudioSource(file: url, sampleRate: 16_000, chunkDuration: 0.02)
            XCTAssertEqual(source.duration ?? 0, 1.0, accuracy: 0.01)
            var chunks: [(UInt64, [Int16])] = []
            var samples: [Int16] = []
            while let time = try source.read(into: &samples) { chunks.append((time, samples)) }
            XCTAssertNil(try source.read(into: &samples), "the end stays the end")
            return chunks
        }) else { return }
        XCTAssertEqual(chunks.count, 50)
        for (i, chunk) in chunks.enumerated() {
            XCTAssertEqual(chunk.0, UInt64(i) * 20_000, accuracy: 1, "timestamp of chunk \(i)")
            XCTAssertEqual(chunk.1.count, 320, "chunk \(i) holds 20 ms")
        }
        XCTAssertEqual(chunks.flatMap(\.1), tone.samples, "WAV decodes losslessly at its own rate")
    }

    func testWAVParsing() throws {
        let stereo = WAVAudio(samples: [1, -1, 300, -300, .max, .min], sampleRate: 44_100, channels: 2)
        XCTAssertEqual(try WAVAudio(data: stereo.data), stereo)
        // Unknown chunks are skipped (odd sizes padded); a truncated data chunk keeps its samples.
        var data = stereo.data
        data.insert(contentsOf: Array("LIST".utf8) + [3, 0, 0, 0, 7, 7, 7, 0], at: 36)
        XCTAssertEqual(try WAVAudio(data: data), stereo)
        XCTAssertEqual(try WAVAudio(data: stereo.data.dropLast(4)).samples, [1, -1, 300, -300])
        for bad in [Data(), Data("RIFF....WAVE".utf8), Data("hello, this is not a wav file at all".utf8)] {
            XCTAssertThrowsError(try WAVAudio(data: bad)) { XCTAssertEqual(($0 as? MediaError)?.kind, .unsupportedInput) }
        }
        var float = stereo.data
        float[20] = 3  // IEEE float
        XCTAssertThrowsError(try WAVAudio(data: float)) { XCTAssertEqual(($0 as? MediaError)?.kind, .unsupportedInput) }
        XCTAssertThrowsError(try WAVAudio(contentsOf: URL(fileURLWithPath: "/nonexistent/x.wav"))) {
            XCTAssertEqual(($0 as? MediaError)?.kind, .notFound)
        }
    }
}

// MARK: - Helpers

/// A sine tone and its measurement.
enum Tone {
    /// `count` samples of a sine at `frequency`, starting at sample `from` (so chunks join up).
    static func samples(frequency: Double = 440, from start: Int, count: Int, rate: Int = AudioTrackTests.rate,
                        amplitude: Double = 12_000) -> [Int16] {
        (start..<start + count).map { Int16((sin(2 * .pi * frequency * Double($0) / Double(rate)) * amplitude).rounded()) }
    }

    /// Frequency from upward zero crossings.
    static func frequency(_ samples: [Int16], rate: Int = AudioTrackTests.rate) -> Double {
        guard samples.count > 1 else { return 0 }
        var crossings = 0
        for i in 1..<samples.count where samples[i - 1] < 0 && samples[i] >= 0 { crossings += 1 }
        return Double(crossings) * Double(rate) / Double(samples.count)
    }
}

/// Decoded audio: samples (mono) from `start` seconds.
struct DecodedAudio {
    var start: Double
    var samples: [Int16]
    var rate = AudioTrackTests.rate

    var duration: Double { Double(samples.count) / Double(rate) }

    /// Samples between two times of the file.
    func samples(from: Double, to: Double) -> [Int16] {
        let lower = max(0, min(samples.count, Int((from - start) * Double(rate))))
        let upper = max(lower, min(samples.count, Int((to - start) * Double(rate))))
        return Array(samples[lower..<upper])
    }

    func peak(from: Double, to: Double) -> Int {
        samples(from: from, to: to).map { abs(Int($0)) }.max() ?? 0
    }

    /// Time of the first loud sample at or after `after` seconds.
    func onset(after: Double = 0) -> Double? {
        let first = max(0, Int((after - start) * Double(rate)))
        guard first < samples.count, let index = samples[first...].firstIndex(where: { abs(Int($0)) > 2000 }) else { return nil }
        return start + Double(index) / Double(rate)
    }
}

/// Reads every chunk; the start is the first chunk's timestamp.
func readAllAudio(_ source: AudioSource) throws -> DecodedAudio {
    var all: [Int16] = []
    var chunk: [Int16] = []
    var start: UInt64?
    while let time = try source.read(into: &chunk) {
        if start == nil { start = time }
        all += chunk
    }
    return DecodedAudio(start: Double(start ?? 0) / 1e6, samples: all, rate: source.sampleRate)
}

/// Video frames and mono audio of a written file.
func readBack(_ url: URL) throws -> (frames: [VideoFrame], audio: DecodedAudio) {
    (try readAll(VideoSource(file: url)), try readAllAudio(AudioSource(file: url)))
}

/// A 3-second call at 640×480, 30 fps, with a 440 Hz tone: frames and 20 ms audio chunks written
/// interleaved in time order, as a call produces them.
struct CallRecording {
    let writer: VideoWriter
    static let width = 640, height = 480

    init(url: URL, audio: AudioTrackFormat = AudioTrackFormat(sampleRate: AudioTrackTests.rate, channels: 1)) throws {
        writer = try VideoWriter(url: url, width: Self.width, height: Self.height, framesPerSecond: 30, audio: audio)
    }

    /// Writes 90 frames and the tone wherever `audio` (µs ranges) says, then finishes.
    func write(audio ranges: Range<UInt64>...) throws {
        try write(audio: ranges)
    }

    func write(audio ranges: [Range<UInt64>]) throws {
        let chunkMicros: UInt64 = 20_000, chunkSamples = 960
        let chunks = ranges.flatMap { range in stride(from: range.lowerBound, to: range.upperBound, by: Int(chunkMicros)) }
        var background = RGBImage(width: Self.width, height: Self.height)
        for i in stride(from: 0, to: background.pixels.count, by: 3) {
            background.pixels[i] = 20; background.pixels[i + 1] = 40; background.pixels[i + 2] = 120
        }
        var nextChunk = 0
        for frame in 0..<90 {
            let frameMicros = UInt64(frame) * 1_000_000 / 30
            while nextChunk < chunks.count, chunks[nextChunk] <= frameMicros {
                let time = chunks[nextChunk]
                try writer.write(audio: Tone.samples(from: Int(time / chunkMicros) * chunkSamples, count: chunkSamples), at: time)
                nextChunk += 1
            }
            var image = background
            // A moving white bar, so frames differ.
            let x = (frame * 6) % (Self.width - 16)
            for y in 200..<280 {
                for column in x..<x + 16 {
                    let p = (y * Self.width + column) * 3
                    image.pixels[p] = 255; image.pixels[p + 1] = 255; image.pixels[p + 2] = 255
                }
            }
            try writer.write(image)
        }
        while nextChunk < chunks.count {
            let time = chunks[nextChunk]
            try writer.write(audio: Tone.samples(from: Int(time / chunkMicros) * chunkSamples, count: chunkSamples), at: time)
            nextChunk += 1
        }
        XCTAssertEqual(writer.framesWritten, 90)
        try writer.finish()
    }
}
