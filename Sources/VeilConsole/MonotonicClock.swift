import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Milliseconds on the machine's monotonic clock (CLOCK_MONOTONIC): for timing what a command does.
public func monotonicMilliseconds() -> Double {
    var t = timespec()
    clock_gettime(CLOCK_MONOTONIC, &t)
    return Double(t.tv_sec) * 1e3 + Double(t.tv_nsec) / 1e6
}
