import Foundation
import VeilCore
import VeilVision
import XCTest
import CGStreamer
@testable import VeilMedia

/// Every failure is a thrown MediaError with a useful message, quickly, without a hang or a crash.
final class ErrorTests: XCTestCase {
    func testMissingInputs() throws {
        let directory = try makeTemporaryDirectory()
        let missing = directory.appendingPathComponent("no such clip.mp4")
        let error = assertMediaError(.notFound) { try VideoSource(file: missing) }
        XCTAssertTrue(error?.message.contains(missing.path) ?? false, error?.message ?? "")
        assertMediaError(.notFound) { try VideoSource(image: directory.appendingPathComponent("none.png")) }
        assertMediaError(.notFound) { try ImageIO.load(directory.appendingPathComponent("none.jpg")) }
        assertMediaError(.notFound) { try VideoSource.open(missing.path) }
        assertMediaError(.notFound) { try VideoSource(imageSequence: directory.appendingPathComponent("f_%05d.png").path, framesPerSecond: 30) }
        assertMediaError(.notFound) { try VideoSource(imageDirectory: directory, framesPerSecond: 30) }
        assertMediaError(.notFound) { try VideoSource(imageDirectory: missing, framesPerSecond: 30) }
        assertMediaError(.invalidArgument) { try VideoSource(file: directory) }
    }

    func testFilesThatAreNotMedia() throws {
        let directory = try makeTemporaryDirectory()
        let text = directory.appendingPathComponent("notes.mp4")
        try Data(String(repeating: "this is not a video\n", count: 200).utf8).write(to: text)
        let error = assertMediaError(.unsupportedInput) { try VideoSource(file: text) }
        XCTAssertTrue(error?.message.contains(text.path) ?? false, error?.message ?? "")

        let fakePNG = directory.appendingPathComponent("fake.png")
        try Data((0..<5000).map { UInt8(truncatingIfNeeded: $0 &* 2654435761 >> 7) }).write(to: fakePNG)
        assertMediaError(.unsupportedInput) { try ImageIO.load(fakePNG) }

        let empty = directory.appendingPathComponent("empty.webm")
        try Data().write(to: empty)
        assertMediaError(.unsupportedInput) { try VideoSource(file: empty) }

        let badPPM = directory.appendingPathComponent("bad.ppm")
        try Data("P6\n100 100\n255\nshort".utf8).write(to: badPPM)
        assertMediaError(.unsupportedInput) { try ImageIO.load(badPPM) }
    }

    func testAudioOnlyFileHasNoVideo() throws {
        // A valid WAV file: GStreamer decodes it, but there is no picture in it.
        let url = try makeTemporaryDirectory().appendingPathComponent("tone.wav")
        try wav(seconds: 0.2).write(to: url)
        assertMediaError(.unsupportedInput) { try VideoSource(file: url) }
    }

    func testVideoWithAudioTrackReadsTheVideo() throws {
        // Audio first in the file, so the decoder offers an audio stream before the video one.
        let url = try makeTemporaryDirectory().appendingPathComponent("with audio.mkv")
        let pipeline = try MediaPipeline(description: """
            audiotestsrc num-buffers=20 ! vorbisenc ! mux. \
            videotestsrc num-buffers=10 ! video/x-raw,width=64,height=48,framerate=10/1 ! x264enc ! mux. \
            matroskamux name=mux ! filesink name=sink
            """)
        try GStreamer.setString(pipeline.element(named: "sink"), "location", url.path)
        pipeline.setState(GST_STATE_PLAYING)
        guard case .endOfStream? = pipeline.next(GST_MESSAGE_EOS | GST_MESSAGE_ERROR, timeout: 20) else {
            return XCTFail("could not make the test file")
        }
        pipeline.setState(GST_STATE_NULL)
        let source = try VideoSource(file: url)
        XCTAssertEqual(source.size.width, 64)
        XCTAssertEqual(try runWithDeadline { try readAll(source) }?.count, 10)
    }

    func testTruncatedVideoEndsOrFailsCleanly() throws {
        let directory = try makeTemporaryDirectory()
        let url = directory.appendingPathComponent("clip.webm")
        let writer = try VideoWriter(url: url, width: 160, height: 120, framesPerSecond: 30)
        for i in 0..<30 { try writer.write(MovingSquare.image(frame: i)) }
        try writer.finish()
        let bytes = try Data(contentsOf: url)
        try bytes.prefix(bytes.count / 2).write(to: url)
        // Either fewer frames and a clean end, or a thrown error: never a hang or 30 frames.
        do {
            if let frames = try runWithDeadline(10, { try readAll(VideoSource(file: url)) }) {
                XCTAssertLessThan(frames.count, 30)
            }
        } catch let error as MediaError {
            XCTAssertTrue([.streamFailed, .unsupportedInput].contains(error.kind), error.message)
        }
    }

