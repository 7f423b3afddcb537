import Foundation
import Synchronization
import VeilCore
#if canImport(Glibc)
import Glibc
#endif

/// The receive side's playout: the decoded voice leaves the RTP jitter buffer as soon as it is in
/// order and goes into an `AdaptivePlayout`; a thread of its own takes one 10 ms block at each
/// block's time, as a sound card pulls, and hands it to the output (`deliver`). How long the voice
/// waits in between is the playout's target delay, which follows the jitter of the connection
/// (docs/lip-sync.md, "The voice's delay").
///
/// Thread-safe: the decoder's streaming thread inserts, the playout thread takes blocks, callers
/// read figures; all of it under one mutex. `deliver` runs on the playout thread.
final class AudioPlayoutStage: Sendable {
    /// What the output does with a block, and how long after it is taken it is heard (µs).
    struct Output: Sendable {
        /// Hands a block on, to be heard at the given local media time.
        var deliver: @Sendable (AdaptivePlayout.Block, _ playoutMicros: UInt64) -> Void
        /// From taking a block to hearing it: the output's own latency (0 for a callback that
        /// is called at the block's playout time).
        var leadMicros: @Sendable () -> UInt64
        /// Called about once a second with the playout's target delay (µs): the RTP jitter
        /// buffer's wait for a missing packet is tuned from it.
        var retune: @Sendable (UInt64) -> Void
    }

    private struct State {
        var playout: AdaptivePlayout
        var output: Output?
        var threadStarted = false
        var stopping = false
    }

    static let blockMicros: UInt64 = 10_000

    private let state: Mutex<State>
    private let finished = DispatchSemaphore(value: 0)

    init(configuration: AdaptivePlayout.Configuration) {
        state = Mutex(State(playout: AdaptivePlayout(configuration: configuration)))
    }

    /// Where blocks go; set once, before the first chunk is inserted.
    func connect(_ output: Output) {
        state.withLock { $0.output = output }
    }

    /// An RTP packet entering the jitter buffer: its RTP timestamp (unwrapped, in µs) and when it came.
    func packetArrived(mediaMicros: UInt64, arrivalMicros: UInt64) {
        state.withLock { $0.playout.packetArrived(mediaMicros: mediaMicros, arrivalMicros: arrivalMicros) }
    }

    /// A frame of the avatar's stream arrived (see `AdaptivePlayout.syncedFrameArrived`).
    func syncedFrameArrived(timelineMicros: UInt64, arrivalMicros: UInt64) {
        state.withLock { $0.playout.syncedFrameArrived(timelineMicros: timelineMicros, arrivalMicros: arrivalMicros) }
    }

    /// A decoded chunk (`timelineMicros`: its jitter-buffer output time on the local media clock).
    /// The first one starts the playout thread.
    func insert(_ samples: [Float], timelineMicros: UInt64) {
        let start = state.withLock { state -> Bool in
            guard !state.stopping else { return false }
            state.playout.insert(samples, timelineMicros: timelineMicros)
            defer { state.threadStarted = true }
            return !state.threadStarted
        }
        if start {
            let thread = Thread { [self] in run() }
            thread.name = "veil-playout"
            thread.qualityOfService = .userInteractive
            thread.start()
        }
    }

    /// What the playout did so far.
    var statistics: AdaptivePlayout.Statistics { state.withLock { $0.playout.statistics } }

    /// The delay of the last block played from data (µs): from the jitter buffer's output
    /// timestamp to the time it is heard. Nil before the first block played.
    var delayMicros: UInt64? { state.withLock { $0.playout.statistics.currentDelayMicros }.nonZero }

    /// Stops the playout thread (waits up to a second for it). Idempotent.
    func stop() {
        let running = state.withLock { state -> Bool in
            defer { state.stopping = true }
            return state.threadStarted && !state.stopping
        }
        if running { _ = finished.wait(timeout: .now() + 1) }
    }

    private func run() {
        defer { finished.signal() }
        guard let output = state.withLock({ $0.output }) else { return }
        var next = Self.now()
        var blocks = 0
        while true {
            Self.sleep(until: next)
            let lead = output.leadMicros()
            let playoutMicros = next + lead
            let taken = state.withLock { state -> (AdaptivePlayout.Block, UInt64)? in
                guard !state.stopping else { return nil }
                state.playout.outputLeadMicros = lead
                let block = state.playout.nextBlock(playoutMicros: playoutMicros)
                return (block, state.playout.statistics.targetDelayMicros)
            }
            guard let (block, target) = taken else { return }
            output.deliver(block, playoutMicros)
            blocks += 1
            if blocks % 100 == 0 { output.retune(target) }
            next += Self.blockMicros
            // Far behind (the machine stalled this thread): resume from now rather than
            // bursting blocks out; the playout conceals what the stall cost.
            let now = Self.now()
            if now > next + 100_000 { next = now }
        }
    }

    /// CLOCK_MONOTONIC in µs, the media clock (`PeerConnection.mediaTimeMicros`).
    private static func now() -> UInt64 { monotonicNanoseconds() / 1000 }

    private static func sleep(until micros: UInt64) {
        var time = timespec(tv_sec: Int(micros / 1_000_000), tv_nsec: Int(micros % 1_000_000) * 1000)
        while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &time, nil) == EINTR {}
    }
}

private extension UInt64 {
    /// Nil for 0 (a figure not known yet).
    var nonZero: UInt64? { self == 0 ? nil : self }
}
