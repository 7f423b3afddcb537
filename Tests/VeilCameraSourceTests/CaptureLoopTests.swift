import Foundation
import Synchronization
import VeilCameraSource
import VeilCore
import VeilExpressionSource
import VeilMedia
import VeilVision
import XCTest

/// The capture loop `veil call`, `veil track` and `veil render` share, run on real pictures of a
/// face: a video file, and directories of photos (frame i at i/30 s).
final class CaptureLoopTests: XCTestCase {
    var work: URL!

    override func setUpWithError() throws {
        work = FileManager.default.temporaryDirectory.appendingPathComponent("veil-capture-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        if let work { try? FileManager.default.removeItem(at: work) }
    }

    /// What a run handed on, frame by frame.
    struct Handed {
        var index: Int
        var timestamp: UInt64
        var time: UInt64
        var captureTime: UInt64
        var sequence: UInt32
        var trackingMilliseconds: Double
    }

    func handOn(_ loop: CaptureLoop, _ options: CaptureLoop.Options, while keepGoing: () -> Bool = { true }) throws -> [Handed] {
        var handed: [Handed] = []
        try loop.run(options, while: keepGoing) { frame in
            handed.append(Handed(index: frame.index, timestamp: frame.video.timestampMicros, time: frame.timeMicros,
                                 captureTime: frame.output.frame.captureTimeMicros, sequence: frame.output.frame.sequence,
                                 trackingMilliseconds: frame.trackingMilliseconds))
        }
        return handed
    }

    /// `count` copies of a face photo in a directory; `unreadable` names a frame that is text, not
    /// a picture.
    func photoDirectory(_ count: Int, unreadable: Int? = nil) throws -> String {
        let directory = work.appendingPathComponent("photos-\(count)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let photo = try VeilResources.file("photos", "takeo.ppm")
        for i in 0..<count {
            let file = directory.appendingPathComponent("\(i).ppm")
            if i == unreadable {
                try "P6 this is not a picture".write(to: file, atomically: true, encoding: .utf8)
            } else {
                try FileManager.default.copyItem(at: photo, to: file)
            }
        }
        return directory.path
    }

    /// Every frame of a video file, in order, each with the timestamp the file gives it (read
    /// here with VeilMedia alone), stamped with it, and with how long tracking took.
    func testRunsToTheInputsEndHandingOnEveryFrameInOrderWithItsTimestamp() throws {
        let photo = try ImageIO.load(try VeilResources.file("photos", "astronaut.png"))
        let clip = work.appendingPathComponent("clip.mp4")
        let writer = try VideoWriter(url: clip, width: photo.width, height: photo.height, framesPerSecond: 30)
        for _ in 0..<12 { try writer.write(photo) }
        try writer.finish()
        var timestamps: [UInt64] = []
        let reader = try VideoSource(file: clip)
        var frame = VideoFrame(image: RGBImage(width: 0, height: 0), timestampMicros: 0)
        while try reader.read(into: &frame) { timestamps.append(frame.timestampMicros) }
        XCTAssertEqual(timestamps.count, 12)

        let loop = try CaptureLoop(path: clip.path, privacy: .off)
        XCTAssertFalse(loop.isLive)
        XCTAssertEqual(loop.framesPerSecond, 30, accuracy: 0.01)
        let handed = try handOn(loop, CaptureLoop.Options())
        XCTAssertEqual(handed.map(\.index), Array(0..<timestamps.count))
        XCTAssertEqual(handed.map(\.timestamp), timestamps)
        XCTAssertEqual(handed.map(\.time), timestamps, "one pass: the run's timeline is the file's")
        XCTAssertEqual(handed.map(\.captureTime), timestamps, "stamped with the input's times")
        XCTAssertEqual(handed.map(\.sequence), (0..<UInt32(timestamps.count)).map { $0 })
        XCTAssertTrue(handed.allSatisfy { $0.trackingMilliseconds > 0 })
    }

    func testAFrameLimitOrAStopEndsTheRun() throws {
        let path = try photoDirectory(10)
        let limited = try CaptureLoop(path: path, privacy: .standard)
        let options = CaptureLoop.Options(frameLimit: 4)
        XCTAssertEqual(limited.expectedFrameCount(options), 4)
        XCTAssertEqual(limited.expectedFrameCount(CaptureLoop.Options()), 10)
        let handed = try handOn(limited, options)
        XCTAssertEqual(handed.map(\.index), [0, 1, 2, 3])
        XCTAssertEqual(handed.map(\.timestamp), [0, 33_333, 66_667, 100_000])

        // Asked before every read: after two frames, no third is read.
        let stopped = try CaptureLoop(path: path, privacy: .standard)
        var count = 0
        let two = try handOn(stopped, CaptureLoop.Options(), while: { count += 1; return count <= 2 })
        XCTAssertEqual(two.map(\.index), [0, 1])
    }

    /// A real-time run tracks no frame before its time: the last of ten frames at 30 fps comes at
    /// least 0.3 s after the run started, on the clock the loop was given.
    func testARealTimeRunPacesTheFramesByTheirTimestamps() throws {
        let clock: @Sendable () -> UInt64 = { DispatchTime.now().uptimeNanoseconds / 1000 }
        let loop = try CaptureLoop(path: try photoDirectory(10), privacy: .off, clock: clock)
        let started = clock()
        let handed = try handOn(loop, CaptureLoop.Options(pacing: .realTime, captureTime: .clock))
        XCTAssertEqual(handed.count, 10)
        XCTAssertEqual(handed.map(\.captureTime), handed.map(\.captureTime).sorted(), "stamped on the clock as tracked")
        let last = try XCTUnwrap(handed.last)
        XCTAssertEqual(last.timestamp, 300_000)
        XCTAssertGreaterThanOrEqual(last.captureTime - started, 300_000 - 1_000)
    }

    /// Started over at its end, a file goes on with rising times: the second pass begins one frame
    /// interval after the first one's last frame.
    func testAFileStartsOverWithItsTimesGoingOn() throws {
        let loop = try CaptureLoop(path: try photoDirectory(5), privacy: .off)
        let options = CaptureLoop.Options(atEnd: .startOver, frameLimit: 12)
        XCTAssertEqual(loop.expectedFrameCount(options), 12)
        XCTAssertNil(loop.expectedFrameCount(CaptureLoop.Options(atEnd: .startOver)), "only a stop ends it")
        let handed = try handOn(loop, options)
        XCTAssertEqual(handed.map(\.index), Array(0..<12))
        XCTAssertEqual(handed.map(\.timestamp), [0, 33_333, 66_667, 100_000, 133_333, 0, 33_333, 66_667, 100_000, 133_333, 0, 33_333])
        XCTAssertEqual(handed[5].time, 166_666, "one interval after 133 333")
        XCTAssertEqual(handed.map(\.time), handed.map(\.time).sorted())
        XCTAssertEqual(Set(handed.map(\.time)).count, 12)
        XCTAssertEqual(handed.map(\.captureTime), handed.map(\.time))
    }

    /// A frame that cannot be read ends the run with the input's error, naming the file; the frames
    /// before it were handed on.
    func testAnUnreadableFrameIsThrownAfterTheFramesBeforeIt() throws {
        let loop = try CaptureLoop(path: try photoDirectory(5, unreadable: 2), privacy: .off)
        var handed: [Int] = []
        XCTAssertThrowsError(try loop.run(CaptureLoop.Options()) { handed.append($0.index) }) { error in
            XCTAssertTrue(error is MediaError, "\(error)")
            XCTAssertTrue("\(error)".contains("2.ppm"), "\(error)")
        }
        XCTAssertEqual(handed, [0, 1])

        // What the body throws ends the run too.
        struct Enough: Error {}
        let again = try CaptureLoop(path: try photoDirectory(3), privacy: .off)
        XCTAssertThrowsError(try again.run(CaptureLoop.Options()) { if $0.index == 1 { throw Enough() } }) { XCTAssertTrue($0 is Enough) }

        XCTAssertThrowsError(try CaptureLoop(path: work.appendingPathComponent("nothing.mp4").path, privacy: .off)) { error in
            XCTAssertTrue("\(error)".contains("cannot read \(self.work.appendingPathComponent("nothing.mp4").path)"), "\(error)")
        }
    }

    /// What `veil call --video` sends from: the same loop on a thread of its own, the file started
    /// over (five frames give more than five), frames stamped on the call's clock, nothing after stop.
    func testTheCameraSourcePlaysAFileLoopedOnItsThread() throws {
        let ticks = Mutex<UInt64>(0)
        let clock: @Sendable () -> UInt64 = { ticks.withLock { $0 = max($0 + 1, DispatchTime.now().uptimeNanoseconds / 1000); return $0 } }
        let source: ExpressionSource = try CameraExpressionSource(path: try photoDirectory(5), privacy: .off, clock: clock)
        let frames = Mutex<[ExpressionFrame]>([])
        source.start(voiceMouth: { nil }) { frame in frames.withLock { $0.append(frame) } }
        let deadline = Date().addingTimeInterval(30)
        while frames.withLock({ $0.count }) < 8, Date() < deadline { Thread.sleep(forTimeInterval: 0.01) }
        source.stop()
        let delivered = frames.withLock { $0 }
        XCTAssertGreaterThanOrEqual(delivered.count, 8)
        XCTAssertEqual(delivered.map(\.sequence), (0..<UInt32(delivered.count)).map { $0 })
        XCTAssertEqual(delivered.map(\.captureTimeMicros), delivered.map(\.captureTimeMicros).sorted())
        XCTAssertGreaterThan(delivered.filter { $0.state == .tracked }.count, delivered.count / 2, "the face is found")
        Thread.sleep(forTimeInterval: 0.1)
        XCTAssertEqual(frames.withLock { $0.count }, delivered.count, "nothing after stop")
    }
}
