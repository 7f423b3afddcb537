import XCTest
import VeilCore

final class OneEuroFilterTests: XCTestCase {
    private let rate = 30.0

    private func standardDeviation(_ values: [Double]) -> Double {
        let mean = values.reduce(0, +) / Double(values.count)
        return (values.map { ($0 - mean) * ($0 - mean) }.reduce(0, +) / Double(values.count)).squareRoot()
    }

    /// Root mean square of the change from one frame to the next: the jitter a viewer sees.
    private func frameToFrameJitter(_ values: [Double]) -> Double {
        let steps = zip(values.dropFirst(), values).map { ($0 - $1) * ($0 - $1) }
        return (steps.reduce(0, +) / Double(steps.count)).squareRoot()
    }

    func testFirstSamplePassesThrough() {
        var filter = OneEuroFilter(minCutoff: 1, beta: 0.5)
        XCTAssertNil(filter.lastOutput)
        XCTAssertEqual(filter.filter(0.7, at: 12.5), 0.7)
        XCTAssertEqual(filter.lastOutput, 0.7)
    }

    func testNoisyRestIsSmoothed() {
        var rng = SplitMix64(seed: 42)
        var filter = OneEuroFilter(minCutoff: 1, beta: 0.5)
        var input: [Double] = []
        var output: [Double] = []
        for frame in 0..<900 {
            let x = 0.5 + 0.02 * rng.nextGaussian()
            let y = filter.filter(x, at: Double(frame) / rate)
            if frame >= 60 { input.append(x); output.append(y) } // after the filter has settled
        }
        let spread = standardDeviation(output) / standardDeviation(input)
        let jitter = frameToFrameJitter(output) / frameToFrameJitter(input)
        print("One-Euro at rest (minCutoff 1 Hz, beta 0.5, 30 Hz): std ratio \(spread), frame-to-frame jitter ratio \(jitter)")
        // A first-order low-pass at 1 Hz sampled at 30 Hz has α ≈ 0.17, so white noise keeps
        // √(α/(2−α)) ≈ 0.31 of its spread but only α/√(2−α) ≈ 0.13 of its frame-to-frame jitter.
        XCTAssertLessThan(jitter, 0.3)
        XCTAssertLessThan(spread, 0.4)
        XCTAssertEqual(output.reduce(0, +) / Double(output.count), 0.5, accuracy: 0.01, "no bias")

        var calmer = OneEuroFilter(minCutoff: 0.5, beta: 0.5)
        var calmOutput: [Double] = []
        var rng2 = SplitMix64(seed: 42)
        for frame in 0..<900 {
            let y = calmer.filter(0.5 + 0.02 * rng2.nextGaussian(), at: Double(frame) / rate)
            if frame >= 60 { calmOutput.append(y) }
        }
        XCTAssertLessThan(standardDeviation(calmOutput) / standardDeviation(input), 0.3, "minCutoff 0.5 Hz")
    }

    func testStepIsFollowedWithinAFewFrames() {
        func framesToReach(_ level: Double, beta: Double) -> Int? {
            var filter = OneEuroFilter(minCutoff: 1, beta: beta)
            for frame in 0..<30 { _ = filter.filter(0, at: Double(frame) / rate) }
            for step in 1...60 where filter.filter(1, at: Double(29 + step) / rate) > level { return step }
            return nil
        }
        let withBeta = framesToReach(0.8, beta: 0.5)
        let withoutBeta = framesToReach(0.8, beta: 0)
        print("One-Euro step 0→1 at 30 Hz passes 0.8 after \(withBeta.map(String.init) ?? "never") frames with beta 0.5, "
              + "\(withoutBeta.map(String.init) ?? "never") with beta 0")
        XCTAssertNotNil(withBeta)
        XCTAssertLessThanOrEqual(withBeta ?? .max, 3)
        XCTAssertGreaterThan(withoutBeta ?? .max, 5, "beta is what makes the step fast")
    }

