import Foundation
import XCTest
@testable import VeilBench

/// The latency section of the bench report, from results made up here: what it says about the
/// sender's camera frames.
final class LatencyReportTests: XCTestCase {
    func result(_ condition: LatencyCondition, tracked: Int?, untracked: Int?) -> LatencyBenchmark.Result {
        var result = LatencyBenchmark.Result(condition: condition)
        result.mouthToEarMillis = [60, 62, 64]
        result.framesTracked = tracked
        result.framesUntracked = untracked
        return result
    }

    func testFramesTrackingFailedOnAreReported() {
        let schedule = [LatencyCondition(name: "clean", seconds: 20), LatencyCondition(name: "80 ± 20 ms jitter", delayMillis: 80, jitterMillis: 20, seconds: 20)]
        var latency = BenchReport.Latency(schedule: schedule)
        latency.trackedCamera = true
        latency.veil = [result(schedule[0], tracked: 598, untracked: 2), result(schedule[1], tracked: 599, untracked: 1)]
        let text = latency.markdown.joined(separator: "\n")
        XCTAssertTrue(text.contains("Tracking failed on 3 of the sender's 1200 camera frames; those were not sent."), text)

        // Every frame tracked, or a run saved before the count existed: nothing to report.
        latency.veil = [result(schedule[0], tracked: 600, untracked: 0), result(schedule[1], tracked: nil, untracked: nil)]
        XCTAssertFalse(latency.markdown.joined(separator: "\n").contains("Tracking failed"))
    }
}
