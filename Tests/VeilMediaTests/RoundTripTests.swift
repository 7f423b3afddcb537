import Foundation
import VeilCore
import VeilVision
import XCTest
import CGStreamer
@testable import VeilMedia

/// Writes generated clips and reads them back through GStreamer.
final class RoundTripTests: XCTestCase {
    private func writeClip(to url: URL, frames: Int = 30, fps: Int = 30) throws {
        let writer = try VideoWriter(url: url, width: 160, height: 120, framesPerSecond: fps)
        for i in 0..<frames { try writer.write(MovingSquare.image(frame: i)) }
        XCTAssertEqual(writer.framesWritten, frames)
        try writer.finish()
    }

    /// Checks a lossy read-back: count, size, colours, motion and timestamps.
    private func checkLossyClip(_ url: URL, tolerance: Int) throws {
        let source = try VideoSource(file: url)
        XCTAssertEqual(source.size.width, 160)
        XCTAssertEqual(source.size.height, 120)
        XCTAssertEqual(source.framesPerSecond ?? 0, 30, accuracy: 0.01)
        if let count = source.estimatedFrameCount { XCTAssertEqual(count, 30) }
        if let duration = source.duration { XCTAssertEqual(duration, 1.0, accuracy: 0.05) }

        let frames = try readAll(source)
        XCTAssertEqual(frames.count, 30)
        for (i, frame) in frames.enumerated() {
            XCTAssertEqual(frame.image.width, 160); XCTAssertEqual(frame.image.height, 120)
            let origin = MovingSquare.squareOrigin(frame: i)
            assertColour(pixel(frame.image, origin.x + 12, origin.y + 12), MovingSquare.square, tolerance: tolerance, "square, frame \(i)")
            assertColour(pixel(frame.image, 150, 10), MovingSquare.background, tolerance: tolerance, "background, frame \(i)")
            guard let centre = MovingSquare.squareCentre(frame.image) else { XCTFail("no square in frame \(i)"); continue }
            XCTAssertEqual(centre.x, Double(origin.x) + 11.5, accuracy: 1.0, "square position, frame \(i)")
            XCTAssertEqual(frame.timestampMicros, UInt64(i) * 1_000_000 / 30, accuracy: 1_000, "timestamp of frame \(i)")
        }
        XCTAssertEqual(frames.map(\.timestampMicros), frames.map(\.timestampMicros).sorted())
        XCTAssertEqual(Set(frames.map(\.timestampMicros)).count, frames.count, "timestamps must be distinct")
        // After the end, reading stays at the end.
        var frame = emptyFrame()
        XCTAssertFalse(try source.read(into: &frame))
    }

    func testMP4RoundTrip() throws {
        let url = try makeTemporaryDirectory().appendingPathComponent("clip one.mp4")
        try writeClip(to: url)
        try checkLossyClip(url, tolerance: 40)
    }

    func testWebMRoundTrip() throws {
        let url = try makeTemporaryDirectory().appendingPathComponent("clip 'two'.webm")
        try writeClip(to: url)
        try checkLossyClip(url, tolerance: 40)
    }

    func testMatroskaRoundTrip() throws {
        let url = try makeTemporaryDirectory().appendingPathComponent("clip.mkv")
        try writeClip(to: url)
        try checkLossyClip(url, tolerance: 40)
    }