    func testMissingCamera() {
        let error = assertMediaError(.cameraUnavailable) { try VideoSource(camera: "/dev/video97") }
        XCTAssertEqual(error?.message.hasPrefix("no camera at /dev/video97"), true, error?.message ?? "")
        assertMediaError(.cameraUnavailable) { try VideoSource.open("/dev/video98") }
    }

    func testDeviceThatIsNotACamera() {
        // Exists, so the check before GStreamer passes; v4l2src must then fail cleanly.
        let error = assertMediaError(.cameraUnavailable) { try VideoSource(camera: "/dev/null") }
        XCTAssertTrue(error?.message.contains("/dev/null") ?? false, error?.message ?? "")
    }

    func testUnwritableOutputs() throws {
        assertMediaError(.notWritable) { try VideoWriter(url: URL(fileURLWithPath: "/proc/x.mp4"), width: 64, height: 48, framesPerSecond: 30) }
        let missingDirectory = try makeTemporaryDirectory().appendingPathComponent("not there", isDirectory: true)
        let error = assertMediaError(.notWritable) {
            try VideoWriter(url: missingDirectory.appendingPathComponent("a.webm"), width: 64, height: 48, framesPerSecond: 30)
        }
        XCTAssertTrue(error?.message.contains("does not exist") ?? false, error?.message ?? "")
        assertMediaError(.notWritable) {
            try VideoWriter(url: missingDirectory.appendingPathComponent("f_%03d.png"), width: 64, height: 48, framesPerSecond: 30)
        }
        assertMediaError(.notWritable) { try ImageIO.savePNG(MovingSquare.image(frame: 0), to: missingDirectory.appendingPathComponent("a.png")) }
        assertMediaError(.notWritable) { try ImageIO.savePNG(MovingSquare.image(frame: 0), to: URL(fileURLWithPath: "/proc/veil.png")) }
    }

    func testOutputDirectoryRemovedWhileWriting() throws {
        let directory = try makeTemporaryDirectory().appendingPathComponent("frames", isDirectory: true)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        // Frames big enough that PNG encoding is slower than `write`: the writer's queue is full and
        // `write` is blocked when the sink fails, which must unblock it rather than hang.
        let writer = try VideoWriter(url: directory.appendingPathComponent("f_%04d.png"), width: 640, height: 480, framesPerSecond: 30)
        let frames = (0..<4).map { MovingSquare.image(frame: $0 * 10, width: 640, height: 480) }
        try writer.write(frames[0])
        try FileManager.default.removeItem(at: directory)
        // The sink fails on a streaming thread; a later write or finish must report it, not block.
        let error = assertMediaError(.notWritable) {
            for i in 1..<100 { try writer.write(frames[i % 4]) }
            try writer.finish()
        }
        XCTAssertTrue(error?.message.contains("f_%04d.png") ?? false, error?.message ?? "")
    }

