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
/// The playout places the voice by its RTP timestamps and puts them on the local clock by the
/// fastest packets it saw (`AdaptivePlayout.anchorMicros`), not by the jitter buffer's output
/// timestamps: those are anchored where the jitter buffer started, which after a slow, lossy
/// handshake can be a packet that came 100 ms late. The stage learns from the packets leaving the
/// jitter buffer which RTP timestamp each output timestamp stands for, and which sender capture
/// time (from RTCP): the lip-sync mapping (`mapping`) is built on the playout's timeline.
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
        /// Called about once a second with how long the RTP jitter buffer may wait for a missing
        /// packet before the packets behind it come too late for the playout (µs,
        /// `AdaptivePlayout.upstreamWaitMicros`).
        var retune: @Sendable (UInt64) -> Void
    }

    private struct State {
        var playout: AdaptivePlayout
        var output: Output?
        var threadStarted = false
        var stopping = false
        var rtpClock = RTPClock()
        /// The latest packets to leave the jitter buffer: output timestamp → media time (µs), oldest first.
        var departures: [(timestampMicros: UInt64, mediaMicros: UInt64)] = []
        /// Sender capture time → media time, from the RTCP-derived reference timestamps (latency 0).
        var senderToMedia: PlayoutMapping?
        /// The jitter buffer's output timestamp minus the playout's timeline time, latest packet (µs).
        var jitterBufferLagMicros: Int64?
        /// The wait for a missing packet the jitter buffer was last given (µs).
        var jitterBufferWaitMicros: UInt64
    }

    /// RTP timestamps (48 kHz, 32 bits) unwrapped to media time in µs: each one by the signed step
    /// from the one before, whichever side of the jitter buffer it was read on.
    struct RTPClock {
        private var last: (timestamp: UInt32, total: UInt64)?

        mutating func mediaMicros(of timestamp: UInt32) -> UInt64 {
            let total = last.map { UInt64(bitPattern: Int64(bitPattern: $0.total) &+ Int64(Int32(bitPattern: timestamp &- $0.timestamp))) } ?? UInt64(1) << 40
            last = (timestamp, total)
            return total * 1000 / 48
        }
    }

    /// How many departures are kept to time decoded chunks (2.5 s of 20 ms packets).
    private static let departuresKept = 128

    static let blockMicros: UInt64 = 10_000

    private let state: Mutex<State>
    private let finished = DispatchSemaphore(value: 0)

    /// `jitterBufferWaitMicros`: the RTP jitter buffer's wait for a missing packet until the
    /// playout first retunes it (its `latency` as created).
    /// The playout thread's clock is its own (every output takes blocks of any length), so the
    /// playout may shorten blocks (`shortensBlocks`).
    init(configuration: AdaptivePlayout.Configuration, jitterBufferWaitMicros: UInt64) {
        var configuration = configuration
        configuration.shortensBlocks = true
        state = Mutex(State(playout: AdaptivePlayout(configuration: configuration), jitterBufferWaitMicros: jitterBufferWaitMicros))
    }

    /// Where blocks go; set once, before the first chunk is inserted.
    func connect(_ output: Output) {
        state.withLock { $0.output = output }
    }

    /// An RTP packet entering the jitter buffer: its RTP timestamp and when it came.
    func packetArrived(rtpTimestamp: UInt32, arrivalMicros: UInt64) {
        state.withLock { state in
            let media = state.rtpClock.mediaMicros(of: rtpTimestamp)
            state.playout.packetArrived(mediaMicros: media, arrivalMicros: arrivalMicros)
        }
    }

    /// An RTP packet leaving the jitter buffer: its RTP timestamp, its output timestamp on the local
    /// media clock, and the sender capture time it stands for (nil before the first sender report).
    func packetLeftJitterBuffer(rtpTimestamp: UInt32, timestampMicros: UInt64, senderMicros: UInt64?) {
        state.withLock { state in
            let media = state.rtpClock.mediaMicros(of: rtpTimestamp)
            state.departures.append((timestampMicros, media))
            if state.departures.count > Self.departuresKept { state.departures.removeFirst(state.departures.count - Self.departuresKept) }
            if let senderMicros {
                state.senderToMedia = PlayoutMapping(offsetMicros: Int64(bitPattern: media &- senderMicros), latencyMicros: 0,
                                                     referenceSenderMicros: senderMicros)
            }
            if let timeline = state.playout.timelineMicros(ofMediaMicros: media) {
                state.jitterBufferLagMicros = Int64(bitPattern: timestampMicros &- timeline)
            }
        }
    }

    /// A frame of the avatar's stream, captured at the sender's media time `senderMicros` (full or
    /// 48-bit), arrived (see `AdaptivePlayout.syncedFrameArrived`). Ignored before the first sender report.
    func syncedFrameArrived(senderMicros: UInt64, arrivalMicros: UInt64) {
        state.withLock { state in
            guard let media = state.senderToMedia?.playoutTimeMicros(forSenderMediaTimeMicros: senderMicros) else { return }
            state.playout.syncedFrameArrived(mediaMicros: media, arrivalMicros: arrivalMicros)
        }
    }

    /// A decoded chunk whose first sample carries the jitter buffer's output timestamp
    /// `timestampMicros` (on the local media clock): placed at the media time of the packet that
    /// left with that timestamp, or at the nearest one's plus the difference (a chunk the decoder
    /// made up for a lost packet). The first chunk starts the playout thread.
    func insert(_ samples: [Float], jitterBufferMicros timestampMicros: UInt64) {
        let start = state.withLock { state -> Bool in
            guard !state.stopping else { return false }
            let distance = { (departure: (timestampMicros: UInt64, mediaMicros: UInt64)) in Int64(bitPattern: departure.timestampMicros &- timestampMicros).magnitude }
            guard let nearest = state.departures.min(by: { distance($0) < distance($1) }) else { return false }
            let media = UInt64(bitPattern: Int64(bitPattern: nearest.mediaMicros) &+ Int64(bitPattern: timestampMicros &- nearest.timestampMicros))
            // A chunk at no packet's timestamp is audio the decoder made up for a lost one.
            let madeUp = nearest.timestampMicros != timestampMicros
            let now = Self.now()
            state.playout.insert(samples, mediaMicros: media, arrivalMicros: now, madeUpUpstream: madeUp)
            if madeUp {
                state.playout.upstreamConcealed(mediaMicros: media, durationMicros: UInt64(samples.count) * 1_000_000 / 48_000,
                                                arrivalMicros: now, waitMicros: state.jitterBufferWaitMicros)
            }
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

    /// Sender capture time → local time on the playout's timeline, with the delay of the last block
    /// played from data as its latency (0 before one played); nil before the first sender report.
    var mapping: PlayoutMapping? {
        state.withLock { state in
            guard let senderToMedia = state.senderToMedia, let anchor = state.playout.anchorMicros else { return nil }
            return PlayoutMapping(offsetMicros: senderToMedia.offsetMicros &+ anchor, latencyMicros: state.playout.statistics.currentDelayMicros,
                                  referenceSenderMicros: senderToMedia.referenceSenderMicros)
        }
    }

    /// The sender capture time of the audio at media time `mediaMicros` (a block's), once known.
    func senderMicros(ofMediaMicros mediaMicros: UInt64) -> UInt64? {
        state.withLock { $0.senderToMedia?.senderMediaTimeMicros(playingAt: mediaMicros) }
    }

    /// How much later than the playout's timeline the RTP jitter buffer stamps the packets it lets
    /// out (µs, latest packet): where it anchored itself, against the fastest packets.
    var jitterBufferLagMicros: Int64? { state.withLock { $0.jitterBufferLagMicros } }

    /// The delay of the last block played from data (µs): from its place on the playout's timeline
    /// to the time it is heard. Nil before the first block played.
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
            let taken = state.withLock { state -> AdaptivePlayout.Block? in
                guard !state.stopping else { return nil }
                state.playout.outputLeadMicros = lead
                return state.playout.nextBlock(playoutMicros: playoutMicros)
            }
            guard let block = taken else { return }
            output.deliver(block, playoutMicros)
            blocks += 1
            if blocks % 100 == 0 {
                // The jitter buffer's wait for a missing packet, so that the packets it holds behind one
                // still come in time; kept, to tell the declaration delay from the wait.
                let wait = state.withLock { state in
                    state.jitterBufferWaitMicros = state.playout.upstreamWaitMicros(lagMicros: state.jitterBufferLagMicros)
                    return state.jitterBufferWaitMicros
                }
                output.retune(wait)
            }
            // Blocks are as long as the playout makes them (`shortensBlocks`).
            next += UInt64(block.samples.count) * 1_000_000 / 48_000
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