    func testBackwardAndRepeatedTimestampsAreHarmless() {
        var filter = OneEuroFilter(minCutoff: 1, beta: 0.5)
        let times: [Double] = [0, 0.033, 0.066, 0.066, 0.05, -3, 0.1, 0.1, .nan, 0.133, -.infinity, 0.166, 1e-300, 0.2]
        var outputs: [Double] = []
        for (index, time) in times.enumerated() {
            outputs.append(filter.filter(index % 2 == 0 ? 0 : 1, at: time))
        }
        XCTAssertTrue(outputs.allSatisfy(\.isFinite), "\(outputs)")
        XCTAssertEqual(outputs[3], outputs[2], "a repeated timestamp returns the last output")
        XCTAssertEqual(outputs[4], outputs[3], "a timestamp that goes back returns the last output")

        // After the clock jumps back, the filter follows the new clock rather than freezing.
        var restarted = OneEuroFilter(minCutoff: 1, beta: 0.5)
        for frame in 0..<30 { _ = restarted.filter(0, at: 100 + Double(frame) / rate) }
        _ = restarted.filter(1, at: 0)
        XCTAssertGreaterThan(restarted.filter(1, at: 1 / rate), 0.1)
    }

    func testNonFiniteSamplesAreIgnored() {
        var filter = OneEuroFilter(minCutoff: 1, beta: 0.5)
        XCTAssertTrue(filter.filter(.nan, at: 0).isNaN, "nothing to return yet: the sample comes back as it was")
        XCTAssertNil(filter.lastOutput)
        XCTAssertEqual(filter.filter(0.25, at: 0.033), 0.25)
        XCTAssertEqual(filter.filter(.nan, at: 0.066), 0.25)
        XCTAssertEqual(filter.filter(.infinity, at: 0.1), 0.25)
        let next = filter.filter(0.25, at: 0.133)
        XCTAssertEqual(next, 0.25, accuracy: 1e-12)
        XCTAssertTrue(filter.filter(1e308, at: 0.166).isFinite)
        XCTAssertTrue(filter.filter(-1e308, at: 0.2).isFinite)
    }

    func testResetForgetsHistory() {
        var filter = OneEuroFilter(minCutoff: 1, beta: 0)
        for frame in 0..<10 { _ = filter.filter(0, at: Double(frame) / rate) }
        filter.reset()
        XCTAssertNil(filter.lastOutput)
        XCTAssertEqual(filter.filter(1, at: 0.5), 1)
    }

    func testNonsenseParametersAreRepaired() {
        for (minCutoff, beta, derivativeCutoff) in [(0.0, -1.0, 0.0), (.nan, .nan, .nan), (-5, .infinity, -.infinity)] {
            var filter = OneEuroFilter(minCutoff: minCutoff, beta: beta, derivativeCutoff: derivativeCutoff)
            XCTAssertGreaterThan(filter.minCutoff, 0)
            XCTAssertGreaterThanOrEqual(filter.beta, 0)
            XCTAssertGreaterThan(filter.derivativeCutoff, 0)
            for frame in 0..<10 { XCTAssertTrue(filter.filter(Double(frame % 2), at: Double(frame) / rate).isFinite) }
        }
    }

    func testBankFiltersEachChannelIndependently() {
        var bank = OneEuroFilterBank(count: 3, minCutoff: 1, beta: 0)
        XCTAssertEqual(bank.count, 3)
        XCTAssertEqual(bank.filter([0, 1, 0.5], at: 0), [0, 1, 0.5])
        let second = bank.filter([1, 1, 0.5], at: 1 / rate)
        XCTAssertGreaterThan(second[0], 0)
        XCTAssertLessThan(second[0], 0.5)
        XCTAssertEqual(second[1], 1)
        XCTAssertEqual(second[2], 0.5)

        var single = OneEuroFilter(minCutoff: 1, beta: 0)
        _ = single.filter(0, at: 0)
        XCTAssertEqual(Double(second[0]), single.filter(1, at: 1 / rate), accuracy: 1e-6, "same as one filter")

        XCTAssertEqual(bank.filter([0.5, 0.5], at: 2 / rate).count, 2, "short input: filtered, state of the rest kept")
        XCTAssertEqual(bank.filter([1, 1, 0.5, 9], at: 3 / rate)[3], 9, "channels beyond count pass through")
        bank.reset()
        XCTAssertEqual(bank.filter([0.1, 0.2, 0.3], at: 4 / rate), [0.1, 0.2, 0.3])
    }
}
