import XCTest
@testable import VeilMedia

/// The audio track's placement rules, without GStreamer.
final class AudioTimelineTests: XCTestCase {
    private func timeline(lag: Double? = 2) -> AudioTimeline { AudioTimeline(sampleRate: 48_000, maximumLag: lag) }

    func testFirstChunkIsPlacedExactly() throws {
        var atZero = timeline()
        XCTAssertEqual(try atZero.place(frames: 960, at: 0), .init(silence: 0..<0, droppedFrames: 0, startFrame: 0))
        XCTAssertEqual(atZero.endFrame, 960)

        var late = timeline()
        XCTAssertEqual(try late.place(frames: 960, at: 1_000_000), .init(silence: 0..<48_000, droppedFrames: 0, startFrame: 48_000))
        // Even a start within the jitter tolerance is not moved.
        var slightlyLate = timeline()
        XCTAssertEqual(try slightlyLate.place(frames: 960, at: 5_000).silence, 0..<240)
    }

    func testJitterIsAbsorbedGapsFilledOverlapsDropped() throws {
        var t = timeline()
        _ = try t.place(frames: 960, at: 0)
        // 5 ms late and 5 ms early: both follow directly.
        XCTAssertEqual(try t.place(frames: 960, at: 25_000), .init(silence: 960..<960, droppedFrames: 0, startFrame: 960))
        XCTAssertEqual(try t.place(frames: 960, at: 35_000), .init(silence: 1920..<1920, droppedFrames: 0, startFrame: 1920))
        // A 100 ms gap (a muted peer) becomes silence.
        XCTAssertEqual(try t.place(frames: 960, at: 160_000), .init(silence: 2880..<7680, droppedFrames: 0, startFrame: 7680))
        XCTAssertEqual(t.endFrame, 8640)
        // A chunk stamped 100 ms before the end of what is placed loses those 100 ms; a chunk
        // entirely inside what is placed is dropped.
        XCTAssertEqual(try t.place(frames: 9600, at: 180_000).startFrame, 8640)  // 8640..<18240
        XCTAssertEqual(try t.place(frames: 9600, at: 280_000), .init(silence: 18240..<18240, droppedFrames: 4800, startFrame: 18240))
        XCTAssertEqual(t.endFrame, 18240 + 4800)
        XCTAssertEqual(try t.place(frames: 960, at: 300_000).droppedFrames, 960)
        XCTAssertEqual(t.endFrame, 18240 + 4800)
        XCTAssertEqual(t.droppedFrames, 4800 + 960)
    }

    func testBackwardsIsAnErrorThatChangesNothing() throws {
        var t = timeline()
        _ = try t.place(frames: 4800, at: 100_000)
        let before = t
        XCTAssertThrowsError(try t.place(frames: 960, at: 99_999)) { error in
            XCTAssertEqual((error as? MediaError)?.kind, .invalidArgument)
            XCTAssertTrue((error as? MediaError)?.message.contains("backwards") ?? false)
        }
        XCTAssertEqual(t.endFrame, before.endFrame)
        XCTAssertEqual(t.droppedFrames, 0)
        // The same stamp again is a duplicate, not a clock going backwards: it is dropped.
        XCTAssertEqual(try t.place(frames: 960, at: 100_000).droppedFrames, 960)
        XCTAssertEqual(try t.place(frames: 960, at: 200_000).startFrame, before.endFrame)
    }

    func testVideoRunningAheadFillsSilenceUpToTheLag() throws {
        var t = timeline(lag: 2)
        XCTAssertTrue(t.fill(forVideoAt: 1_000_000_000).isEmpty, "within the lag")
        XCTAssertEqual(t.fill(forVideoAt: 3_000_000_000), 0..<48_000)
        XCTAssertTrue(t.fill(forVideoAt: 2_500_000_000).isEmpty, "never backwards")
        // Audio for the filled second arrives late: only its part after 1 s is kept.
        XCTAssertEqual(try t.place(frames: 96_000, at: 0), .init(silence: 48_000..<48_000, droppedFrames: 48_000, startFrame: 48_000))
        XCTAssertEqual(t.endFrame, 96_000)

        var unlimited = timeline(lag: nil)
        XCTAssertTrue(unlimited.fill(forVideoAt: 3_600_000_000_000).isEmpty)
        XCTAssertEqual(try unlimited.place(frames: 960, at: 0).silence, 0..<0)
    }

    func testFinishFillsToTheEndOfTheVideo() throws {
        var t = timeline()
        _ = try t.place(frames: 48_000, at: 0)
        XCTAssertEqual(t.fill(throughNanos: 3_000_000_000), 48_000..<144_000)
        XCTAssertTrue(t.fill(throughNanos: 2_000_000_000).isEmpty, "audio longer than the video stays")
    }

    func testTimestampsRoundToTheNearestFrame() throws {
        var t = AudioTimeline(sampleRate: 44_100, maximumLag: nil)
        XCTAssertEqual(try t.place(frames: 1, at: 22_675).startFrame, 1000)  // 999.97 frames
        var week = AudioTimeline(sampleRate: 96_000, maximumLag: nil)
        XCTAssertEqual(week.fill(throughNanos: 604_800 * 1_000_000_000).upperBound, 604_800 * 96_000)
    }
}
