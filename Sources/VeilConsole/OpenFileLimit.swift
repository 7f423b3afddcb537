import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The process's open-file limit (RLIMIT_NOFILE), raised so that a thousand sockets fit. Child
/// processes inherit it.
public enum OpenFileLimit {
    /// The limit after trying to raise it.
    public struct Outcome: Codable, Sendable {
        public var soft: UInt64
        public var hard: UInt64
        /// The soft limit before, when it was raised.
        public var raisedFrom: UInt64?
        /// Why it could not be read or raised.
        public var problem: String?
    }

    /// Raises the soft limit to the hard one (capped at 1 << 20; unlimited hard limits are common).
    public static func raiseToHard() -> Outcome {
        var limit = rlimit()
        let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
        guard getrlimit(resource, &limit) == 0 else {
            return Outcome(soft: 0, hard: 0, problem: "getrlimit failed: \(String(cString: strerror(errno)))")
        }
        let target = min(limit.rlim_max, 1 << 20)
        guard limit.rlim_cur < target else { return Outcome(soft: UInt64(limit.rlim_cur), hard: UInt64(limit.rlim_max)) }
        let before = limit.rlim_cur
        limit.rlim_cur = target
        guard setrlimit(resource, &limit) == 0 else {
            return Outcome(soft: UInt64(before), hard: UInt64(limit.rlim_max),
                           problem: "could not raise it: setrlimit failed (\(String(cString: strerror(errno))))")
        }
        return Outcome(soft: UInt64(target), hard: UInt64(limit.rlim_max), raisedFrom: UInt64(before))
    }
}