    func testPNGSequenceIsLossless() throws {
        let directory = try makeTemporaryDirectory()
        let pattern = directory.appendingPathComponent("frame_%05d.png").path
        let writer = try VideoWriter(url: URL(fileURLWithPath: pattern), width: 160, height: 120, framesPerSecond: 25)
        for i in 0..<12 { try writer.write(MovingSquare.image(frame: i)) }
        try writer.finish()
        XCTAssertTrue(FileManager.default.fileExists(atPath: directory.appendingPathComponent("frame_00000.png").path))
        XCTAssertTrue(FileManager.default.fileExists(atPath: directory.appendingPathComponent("frame_00011.png").path))
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory.appendingPathComponent("frame_00012.png").path))

        let source = try VideoSource(imageSequence: pattern, framesPerSecond: 25)
        XCTAssertEqual(source.estimatedFrameCount, 12)
        XCTAssertEqual(source.framesPerSecond ?? 0, 25, accuracy: 1e-9)
        let frames = try readAll(source)
        XCTAssertEqual(frames.count, 12)
        for (i, frame) in frames.enumerated() {
            XCTAssertEqual(frame.image.pixels, MovingSquare.image(frame: i).pixels, "frame \(i) must be exact")
            XCTAssertEqual(frame.timestampMicros, UInt64(i) * 40_000, accuracy: 1)
        }

        // The same files as a directory, and through `open`.
        let fromDirectory = try readAll(VideoSource(imageDirectory: directory, framesPerSecond: 25))
        XCTAssertEqual(fromDirectory.map(\.image.pixels), frames.map(\.image.pixels))
        XCTAssertEqual(fromDirectory.map(\.timestampMicros), frames.map(\.timestampMicros))
        XCTAssertEqual(try readAll(VideoSource.open(pattern, sequenceFramesPerSecond: 25)).count, 12)
        XCTAssertEqual(try readAll(VideoSource.open(directory.path)).count, 12)
    }

    func testJPEGSequence() throws {
        let directory = try makeTemporaryDirectory()
        let pattern = directory.appendingPathComponent("f_%03d.jpg").path
        let writer = try VideoWriter(url: URL(fileURLWithPath: pattern), width: 160, height: 120, framesPerSecond: 10)
        for i in 0..<5 { try writer.write(MovingSquare.image(frame: i)) }
        try writer.finish()
        let frames = try readAll(VideoSource(imageSequence: pattern, framesPerSecond: 10))
        XCTAssertEqual(frames.count, 5)
        for (i, frame) in frames.enumerated() {
            let origin = MovingSquare.squareOrigin(frame: i)
            assertColour(pixel(frame.image, origin.x + 12, origin.y + 12), MovingSquare.square, tolerance: 30, "square, frame \(i)")
            XCTAssertEqual(frame.timestampMicros, UInt64(i) * 100_000, accuracy: 1)
        }
        // A still opened from a video yields only its first frame.
        let clip = directory.appendingPathComponent("clip.webm")
        try writeClip(to: clip, frames: 5)
        XCTAssertEqual(try readAll(VideoSource(image: clip)).count, 1)
    }

    func testSequenceStartingAtOne() throws {
        let directory = try makeTemporaryDirectory()
        for i in 1...3 {
            try ImageIO.savePNG(MovingSquare.image(frame: i), to: directory.appendingPathComponent("f\(i).png"))
        }
        let frames = try readAll(VideoSource(imageSequence: directory.appendingPathComponent("f%d.png").path, framesPerSecond: 10))
        XCTAssertEqual(frames.count, 3)
        XCTAssertEqual(frames.first?.image.pixels, MovingSquare.image(frame: 1).pixels)
        XCTAssertEqual(frames.last?.image.pixels, MovingSquare.image(frame: 3).pixels)
    }

    func testScaledRead() throws {
        let url = try makeTemporaryDirectory().appendingPathComponent("clip.mp4")
        try writeClip(to: url, frames: 5)
        let both = try VideoSource(file: url, width: 80, height: 40)
        XCTAssertEqual(both.size.width, 80); XCTAssertEqual(both.size.height, 40)
        let frames = try readAll(both)
        XCTAssertEqual(frames.count, 5)
        XCTAssertEqual(frames.first?.image.width, 80); XCTAssertEqual(frames.first?.image.height, 40)
        let widthOnly = try VideoSource(file: url, width: 80)
        XCTAssertEqual(widthOnly.size.width, 80); XCTAssertEqual(widthOnly.size.height, 60, "aspect ratio kept")
    }

    func testImageSaveAndLoadIsLossless() throws {
        let url = try makeTemporaryDirectory().appendingPathComponent("odd size.png")
        // An odd width exercises padded rows (stride 4-aligned, 3 bytes per pixel).
        var image = RGBImage(width: 33, height: 7)
        for i in image.pixels.indices { image.pixels[i] = UInt8(truncatingIfNeeded: i * 7 + i / 3) }
        try ImageIO.savePNG(image, to: url)
        let loaded = try ImageIO.load(url)
        XCTAssertEqual(loaded.width, 33); XCTAssertEqual(loaded.height, 7)
        XCTAssertEqual(loaded.pixels, image.pixels)
        // Saving again replaces the file.
        try ImageIO.savePNG(MovingSquare.image(frame: 0), to: url)
        XCTAssertEqual(try ImageIO.load(url).pixels, MovingSquare.image(frame: 0).pixels)
    }

    func testReadReusesTheFrameStorage() throws {
        let url = try makeTemporaryDirectory().appendingPathComponent("clip.webm")
        try writeClip(to: url, frames: 4)
        let source = try VideoSource(file: url)
        var frame = emptyFrame()
        XCTAssertTrue(try source.read(into: &frame))
        let address = frame.image.pixels.withUnsafeBufferPointer { $0.baseAddress }
        while try source.read(into: &frame) {
            XCTAssertEqual(frame.image.pixels.withUnsafeBufferPointer { $0.baseAddress }, address, "no reallocation while the size stays")
        }
    }
}

