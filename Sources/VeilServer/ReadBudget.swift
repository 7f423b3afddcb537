import Foundation

/// How many bytes the room server may read next, over all its connections together: the
/// server-wide half of its limits (the per-connection half is `RoomDirectory`'s).
///
/// Per-connection limits alone let a crowd of connections, each within its own allowance, add up
/// to more than one loop can parse. So the server also holds two shared buckets: one for every
/// connection (`RoomDirectory.Configuration.serverByteRate`) and a smaller one for connections not
/// in a room (`unjoinedServerByteRate`), which strangers without a token can only ever spend
/// among themselves. A connection whose bucket is empty is not read from until the buckets refill:
/// its bytes wait in the kernel and TCP's flow control holds its sender back. Nothing it sent is
/// lost, and participants in rooms keep their own bucket.
struct ReadBudget: Equatable, Sendable {
    private var all: RoomDirectory.TokenBucket
    private var unjoined: RoomDirectory.TokenBucket

    /// The most read at once from one connection: a frame header and a small message, or a slice of
    /// a large one. Reading in slices keeps the loop turning between connections.
    static let readSize = 16 * 1024

    /// The least worth reading: with less left in the budget, a connection waits for the refill
    /// (otherwise a crowd of connections would each read a few bytes per wake-up, a system call
    /// and a dispatch for every trickle of the budget).
    static let smallestRead = 1024

    /// Full buckets of the configured sizes.
    init(_ configuration: RoomDirectory.Configuration, now: TimeInterval) {
        all = .init(configuration.serverByteRate, now: now)
        unjoined = .init(configuration.unjoinedServerByteRate, now: now)
    }

    /// Bytes a connection (`joined` or not) may read now, at most `readSize`; below `smallestRead`
    /// means pause it.
    mutating func allowance(joined: Bool, now: TimeInterval) -> Int {
        all.refill(now: now)
        var bytes = min(Double(Self.readSize), all.tokens)
        if !joined {
            unjoined.refill(now: now)
            bytes = min(bytes, unjoined.tokens)
        }
        return max(0, Int(bytes))
    }

    /// Charges `bytes` read from a connection (`joined` or not).
    mutating func charge(_ bytes: Int, joined: Bool, now: TimeInterval) {
        all.spend(Double(bytes), now: now)
        if !joined { unjoined.spend(Double(bytes), now: now) }
    }
}

extension RoomDirectory.TokenBucket {
    /// Takes `amount` even if that leaves the bucket below empty (a read already made).
    mutating func spend(_ amount: Double, now: TimeInterval) {
        refill(now: now)
        tokens -= amount
    }
}
