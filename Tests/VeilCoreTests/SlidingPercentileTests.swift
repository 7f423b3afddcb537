import XCTest
@testable import VeilCore

/// The sliding-window percentile behind the privacy filter's resting levels and the estimator's
/// closed-mouth level, the spread behind its head-pose dead zones and the ranks its jaw is sent
/// by: the same answers as sorting the window each time.
final class SlidingPercentileTests: XCTestCase {
    func testMatchesSortingTheWindow() {
        var window = SlidingPercentile(seconds: 2)
        var all: [(time: Double, value: Float)] = []
        var random = SplitMix64(seed: 7)
        var time = 0.0
        for _ in 0..<2000 {
            time += Double(random.next() % 100) / 1000  // 0–99 ms apart, repeats included
            let value = Float(random.next() % 50) / 10  // many equal values
            window.add(value, at: time)
            all.append((time, value))
            let kept = all.filter { $0.time > time - 2 }.map(\.value).sorted()
            XCTAssertEqual(window.count, kept.count)
            for fraction in [0, 0.05, 0.1, 0.5, 1] {
                XCTAssertEqual(window.value(at: fraction), kept[Int(Double(kept.count - 1) * fraction + 0.5)])
            }
            // The median absolute deviation, by sorting the deviations from the median.
            let middle = Int(Double(kept.count - 1) * 0.5 + 0.5)
            let deviations = kept.map { abs($0 - kept[middle]) }.sorted()
            XCTAssertEqual(window.medianAbsoluteDeviation(), deviations[middle])
            // The mid-rank of a value, by counting.
            for probe: Float in [-1, value, 2.5, 9] {
                let below = kept.filter { $0 < probe }.count, equal = kept.filter { $0 == probe }.count
                XCTAssertEqual(window.fraction(below: probe)!, (Double(below) + Double(equal) / 2) / Double(kept.count), accuracy: 1e-12)
            }
        }
    }

    func testEmptyAndCleared() {
        var window = SlidingPercentile(seconds: 1)
        XCTAssertNil(window.value(at: 0.5))
        XCTAssertNil(window.medianAbsoluteDeviation())
        XCTAssertNil(window.fraction(below: 1))
        window.add(3, at: 0)
        XCTAssertEqual(window.fraction(below: 3), 0.5)
        XCTAssertEqual(window.medianAbsoluteDeviation(), 0)
        // 1 2 3 10 100: median 3, deviations 0 1 2 7 97, their median 2, whatever the outliers.
        for value: Float in [1, 2, 10, 100] { window.add(value, at: 0) }
        XCTAssertEqual(window.medianAbsoluteDeviation(), 2)
        window.removeAll(); window.add(3, at: 0)
        XCTAssertEqual(window.value(at: 0.5), 3)
        window.removeAll()
        XCTAssertEqual(window.count, 0)
        XCTAssertNil(window.value(at: 0.5))
    }
}