    func testWrongFrameSizeAndMisuse() throws {
        let directory = try makeTemporaryDirectory()
        let writer = try VideoWriter(url: directory.appendingPathComponent("a.mp4"), width: 64, height: 48, framesPerSecond: 30)
        let error = assertMediaError(.invalidArgument) { try writer.write(RGBImage(width: 48, height: 64)) }
        XCTAssertTrue(error?.message.contains("48×64") ?? false, error?.message ?? "")
        // The writer is still usable after a rejected frame.
        for i in 0..<3 { try writer.write(MovingSquare.image(frame: i, width: 64, height: 48)) }
        try writer.finish()
        try writer.finish()  // idempotent
        assertMediaError(.invalidState) { try writer.write(MovingSquare.image(frame: 0, width: 64, height: 48)) }
        XCTAssertEqual(try readAll(VideoSource(file: directory.appendingPathComponent("a.mp4"))).count, 3)

        assertMediaError(.invalidArgument) { try VideoWriter(url: directory.appendingPathComponent("a.avi"), width: 64, height: 48, framesPerSecond: 30) }
        assertMediaError(.invalidArgument) { try VideoWriter(url: directory.appendingPathComponent("a.png"), width: 64, height: 48, framesPerSecond: 30) }
        assertMediaError(.invalidArgument) { try VideoWriter(url: directory.appendingPathComponent("odd.mp4"), width: 65, height: 48, framesPerSecond: 30) }
        assertMediaError(.invalidArgument) { try VideoWriter(url: directory.appendingPathComponent("a.mp4"), width: 0, height: 48, framesPerSecond: 30) }
        assertMediaError(.invalidArgument) { try VideoWriter(url: directory.appendingPathComponent("a.mp4"), width: 64, height: 48, framesPerSecond: 0) }
        assertMediaError(.invalidArgument) { try VideoWriter(url: directory.appendingPathComponent("f_%s.png"), width: 64, height: 48, framesPerSecond: 30) }
        assertMediaError(.invalidArgument) { try VideoSource(imageSequence: directory.appendingPathComponent("f_%d_%d.png").path, framesPerSecond: 30) }
        assertMediaError(.invalidArgument) { try VideoSource(imageSequence: directory.appendingPathComponent("f_%d.png").path, framesPerSecond: 0) }
        assertMediaError(.invalidArgument) { try VideoSource(file: directory.appendingPathComponent("a.mp4"), width: 0) }
        assertMediaError(.invalidArgument) { try VideoSource(file: directory.appendingPathComponent("a.mp4"), timeout: .infinity) }
        assertMediaError(.invalidArgument) { try VideoSource(camera: "/dev/null", timeout: .nan) }
        assertMediaError(.invalidArgument) { try VideoWriter(url: directory.appendingPathComponent("b.mp4"), width: 64, height: 48, framesPerSecond: 30, timeout: 0) }
    }

    func testWritersAndReadersCanBeDroppedEarly() throws {
        let directory = try makeTemporaryDirectory()
        let url = directory.appendingPathComponent("a.mp4")
        let firstFrameRead = try runWithDeadline { () -> Bool? in
            // Never finished: deinit stops the pipeline without blocking.
            var writer: VideoWriter? = try VideoWriter(url: directory.appendingPathComponent("unfinished.mp4"), width: 64, height: 48, framesPerSecond: 30)
            try writer?.write(MovingSquare.image(frame: 0, width: 64, height: 48))
            writer = nil

            let complete = try VideoWriter(url: url, width: 64, height: 48, framesPerSecond: 30)
            for i in 0..<30 { try complete.write(MovingSquare.image(frame: i, width: 64, height: 48)) }
            try complete.finish()
            // The decoder is blocked on a full queue when the source goes away.
            var source: VideoSource? = try VideoSource(file: url)
            var frame = emptyFrame()
            defer { source = nil }
            return try source?.read(into: &frame)
        }
        XCTAssertEqual(firstFrameRead, true)
    }

    func testFinishWithoutFramesIsAnError() throws {
        let directory = try makeTemporaryDirectory()
        for name in ["empty.mp4", "empty.webm", "e_%03d.png"] {
            let writer = try VideoWriter(url: directory.appendingPathComponent(name), width: 64, height: 48, framesPerSecond: 30)
            let error = assertMediaError(.invalidState) { try writer.finish() }
            XCTAssertTrue(error?.message.contains("no frames") ?? false, error?.message ?? "")
        }
    }

    /// 16-bit mono PCM WAV of a 440 Hz tone.
    private func wav(seconds: Double) -> Data {
        let rate = 16000, samples = Int(Double(rate) * seconds)
        var data = Data()
        func u32(_ v: Int) { withUnsafeBytes(of: UInt32(v).littleEndian) { data.append(contentsOf: $0) } }
        func u16(_ v: Int) { withUnsafeBytes(of: UInt16(v).littleEndian) { data.append(contentsOf: $0) } }
        data.append(contentsOf: Array("RIFF".utf8)); u32(36 + samples * 2); data.append(contentsOf: Array("WAVE".utf8))
        data.append(contentsOf: Array("fmt ".utf8)); u32(16); u16(1); u16(1); u32(rate); u32(rate * 2); u16(2); u16(16)
        data.append(contentsOf: Array("data".utf8)); u32(samples * 2)
        for i in 0..<samples { u16(Int(UInt16(bitPattern: Int16(sin(Double(i) * 2 * .pi * 440 / Double(rate)) * 8000)))) }
        return data
    }
}
