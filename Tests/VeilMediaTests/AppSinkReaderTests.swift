import Foundation
import VeilCore
import XCTest
import CGStreamer
@testable import VeilMedia

/// The appsink machinery the video and audio readers share: counting, the end, stalls that stick,
/// and each reader's own wording of the errors it maps.
final class AppSinkReaderTests: XCTestCase {
    private func wording(_ name: String) -> AppSinkReader.Wording {
        AppSinkReader.Wording(name: name, missingKind: .notFound, missingAdvice: "check it exists",
                              prerollAdvice: "check it prerolls", startAdvice: "check it starts",
                              undecodable: "cannot be decoded", missingStream: MediaError(.unsupportedInput, "\(name) is empty"),
                              input: "input", sample: "frame", samples: "frames")
    }

    func testPullCountsSamplesUntilTheEnd() throws {
        let counts = try runWithDeadline { () -> [Int] in
            let pipeline = try MediaPipeline(description: "videotestsrc num-buffers=3 ! video/x-raw,format=RGB,width=8,height=8 ! appsink name=sink sync=false")
            let reader = try AppSinkReader(pipeline: pipeline, wording: self.wording("test clip"), timeout: 5)
            try reader.preroll()
            try reader.play()
            var counts: [Int] = []
            while try reader.pull({ _ in reader.samplesRead }) != nil { counts.append(reader.samplesRead) }
            XCTAssertNil(try reader.pull { _ in () }, "the end stays the end")
            return counts
        }
        XCTAssertEqual(counts, [1, 2, 3])
    }

    func testStallsTimeOutWithTheOwnersWordsAndStick() throws {
        // An appsrc nobody feeds: it never prerolls and never delivers.
        let prerolling = try MediaPipeline(description: "appsrc ! appsink name=sink")
        let unstarted = try AppSinkReader(pipeline: prerolling, wording: wording("idle source"), timeout: 0.2)
        let startError = assertMediaError(.timedOut) { try unstarted.preroll() }
        XCTAssertEqual(startError?.message, "idle source did not start within 0 s; check it prerolls")

        let playing = try MediaPipeline(description: "appsrc ! appsink name=sink")
        let reader = try AppSinkReader(pipeline: playing, wording: wording("idle source"), timeout: 0.2)
        try reader.play()
        let stall = assertMediaError(.timedOut) { try reader.pull { _ in () } }
        XCTAssertEqual(stall?.message, "idle source delivered no frame within 0 s after 0 frames; check the input")
        let started = Date()
        let again = assertMediaError(.timedOut) { try reader.pull { _ in () } }
        XCTAssertEqual(again?.message, stall?.message)
        XCTAssertLessThan(Date().timeIntervalSince(started), 0.15, "a failure is thrown again at once")
    }

    func testAFailingCopySticks() throws {
        let pipeline = try MediaPipeline(description: "videotestsrc num-buffers=3 ! video/x-raw,format=RGB,width=8,height=8 ! appsink name=sink sync=false")
        let reader = try AppSinkReader(pipeline: pipeline, wording: wording("test clip"), timeout: 5)
        try reader.preroll()
        try reader.play()
        let broken = MediaError(.streamFailed, "test clip delivered a broken frame")
        let error = assertMediaError(.streamFailed) { try reader.pull { _ in throw broken } }
        XCTAssertEqual(error?.message, broken.message)
        XCTAssertEqual(reader.samplesRead, 0)
        XCTAssertEqual(assertMediaError(.streamFailed) { try reader.pull { _ in () } }?.message, broken.message)
    }

    func testVideoAndAudioReadersKeepTheirOwnMessages() throws {
        let directory = try makeTemporaryDirectory()
        let sound = directory.appendingPathComponent("tone.wav")
        try WAVAudio(samples: Tone.samples(from: 0, count: 3_200, rate: 16_000), sampleRate: 16_000).write(to: sound)
        XCTAssertEqual(assertMediaError(.unsupportedInput) { try VideoSource(file: sound) }?.message,
                       "video file \(sound.path) contains no video frames; give a video, an image or an image sequence")

        let clip = directory.appendingPathComponent("video only.webm")
        try runWithDeadline {
            let writer = try VideoWriter(url: clip, width: 64, height: 48, framesPerSecond: 10)
            for i in 0..<5 { try writer.write(MovingSquare.image(frame: i, width: 64, height: 48)) }
            try writer.finish()
        }
        XCTAssertEqual(assertMediaError(.unsupportedInput) { try AudioSource(file: clip) }?.message,
                       "audio of \(clip.path) is empty: the file holds no audio stream; give a file with sound")

        let text = directory.appendingPathComponent("notes.mkv")
        try Data(String(repeating: "not media\n", count: 300).utf8).write(to: text)
        let plugins = "; check the file, or install the GStreamer plugin for its format (gstreamer1.0-libav, gstreamer1.0-plugins-good/bad/ugly)"
        let video = assertMediaError(.unsupportedInput) { try VideoSource(file: text) }?.message ?? ""
        XCTAssertTrue(video.hasPrefix("video file \(text.path) is not a video or image GStreamer can decode: ") && video.hasSuffix(plugins), video)
        let audio = assertMediaError(.unsupportedInput) { try AudioSource(file: text) }?.message ?? ""
        XCTAssertTrue(audio.hasPrefix("audio of \(text.path) cannot be decoded: ") && audio.hasSuffix(plugins), audio)
    }
}
