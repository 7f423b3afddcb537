import XCTest
import VeilCore
import VeilVision
@testable import VeilTracking

/// The search for a face when none is being tracked: bounded work per video frame, and a small
/// distant face still found after a few frames.
final class FaceSearchTests: XCTestCase {
    func testAFramewithoutAFaceRunsABoundedSearch() throws {
        let tracker = try MediaPipeFaceTracker()
        var empty = RGBImage(width: 640, height: 480)
        for i in empty.pixels.indices { empty.pixels[i] = UInt8(truncatingIfNeeded: 70 + (i / 1920) % 50) }
        var runs: [Int] = []
        for _ in 0..<30 {
            let result = try tracker.track(empty)
            XCTAssertEqual(result.state, .lost)
            runs.append(result.detectorRuns)
        }
        // Short range and full range on the whole frame, then at most `tilesPerFrame` tiles.
        let limit = 2 + tracker.options.tilesPerFrame
        XCTAssertTrue(runs.allSatisfy { $0 <= limit && $0 >= 2 }, "detector runs per frame: \(runs)")
        XCTAssertEqual(runs.max(), limit, "the small-face search should run every frame without a face")
    }

    func testASmallFaceIsFoundWithinASecondOfVideo() throws {
        // einstein.jpg letterboxed into 640×480: a face of about 45 px, which only the tiled
        // search finds.
        let (centered, _, _) = try Photos.image("einstein.jpg").letterboxed(width: 640, height: 480)
        // Moved 160 px to the right, out of the first tile.
        var frame = RGBImage(width: 640, height: 480)
        for y in 0..<480 {
            for x in 0..<480 {
                for c in 0..<3 { frame.pixels[(y * 640 + x + 160) * 3 + c] = centered.pixels[(y * 640 + x) * 3 + c] }
            }
        }
        // One tile per frame, so that the search has to go on over several frames.
        var options = MediaPipeFaceTracker.Options()
        options.tilesPerFrame = 1
        let tracker = try MediaPipeFaceTracker(options: options)
        var foundAt: Int?
        var mostRuns = 0
        for n in 0..<40 where foundAt == nil {
            let result = try tracker.track(frame)
            mostRuns = max(mostRuns, result.detectorRuns)
            if result.state == .tracked { foundAt = n }
        }
        let found = try XCTUnwrap(foundAt, "the small face was not found in 40 frames")
        print("small face found on frame \(found); at most \(mostRuns) detector runs in one frame")
        XCTAssertGreaterThan(found, 0, "one tile per frame cannot cover the frame at once")
        XCTAssertLessThanOrEqual(found, 30, "a distant face should be found within about a second at 30 fps")
        XCTAssertLessThanOrEqual(mostRuns, 2 + tracker.options.tilesPerFrame)
        // A still searches everything at once.
        XCTAssertNotNil(try tracker.landmarks(inStill: frame))
    }
}
