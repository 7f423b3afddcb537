import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The byte-rate limit, enforced off the server's loop.
///
/// The room directory reads each connection's byte counts on the loop (`ServerCore`'s tick), so it
/// cannot act while the loop is busy; and libsoup 3.2 can keep the loop busy for as long as one
/// client keeps sending: its WebSocket reader loops while data is available and answers each ping
/// frame itself, queueing every pong with a linear walk of its send queue (no signal reaches Veil).
/// A client streaming ping frames would stall every room for seconds.
///
/// This guard runs on a thread of its own. Every `interval` it reads each watched connection's
/// `TCP_INFO` received-byte count and charges it to a token bucket of the directory's `byteRate`.
/// A connection whose bucket runs dry has its socket cut (see `cut`), which makes libsoup's next
/// read fail and its reader loop end; the guard then calls `onTrip` (which hands the news to the
/// loop), and remembers the trip until the loop `take`s it or `forget`s the connection.
///
/// The guard keeps a duplicate of each watched socket's descriptor, so that libsoup closing its own
/// descriptor (on the loop, at any time) can never leave the guard reading or cutting an unrelated
/// socket that reused the number. A duplicate holds the connection open, so `forget` must follow
/// libsoup's close promptly (the server calls it from the connection's "closed" signal): each
/// WebSocket costs two descriptors while it lives.
///
/// Every descriptor operation happens with the state's lock held, so `forget` never closes one
/// the guard thread is using.
final class TransportGuard: Sendable {
    /// What the guard knows of one connection.
    private struct Watched {
        /// The guard's own duplicate of the socket's descriptor.
        var fd: Int32
        /// Bytes received when the guard last looked (the first look excludes the HTTP upgrade).
        var received: UInt64
        /// What the connection may still receive (the directory's token bucket, at `limit`).
        var bucket: RoomDirectory.TokenBucket
        /// Whether its socket has been cut for exceeding the limit.
        var tripped = false
    }

    private struct State {
        var watched: [ConnectionID: Watched] = [:]
        var stopping = false
    }

    private let state = Mutex(State())
    private let limit: RoomDirectory.RateLimit
    private let interval: TimeInterval
    private let onTrip: @Sendable (ConnectionID) -> Void
    private let wake = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)

    /// How often the guard samples by default: twice per loop tick, so it acts well before a
    /// burst's worth of bytes has been read past the limit.
    static let defaultInterval: TimeInterval = 0.05

    /// Starts the guard thread, which keeps the guard alive until `stop()`. `onTrip` runs on the guard thread, once per cut connection, with
    /// no lock held; it should only hand the news over (to the loop).
    init(limit: RoomDirectory.RateLimit, interval: TimeInterval = TransportGuard.defaultInterval,
         onTrip: @escaping @Sendable (ConnectionID) -> Void) {
        self.limit = limit
        self.interval = interval
        self.onTrip = onTrip
        let thread = Thread { [self] in run() }
        thread.name = "veil-transport-guard"
        thread.start()
    }

    /// Starts watching connection `id`, whose socket has descriptor `fd` (the guard duplicates it;
    /// the caller's stays the caller's). Does nothing for a descriptor that cannot be duplicated.
    func watch(_ id: ConnectionID, fd: Int32) {
        guard fd >= 0 else { return }
        state.withLock { state in
            guard !state.stopping, state.watched[id] == nil else { return }
            let copy = fcntl(fd, F_DUPFD_CLOEXEC, 0)
            guard copy >= 0 else { return }
            let received = TransportSocket.byteCounts(copy)?.received ?? 0
            state.watched[id] = Watched(fd: copy, received: received, bucket: .init(limit, now: Self.nowSeconds()))
        }
    }

    /// Whether the guard cut connection `id` and nobody has taken the news yet; taking it clears it
    /// (the connection stays watched until `forget`).
    func take(_ id: ConnectionID) -> Bool {
        state.withLock { state in
            guard state.watched[id]?.tripped == true else { return false }
            state.watched[id]?.tripped = false
            return true
        }
    }

    /// Stops watching `id` and closes the guard's descriptor for it; returns whether it had been cut
    /// and the news not yet taken.
    @discardableResult
    func forget(_ id: ConnectionID) -> Bool {
        state.withLock { state in
            guard let watched = state.watched.removeValue(forKey: id) else { return false }
            close(watched.fd)
            return watched.tripped
        }
    }

    /// Stops the thread (waiting up to a second for it) and closes every descriptor it holds.
    func stop() {
        let wasRunning = state.withLock { state in
            defer { state.stopping = true }
            return !state.stopping
        }
        guard wasRunning else { return }
        wake.signal()
        _ = finished.wait(timeout: .now() + 1)
        state.withLock { state in
            for watched in state.watched.values { close(watched.fd) }
            state.watched.removeAll()
        }
    }

    // MARK: The guard thread

    private func run() {
        defer { finished.signal() }
        while wake.wait(timeout: .now() + interval) == .timedOut {
            for id in sample() { onTrip(id) }
        }
    }

    /// One look at every watched connection: charges what each received since the last look, and
    /// cuts those over the limit. Returns the connections cut this time.
    private func sample() -> [ConnectionID] {
        state.withLock { state -> [ConnectionID] in
            guard !state.stopping else { return [] }
            let now = Self.nowSeconds()
            var tripped: [ConnectionID] = []
            for (id, var watched) in state.watched {
                guard !watched.tripped, let counts = TransportSocket.byteCounts(watched.fd) else { continue }
                let received = counts.received >= watched.received ? counts.received - watched.received : 0
                watched.received = max(watched.received, counts.received)
                if !watched.bucket.take(Double(received), now: now) {
                    Self.cut(watched.fd)
                    watched.tripped = true
                    tripped.append(id)
                }
                state.watched[id] = watched
            }
            return tripped
        }
    }

    /// Ends the connection under descriptor `fd` so that libsoup's reads stop at once.
    static func cut(_ fd: Int32) {
        shutdown(fd, Int32(SHUT_RDWR))
    }

    private static func nowSeconds() -> TimeInterval { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }
}
