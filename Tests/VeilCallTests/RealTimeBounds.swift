import XCTest

/// Bounds on one measurement of a real call, collected instead of asserted at once.
///
/// A call measured for a few seconds on a shared machine can be spoiled by the machine rather than
/// by Veil: a stall of the test process (which holds both peers, the relay and the analysis) shows
/// up as jitter the network never had, and the playout rightly adapts to it. `measuredOnce(…)`
/// therefore takes a measurement whose bounds fail a second time, with a fresh call, and fails the
/// test with whatever the second one breaks: a defect breaks both, a stall rarely does. Both
/// attempts' failures are printed.
struct RealTimeBounds {
    private(set) var failures: [String] = []

    mutating func check(_ holds: Bool, _ message: @autoclosure () -> String) {
        if !holds { failures.append(message()) }
    }

    mutating func less(_ value: Double, _ bound: Double, _ what: String) {
        check(value < bound, "\(what): \(Self.format(value)) is not below \(Self.format(bound))")
    }

    mutating func greater(_ value: Double, _ bound: Double, _ what: String) {
        check(value > bound, "\(what): \(Self.format(value)) is not above \(Self.format(bound))")
    }

    mutating func atMost(_ value: Double, _ bound: Double, _ what: String) {
        check(value <= bound, "\(what): \(Self.format(value)) is above \(Self.format(bound))")
    }

    mutating func atLeast(_ value: Double, _ bound: Double, _ what: String) {
        check(value >= bound, "\(what): \(Self.format(value)) is below \(Self.format(bound))")
    }

    mutating func near(_ value: Double, _ expected: Double, within accuracy: Double, _ what: String) {
        check(abs(value - expected) <= accuracy, "\(what): \(Self.format(value)) is not within \(Self.format(accuracy)) of \(Self.format(expected))")
    }

    private static func format(_ value: Double) -> String { String(format: "%.4g", value) }

    /// Measures with `measure(attempt)` (attempt 1, then 2), checks with `bounds`, and measures once
    /// more if a bound fails; reports the last attempt's failures as test failures and returns its
    /// measurement.
    static func measuredOnce<M>(_ label: String, file: StaticString = #filePath, line: UInt = #line,
                                measure: (Int) async throws -> M, bounds: (M) -> RealTimeBounds) async throws -> M {
        var measurement = try await measure(1)
        var failures = bounds(measurement).failures
        if !failures.isEmpty {
            print("\(label): measured again with a fresh call, since the first measurement broke:\n  "
                  + failures.joined(separator: "\n  "))
            measurement = try await measure(2)
            failures = bounds(measurement).failures
            print("\(label): the second measurement " + (failures.isEmpty ? "holds every bound" : "broke:\n  " + failures.joined(separator: "\n  ")))
        }
        for failure in failures { XCTFail("\(failure) \(label)", file: file, line: line) }
        return measurement
    }
}