/// Less common inputs: other pixel formats, concurrent readers.
final class InputVarietyTests: XCTestCase {
    func testGrayAndAlphaPNGsLoadAsRGB() throws {
        let directory = try makeTemporaryDirectory()
        for format in ["GRAY8", "RGBA", "GRAY16_BE"] {
            let url = directory.appendingPathComponent("\(format).png")
            let pipeline = try MediaPipeline(description: """
                videotestsrc num-buffers=1 pattern=smpte ! video/x-raw,format=\(format),width=33,height=7 ! pngenc ! filesink name=sink
                """)
            try GStreamer.setString(pipeline.element(named: "sink"), "location", url.path)
            pipeline.setState(GST_STATE_PLAYING)
            guard case .endOfStream? = pipeline.next(GST_MESSAGE_EOS | GST_MESSAGE_ERROR, timeout: 10) else {
                return XCTFail("could not make a \(format) PNG")
            }
            pipeline.setState(GST_STATE_NULL)

            let image = try ImageIO.load(url)
            XCTAssertEqual(image.width, 33, format); XCTAssertEqual(image.height, 7, format)
            XCTAssertEqual(image.pixels.count, 33 * 7 * 3, format)
            if format.hasPrefix("GRAY") {
                // 8-bit gray is exact; 16-bit goes through videoconvert's fixed-point matrix (±1).
                let tolerance = format == "GRAY8" ? 0 : 1
                for p in stride(from: 0, to: image.pixels.count, by: 3) {
                    XCTAssertLessThanOrEqual(abs(Int(image.pixels[p]) - Int(image.pixels[p + 1])), tolerance, format)
                    XCTAssertLessThanOrEqual(abs(Int(image.pixels[p]) - Int(image.pixels[p + 2])), tolerance, format)
                }
            }
            XCTAssertGreaterThan(Set(image.pixels).count, 3, "\(format): the test pattern has several shades")
        }
    }

    func testConcurrentReadersShareTheFrames() throws {
        let url = try makeTemporaryDirectory().appendingPathComponent("clip.mp4")
        let writer = try VideoWriter(url: url, width: 64, height: 48, framesPerSecond: 30)
        for i in 0..<30 { try writer.write(MovingSquare.image(frame: i % 10, width: 64, height: 48)) }
        try writer.finish()

        let source = try VideoSource(file: url)
        let lock = NSLock()
        var timestamps: [UInt64] = []
        DispatchQueue.concurrentPerform(iterations: 3) { _ in
            var frame = emptyFrame()
            while (try? source.read(into: &frame)) == true {
                lock.lock(); timestamps.append(frame.timestampMicros); lock.unlock()
            }
        }
        // Each frame went to exactly one reader.
        XCTAssertEqual(timestamps.count, 30)
        XCTAssertEqual(Set(timestamps).count, 30)
    }
}
