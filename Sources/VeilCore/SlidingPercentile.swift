/// Percentiles of the values seen over the last `seconds`, kept sorted as values come and go, so
/// that asking costs no sort: per frame, one insertion and the expired removals (binary search,
/// then a move of the elements behind).
package struct SlidingPercentile: Sendable {
    /// How far back values count (a change applies from the next `add`).
    package var seconds: Double
    /// The values in arrival order, with their times; the first `expired` are gone.
    private var arrivals: [(time: Double, value: Float)] = []
    private var expired = 0
    /// The values in the window, ascending.
    private var sorted: [Float] = []

    package init(seconds: Double) { self.seconds = seconds }

    /// Values in the window.
    package var count: Int { sorted.count }

    /// Adds `value`, seen at `time`, and forgets the values older than `time - seconds`.
    package mutating func add(_ value: Float, at time: Double) {
        arrivals.append((time, value))
        sorted.insert(value, at: firstIndex(notBelow: value))
        forget(before: time - seconds)
    }

    /// Forgets the values seen before `time` (for a window asked after its values stopped coming).
    package mutating func forget(before time: Double) {
        while expired < arrivals.count, !(arrivals[expired].time > time) {
            sorted.remove(at: firstIndex(notBelow: arrivals[expired].value))
            expired += 1
        }
        // Drop the forgotten prefix once it is as long as what is kept (amortised O(1) per value).
        if expired > 64, expired * 2 >= arrivals.count {
            arrivals.removeFirst(expired)
            expired = 0
        }
    }

    /// The value at `fraction` (0…1) of the window, nearest rank; nil when the window is empty.
    package func value(at fraction: Double) -> Float? {
        sorted.isEmpty ? nil : sorted[rank(at: fraction)]
    }

    /// The share of the window below `value`, values equal to it counting half (its mid-rank,
    /// 0…1); nil when the window is empty.
    package func fraction(below value: Float) -> Double? {
        guard !sorted.isEmpty else { return nil }
        let below = firstIndex(notBelow: value), notAbove = firstIndex { $0 > value }
        return (Double(below) + Double(notAbove - below) / 2) / Double(sorted.count)
    }

    /// The median absolute deviation of the window from its median (both nearest rank): how far
    /// values typically stray, unmoved by the few that stray far. Walks outward from the median
    /// through the sorted values, so it costs half a window and no sort. Nil when the window is
    /// empty.
    package func medianAbsoluteDeviation() -> Float? {
        guard !sorted.isEmpty else { return nil }
        let middle = rank(at: 0.5), median = sorted[middle]
        // The deviations in ascending order are a merge of the values from the median down and
        // from just above it up; the answer is the one at the median's rank.
        var below = middle, above = middle + 1, deviation: Float = 0
        for _ in 0...middle {
            let down = below >= 0 ? median - sorted[below] : .infinity
            let up = above < sorted.count ? sorted[above] - median : .infinity
            if down <= up { deviation = down; below -= 1 } else { deviation = up; above += 1 }
        }
        return deviation
    }

    /// The index of `fraction` of the (non-empty) window, nearest rank.
    private func rank(at fraction: Double) -> Int {
        min(max(Int(Double(sorted.count - 1) * fraction + 0.5), 0), sorted.count - 1)
    }

    /// Forgets every value.
    package mutating func removeAll() {
        arrivals = []; expired = 0; sorted = []
    }

    /// The first position whose value is not below `value`.
    private func firstIndex(notBelow value: Float) -> Int { firstIndex { $0 >= value } }

    /// The first position of the sorted window where `reached` holds (it holds from there on);
    /// binary search.
    private func firstIndex(where reached: (Float) -> Bool) -> Int {
        var low = 0, high = sorted.count
        while low < high {
            let middle = (low + high) / 2
            if reached(sorted[middle]) { high = middle } else { low = middle + 1 }
        }
        return low
    }
}
