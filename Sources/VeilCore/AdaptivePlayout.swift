/// Adaptive playout of a received voice: how long each sample waits between its arrival and the
/// loudspeaker, chosen from the jitter the connection actually shows, and changed without clicks or
/// skips. The idea is libwebrtc's NetEq; the parts are Veil's own:
///
/// - **Timeline.** Received audio is placed by its media time (its RTP timestamp), and media time
///   is put on the local clock by the fastest packet of the last seconds: a sample's timeline time
///   is when the fastest packet would have brought it (`timelineMicros(ofMediaMicros:)`). Delays are
///   counted from there, so that where the receiver happened to start (a first packet held up by
///   the handshake, an RTP jitter buffer anchored to it) adds nothing.
/// - **Target delay.** Every packet's arrival is compared with its media time:
///   how much later than the fastest packet of the last seconds it came is its arrival delay, as
///   in NetEq, measured where packets enter the RTP jitter buffer so that the buffer's own waits
///   for a lost packet do not feed back into it. The target is a high quantile (99 %) of those
///   delays over the last seconds, plus a small margin, plus one output block unless the blocks
///   are read on the packets' grid (below); how early the output takes blocks before they are
///   heard (`outputLeadMicros`, the sound server's buffer) comes on top. A clean path settles near
///   5 ms before the output's lead, a jittery one above its jitter; when the jitter ends, the
///   window forgets it within `windowSeconds`.
/// - **Blocks on the packets' grid.** A block that starts where a packet starts (or on the block
///   grid inside it: 20 ms packets hold two 10 ms blocks) needs only that packet; one that
///   straddles two needs the later one, a block's time later. While the received chunks all begin
///   on one grid of block-sized steps (`gridPhase`), the playout keeps its reading position on it:
///   it starts there, a catch-up or a skip of near-silence lands there, and a near-silent block
///   that is off the grid skips to it. On the grid the target goes without the block as far as
///   the arrival delays do not spread (`alignmentCreditMicros`: on a jittery path the block stays,
///   a margin for the quantile's estimate); a pitch period stretched in speech leaves the grid,
///   and the target takes the block back until the next pause. Without the block nothing covers
///   what the jitter buffer and the decoder add, so on the grid the delays are also measured
///   where decoded chunks reach the playout (`chunkDelays`), and a chunk that came after its time
///   counts at once (`lateDelays`). The grid is used only while the path loses nothing (no audio
///   made up upstream within the window): chunks held behind a lost packet come in a burst that
///   is not told apart surely from late ones, and a lossy path's target is the declaration's
///   (below), which is higher anyway.
/// - **A stream shown with the voice.** The avatar is drawn at the moment of the voice being heard,
///   and interpolating there needs the expression frame captured after that moment. When those
///   frames come later than that (mostly after lost frames), the target is raised to the 95th
///   percentile of the delay they needed (`syncedFrameArrived`), at most
///   `syncedStreamCeilingMicros`: the voice waits a little for the face, never long.
/// - **Losses declared upstream.** An RTP jitter buffer in front of the playout holds the packets
///   behind a missing one until it declares it lost, and only then does the decoder make up audio
///   for it and let the rest through. When that is, the jitter buffer's timers decide (they count
///   from its own timestamps, which follow the slower packets of a jittery path), so the playout
///   measures it: how long after the timeline time of the first packet it held the made-up audio
///   came, less the wait the jitter buffer was given then (`upstreamConcealed`). While the path
///   loses packets, the target covers the latest of those, the least wait, decoding and a
///   block (`upstreamLossFloorMicros`), so that the packets held behind a loss do not come after
///   their place was played. On a clean path a loss is declared when the next packet comes, which
///   asks for nothing more; a path that loses nothing pays nothing.
/// - **Playout.** The output takes one block (10 ms) at a time at the device's pace. Its error is
///   how far the delay the next sample would get lies from the target. Too late: a block consumes
///   one pitch period more than it plays (*accelerate*, the period removed by cross-fading two
///   similar periods), or skips up to a block of near-silence; more than 100 ms too late (the
///   start after a burst, a path that got much faster), the excess is skipped at once. Too early:
///   it plays one period more than it consumes (*expand*, the last period repeated by a
///   cross-fade). The voice's pitch is untouched, and a change in delay spreads over many blocks.
/// - **Nothing to play.** When the next samples have not arrived, the block repeats the last pitch
///   period, fading out (*conceal*), and the voice stays where it was: the delay grows by a block,
///   and acceleration brings it back. A chunk that comes after its playout time counts as late.
///
/// Times are microseconds of one monotonic clock; samples are mono floats at `sampleRate`. Not
/// thread-safe: the owner serialises `insert` and `nextBlock`.
public struct AdaptivePlayout: Sendable {
    /// Settings; the defaults suit 48 kHz speech in 10 ms blocks.
    public struct Configuration: Sendable, Equatable {
        public var sampleRate = 48_000
        /// Samples per output block.
        public var blockSamples = 480
        /// A delay after the fastest packets to keep instead of the adaptive target (e.g.
        /// `veil call --latency 80`), the output's lead excluded; nil adapts.
        public var fixedDelayMicros: UInt64?
        /// Added to the arrival-delay quantile, for the scheduling of the output thread.
        public var marginMicros: UInt64 = 3_000
        /// The target while too few arrivals are known (NetEq starts at 80 ms too).
        public var initialDelayMicros: UInt64 = 80_000
        public var minimumDelayMicros: UInt64 = 5_000
        public var maximumDelayMicros: UInt64 = 500_000
        /// The share of arrivals the target covers: 1 − this is the late-packet rate it accepts.
        public var quantile = 0.99
        /// How long an arrival delay counts towards the target.
        public var windowSeconds = 6.0
        /// The share of a synced stream's frames the target waits for (`syncedFrameArrived`).
        public var syncedStreamQuantile = 0.95
        /// The most the voice is held back for a synced stream: a conversation suffers more from
        /// a later voice than from a picture held for a frame (the 100 ms Veil's voice once
        /// waited on every path).
        public var syncedStreamCeilingMicros: UInt64 = 100_000
        /// The least and most an upstream jitter buffer is told to wait for a missing packet
        /// (`upstreamWaitMicros`), and what decoding the audio made up for it may take.
        public var upstreamLeastWaitMicros: UInt64 = 2_000, upstreamMostWaitMicros: UInt64 = 400_000
        public var upstreamDecodeMicros: UInt64 = 5_000
        /// The share of the window's upstream loss declarations the target covers: all of them, since
        /// a window holds few (15 in 6 s at 5 % loss) and every packet held behind a later one is late.
        public var upstreamDeclarationQuantile = 1.0
        /// Whether the output takes blocks of any length, its clock being the playout's own (a
        /// thread of its own, a callback): on the chunks' grid the delay can otherwise only be what
        /// the output's clock gives it, up to a block above the target, and a near-silent block is
        /// then shortened by that excess, so that the output's clock moves and the reading stays on
        /// the grid. A sound card that pulls blocks of one size leaves it off.
        public var shortensBlocks = false

        public init(sampleRate: Int = 48_000, blockSamples: Int = 480, fixedDelayMicros: UInt64? = nil) {
            self.sampleRate = sampleRate
            self.blockSamples = blockSamples
            self.fixedDelayMicros = fixedDelayMicros
        }
    }

    /// What the playout did so far. Sample counts are at `sampleRate`.
    public struct Statistics: Sendable, Equatable {
        /// The delay after the fastest packets the playout aims at now (µs): arrival-delay
        /// quantile, block, margin and the output's lead.
        public var targetDelayMicros: UInt64 = 0
        /// Of the target, how long before it is heard the output takes a block (µs).
        public var outputLeadMicros: UInt64 = 0
        /// The delay of the last block played from data: its playout time minus its first sample's
        /// timeline time (µs), that is the time since the fastest packets would have brought it.
        public var currentDelayMicros: UInt64 = 0
        /// Chunks of received packets inserted, and those that came after their playout time at the
        /// target (audio made up upstream for lost packets is in neither).
        public var chunks = 0, lateChunks = 0
        /// Samples handed out (blocks × block size), silence before the first chunk excluded.
        public var playedSamples = 0
        /// Samples removed by acceleration (speech periods, near-silence, and what a catch-up skipped).
        public var acceleratedSamples = 0
        /// Samples inserted by expansion.
        public var expandedSamples = 0
        /// Samples made up while nothing had arrived to play.
        public var concealedSamples = 0
        /// Runs of made-up audio: the playout's own concealments, and runs of audio made up upstream
        /// for lost packets that did not come while the playout concealed the same gap. The
        /// counterpart of WebRTC's inbound-rtp `concealmentEvents`.
        public var concealmentEvents = 0
        /// Samples dropped unplayed: duplicates, chunks that came after their place was played,
        /// overflow, stale audio before a (re)start.
        public var droppedSamples = 0

        /// Nothing played yet.
        public init() {}
    }

    /// How a block was made.
    public enum BlockKind: Sendable, Equatable {
        /// Waiting for the first chunk, or for the delay to reach its target after a (re)start.
        case silence
        /// Played as received.
        case normal
        /// Played faster: `removed` samples of the input left out.
        case accelerated(removed: Int)
        /// Played slower: `inserted` samples repeated.
        case expanded(inserted: Int)
        /// Made up: nothing had arrived.
        case concealed
    }

    /// One block of output.
    public struct Block: Sendable {
        public var samples: [Float]
        /// The timeline time (µs) of the first input sample the block plays (after the skip, for a
        /// block that caught up); nil for silence.
        public var timelineMicros: UInt64?
        /// The media time (µs) of that sample; nil for silence.
        public var mediaMicros: UInt64?
        public var kind: BlockKind
    }

    public let configuration: Configuration
    public private(set) var statistics = Statistics()
    /// How long before its playout time the output takes a block (µs): the latency of the sound
    /// server's buffer, which the owner sets as the output reports it (0 for a callback called at
    /// the playout time). Blocks are taken this much earlier, so the target grows by as much.
    public var outputLeadMicros: UInt64 = 0 {
        didSet { statistics.outputLeadMicros = outputLeadMicros }
    }

    /// Arrival minus media time of each packet after the stream's first second (ms), relative to
    /// the first packet's: the jitter.
    private var arrivalDelays: SlidingPercentile
    /// The same for every packet, the first second's included: its least is the anchor (a burst
    /// that queued while the connection came up arrives late, never early).
    private var allArrivalDelays: SlidingPercentile
    /// The delays a synced stream's frames needed (ms), and the newest frame's media time
    /// (`syncedFrameArrived`).
    private var syncedNeeds: SlidingPercentile
    private var lastSyncedMediaMicros: UInt64?
    /// The buffer target of the last block for which enough arrivals were known (µs).
    private var lastMeasuredTargetMicros: UInt64?
    /// How long after its timeline time audio made up upstream for a lost packet came, less the
    /// upstream wait then (ms, `upstreamConcealed`).
    private var upstreamDeclarations: SlidingPercentile
    /// The intervals between a synced stream's frames (ms): their median is the stream's usual one.
    private var syncedIntervals: SlidingPercentile
    /// The same for decoded chunks where they reach the playout, after the stream's first second
    /// (ms): what the RTP jitter buffer and the decoder add. Chunks held behind a lost packet are
    /// not counted (their wait is the declaration's, `upstreamConcealed`).
    private var chunkDelays: SlidingPercentile
    /// When audio made up upstream, or a chunk held behind it, was last inserted: chunks that
    /// follow within `heldBurstMicros` were held with it.
    private var lastHeldMicros: UInt64?
    static let heldBurstMicros: UInt64 = 2_000
    /// The chunk delays (ms, as `chunkDelays`) of the chunks that came after their playout time:
    /// the target covers the latest of the window at once, rather than once a quantile's share
    /// of arrivals came as late (after a step in the path's delay, each of those was one more
    /// concealment).
    private var lateDelays: SlidingPercentile
    /// The media time of the first packet of the path measured now: chunks before it came the
    /// old, slower way (the burst the jitter buffer still held when the path got faster).
    private var pathStartMediaMicros: UInt64 = 0
    /// Arrival minus media time of the first packet (µs): what `arrivalDelays` count from.
    private var arrivalBase: Int64?
    private var firstArrivalMicros: UInt64?
    /// When the latest packet arrived.
    private var latestArrivalMicros: UInt64 = 0
    /// A stream's first packets can be stale (held back while the connection came up) and come in
    /// a burst: playout does not start before packets have been arriving for this long (µs), so
    /// that fresh ones have shown where the fastest stand (less than the initial target waits).
    static let arrivalsBeforeStartMicros: UInt64 = 60_000
    /// Received samples; `buffer[read...]` is still to play.
    private var buffer: [Float] = []
    private var read = 0
    /// Sample positions count from media time `originMicros`; `buffer[0]` is at `bufferStart`.
    private var originMicros: UInt64?
    private var bufferStart: Int64 = 0
    /// Whether playout has begun since the last (re)start.
    private var playing = false
    /// The most recent output (for expansion and concealment), newest last.
    private var history: [Float] = []
    /// Concealment in progress: its period, gain, and position within the period.
    private var concealPeriod = 240, concealGain: Float = 1, concealPhase = 0
    private var concealing = false
    /// Whether the last chunk inserted was made up upstream (a run of them is one concealment event).
    private var lastChunkMadeUp = false
    /// Consecutive concealed blocks (a long silence restarts the playout).
    private var concealedBlocks = 0
    /// Blocks since the last acceleration of speech (speech is accelerated at most every other block).
    private var blocksSinceSpeechAcceleration = 0
    /// Where received chunks begin, modulo a block (samples): the grid on which a block needs only
    /// one chunk. Nil until two chunk boundaries agree, and while they do not (chunks of another length).
    private var gridPhase: Int?
    /// The position modulo a block of the last chunk boundary seen.
    private var lastBoundaryPhase: Int?
    /// What the target may go without while blocks are read on the grid (µs) when last measured.
    private var lastMeasuredCreditMicros: UInt64 = 0

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
        arrivalDelays = SlidingPercentile(seconds: configuration.windowSeconds)
        allArrivalDelays = SlidingPercentile(seconds: configuration.windowSeconds)
        chunkDelays = SlidingPercentile(seconds: configuration.windowSeconds)
        lateDelays = SlidingPercentile(seconds: configuration.windowSeconds)
        syncedNeeds = SlidingPercentile(seconds: configuration.windowSeconds)
        syncedIntervals = SlidingPercentile(seconds: configuration.windowSeconds)
        upstreamDeclarations = SlidingPercentile(seconds: configuration.windowSeconds)
        statistics.targetDelayMicros = targetDelayMicros
    }

    private var rate: Int64 { Int64(configuration.sampleRate) }
    private var blockSamples: Int { configuration.blockSamples }
    /// One block's duration (µs).
    private var blockMicros: UInt64 { UInt64(blockSamples) * 1_000_000 / UInt64(rate) }
    /// Shortest and longest pitch period searched: 2.5 ms (400 Hz) and one block (100 Hz at 10 ms).
    private var shortestPeriod: Int { configuration.sampleRate / 400 }
    private var longestPeriod: Int { blockSamples }
    /// Cross-fade length for joins that are not pitch-synchronous (2.5 ms).
    private var fadeSamples: Int { configuration.sampleRate / 400 }

    private func position(ofMicros micros: UInt64, origin: UInt64) -> Int64 {
        let offset = Int64(bitPattern: micros &- origin)
        return (offset * rate + (offset >= 0 ? 500_000 : -500_000)) / 1_000_000
    }

    private func micros(ofPosition position: Int64, origin: UInt64) -> UInt64 {
        UInt64(bitPattern: Int64(bitPattern: origin) &+ position * 1_000_000 / rate)
    }

    /// The delay the playout aims at now (µs), the output's lead included, for blocks that may
    /// straddle two chunks (`statistics.targetDelayMicros` has the target for where it reads).
    public var targetDelayMicros: UInt64 { bufferTargetMicros + outputLeadMicros }

    /// The target for the next block where the playout reads now (µs, the output's lead included):
    /// a block less on the chunks' grid.
    private var effectiveTargetMicros: UInt64 {
        targetDelayMicros - (readsOnGrid ? min(alignmentCreditMicros, bufferTargetMicros) : 0)
    }

    /// Arrival minus media time of the fastest packet of the window (µs); the first packet's until
    /// a second of arrivals is known, nil before any packet arrived. The timeline is media time
    /// plus this: it follows the path (and the drift between the two machines' clocks) as the window does.
    public var anchorMicros: Int64? {
        guard let base = arrivalBase else { return nil }
        guard let fastest = allArrivalDelays.value(at: 0) else { return base }
        return base + Int64((Double(fastest) * 1000).rounded())
    }

    /// The local time at which the fastest packets bring media time `mediaMicros`; nil before any packet arrived.
    public func timelineMicros(ofMediaMicros mediaMicros: UInt64) -> UInt64? {
        anchorMicros.map { UInt64(bitPattern: Int64(bitPattern: mediaMicros) &+ $0) }
    }

    /// The delay a block waits in the playout before the output takes it (µs). Before the first
    /// arrivals are known, or while they are measured again after the path got faster: the last
    /// target measured, so that a jittery path is not met unprepared.
    private var bufferTargetMicros: UInt64 {
        configuration.fixedDelayMicros ?? measuredTargetMicros ?? lastMeasuredTargetMicros ?? configuration.initialDelayMicros
    }

    /// The target the arrivals and the floors ask for (µs); nil while fewer than 25 arrivals are known.
    private var measuredTargetMicros: UInt64? { measuredTargets?.straddling }

    /// The target the arrivals and the floors ask for (µs), for blocks that may straddle two chunks
    /// and for blocks read on the chunks' grid; nil while fewer than 25 arrivals are known.
    private var measuredTargets: (straddling: UInt64, aligned: UInt64)? {
        guard arrivalDelays.count >= 25, let fastest = allArrivalDelays.value(at: 0),
              let quantile = arrivalDelays.value(at: configuration.quantile) else { return nil }
        let clamp = { (target: UInt64) in min(max(target, self.configuration.minimumDelayMicros), self.configuration.maximumDelayMicros) }
        let margin = configuration.marginMicros
        let above = { (delay: Float) in UInt64(max(Double(delay - fastest), 0) * 1000) + margin }
        // A block straddling two chunks needs the later one: one block more than the arrival delay,
        // for the packets as for the first one held behind a loss (`upstreamLossFloorMicros`).
        let floor = upstreamLossFloorMicros
        // A chunk that came after its time (a step in the path's delay) counts at once, rather than
        // once a quantile's share of arrivals came as late (each of those one more concealment).
        var slow = quantile
        if let late = lateDelays.value(at: 1) { slow = max(slow, late) }
        let straddling = clamp(max(above(slow) + blockMicros, syncedStreamFloorMicros, floor))
        // The grid only while the path loses nothing: packets held behind a lost one reach the
        // playout in a burst that is not told apart surely from a late packet, and what they
        // would ask of the aligned target is the declaration's (already above it).
        guard !losesPackets else { return (straddling, straddling) }
        // On the grid the jitter buffer's and decoder's own delays count, since no block's time is
        // left to cover them.
        var slowest = slow
        if chunkDelays.count >= 25, let decoded = chunkDelays.value(at: configuration.quantile) { slowest = max(slowest, decoded) }
        // The block doubles as a margin for the quantile, which a window of a few hundred arrivals
        // estimates the less surely the more they spread: it is kept as far as the 50th and 95th
        // percentiles lie apart, so that a clean path goes without it and a jittery one keeps it.
        let spread = Double((arrivalDelays.value(at: 0.95) ?? quantile) - (arrivalDelays.value(at: 0.5) ?? quantile))
        let kept = min(UInt64(max(spread, 0) * 1000), blockMicros)
        let aligned = clamp(max(above(slowest) + kept, syncedStreamFloorMicros))
        return (straddling, min(aligned, straddling))
    }

    /// What the target goes without while blocks are read on the chunks' grid (µs): the block a
    /// straddling block waits for, less what the avatar's frames ask anyway; 0 for a fixed delay.
    private var alignmentCreditMicros: UInt64 {
        guard configuration.fixedDelayMicros == nil else { return 0 }
        if let targets = measuredTargets { return targets.straddling - targets.aligned }
        return lastMeasuredTargetMicros != nil ? lastMeasuredCreditMicros : 0
    }

    /// Whether the next block is read on the chunks' grid (within a sample, for timestamps rounded to µs).
    private var readsOnGrid: Bool {
        guard let grid = gridPhase else { return false }
        return Self.circularDistance(phase(of: bufferStart + Int64(read)), grid, modulo: blockSamples) <= 1
    }

    /// `position` modulo a block, in 0..<blockSamples.
    private func phase(of position: Int64) -> Int {
        let b = Int64(blockSamples)
        return Int(((position % b) + b) % b)
    }

    static func circularDistance(_ a: Int, _ b: Int, modulo m: Int) -> Int {
        let d = abs(a - b) % m
        return min(d, m - d)
    }

    /// A chunk boundary is at the end of the buffer: the grid holds while boundaries agree.
    private mutating func noteChunkBoundary() {
        let boundary = phase(of: bufferStart + Int64(buffer.count))
        if let last = lastBoundaryPhase, Self.circularDistance(boundary, last, modulo: blockSamples) <= 1 {
            gridPhase = boundary
        } else {
            gridPhase = nil
        }
        lastBoundaryPhase = boundary
    }

    /// The samples to leave out after the next block so that the block after it is read on the
    /// grid: the most that keeps the delay no more than 1 ms below the target on the grid (where
    /// the playout would expand), at least `least` and at most `most`; nil when the grid is unknown
    /// or worth nothing (no credit), or no such amount exists. `errorSamples` is the error against
    /// the target for where the playout reads now. On the grid the delay moves in blocks: it
    /// settles within a block above the target, where the output's clock puts the grid.
    private func aligningSkip(errorSamples: Int, least: Int, most: Int) -> Int? {
        guard let grid = gridPhase, alignmentCreditMicros > 0 else { return nil }
        let credit = readsOnGrid ? 0 : Int(Int64(alignmentCreditMicros) * rate / 1_000_000)
        let upper = min(most, errorSamples + credit + Int(rate) / 1000)
        let next = phase(of: bufferStart + Int64(read + blockSamples))
        var skip = (grid - next + blockSamples) % blockSamples
        if skip < least { skip += blockSamples * ((least - skip + blockSamples - 1) / blockSamples) }
        guard skip <= upper else { return nil }
        return skip + blockSamples * ((upper - skip) / blockSamples)
    }

    /// Whether the path lost packets within the window: audio was made up upstream for one
    /// (`upstreamConcealed`). The packets' grid and the late-chunk floor wait until it is forgotten.
    private var losesPackets: Bool { upstreamDeclarations.count > 0 }

    /// What losses declared upstream ask of the voice's delay (µs): the declaration delay, the
    /// least wait and decoding, and a block (the block that straddles the end of the made-up audio
    /// needs the packet after it); 0 when no audio was made up upstream within the window.
    private var upstreamLossFloorMicros: UInt64 {
        guard let declaration = upstreamDeclarationMicros else { return 0 }
        return UInt64(max(declaration, 0)) + configuration.upstreamLeastWaitMicros + configuration.upstreamDecodeMicros + blockMicros
    }

    /// How long an upstream jitter buffer may wait for a missing packet (µs) so that the packets it
    /// holds behind it still come before their place is taken: the target less a block, less the
    /// declaration delay (`upstreamDeclarationMicros`; before a loss was seen, `lagMicros`, how far
    /// behind the timeline it stamps packets) and decoding; within the least and most wait. The
    /// counterpart of `upstreamLossFloorMicros`, which keeps it at the least wait or above.
    public func upstreamWaitMicros(lagMicros: Int64?) -> UInt64 {
        let declaration = upstreamDeclarationMicros ?? lagMicros ?? 0
        let wait = Int64(bufferTargetMicros) - Int64(blockMicros) - declaration - Int64(configuration.upstreamDecodeMicros)
        return UInt64(min(max(wait, Int64(configuration.upstreamLeastWaitMicros)), Int64(configuration.upstreamMostWaitMicros)))
    }

    /// How long after the timeline time of the packet that follows a lost one an upstream jitter
    /// buffer declares the loss, before the wait it is given (µs, `upstreamDeclarationQuantile` of
    /// the window); nil when nothing was declared lost within the window.
    public var upstreamDeclarationMicros: Int64? {
        upstreamDeclarations.value(at: configuration.upstreamDeclarationQuantile).map { Int64((Double($0) * 1000).rounded()) }
    }

    /// Audio made up upstream for lost packets, from media time `mediaMicros` for `durationMicros`,
    /// arrived at `arrivalMicros`; the upstream jitter buffer had been told to wait `waitMicros`
    /// for a missing packet. The packets it held behind the loss come with it: the first of them
    /// starts where the made-up audio ends, so the declaration is counted from there. Ignored in a
    /// stream's first second (what queued while the connection came up is not the path).
    public mutating func upstreamConcealed(mediaMicros: UInt64, durationMicros: UInt64, arrivalMicros: UInt64, waitMicros: UInt64) {
        guard let timeline = timelineMicros(ofMediaMicros: mediaMicros &+ durationMicros),
              let first = firstArrivalMicros, arrivalMicros &- first >= 1_000_000 else { return }
        let declaration = Int64(bitPattern: arrivalMicros &- timeline) - Int64(waitMicros)
        upstreamDeclarations.add(Float(Double(declaration) / 1000), at: Double(arrivalMicros) / 1_000_000)
    }

    /// What the synced stream asks of the voice's delay (µs): 0 until 10 of its frames are known.
    private var syncedStreamFloorMicros: UInt64 {
        guard syncedNeeds.count >= 10, let need = syncedNeeds.value(at: configuration.syncedStreamQuantile) else { return 0 }
        return min(UInt64(max(Double(need), 0) * 1000), configuration.syncedStreamCeilingMicros)
    }

    /// A frame of a stream drawn in sync with the voice (the avatar's expressions) arrived at
    /// `arrivalMicros`; it was captured when the voice at media time `mediaMicros` was. What it
    /// asks of the voice, counted from the timeline:
    ///
    /// - After frames were lost (a gap of more than 1.5 of the stream's usual intervals), every
    ///   moment in the gap is drawn by interpolating up to this frame, so the voice of the moment
    ///   after the previous frame must not play before this one is here: it needed its arrival
    ///   minus the previous frame's timeline time.
    /// - Otherwise it needed only its own arrival minus its own timeline time: a moment just before
    ///   it is drawn from the previous frame, held for less than one interval (inside the lip-sync
    ///   window), so a frame a little late, as tracking makes it, does not hold the voice back.
    ///
    /// Frames older than the newest are not counted, nor those after a gap of more than half a
    /// second (the avatar does not interpolate across it).
    public mutating func syncedFrameArrived(mediaMicros: UInt64, arrivalMicros: UInt64) {
        guard let previous = lastSyncedMediaMicros else {
            lastSyncedMediaMicros = mediaMicros
            return
        }
        guard mediaMicros > previous else {
            // More than 2 s back: the sender's stream started over.
            if previous - mediaMicros > 2_000_000 { lastSyncedMediaMicros = mediaMicros }
            return
        }
        lastSyncedMediaMicros = mediaMicros
        guard let anchor = anchorMicros else { return }
        let gap = mediaMicros - previous
        guard gap <= 500_000 else { return }
        let seconds = Double(arrivalMicros) / 1_000_000
        syncedIntervals.add(Float(Double(gap) / 1000), at: seconds)
        let usual = Double(syncedIntervals.value(at: 0.5) ?? 0) * 1000
        let bridged = Double(gap) > 1.5 * usual
        let needed = Int64(bitPattern: arrivalMicros &- (bridged ? previous : mediaMicros)) &- anchor
        syncedNeeds.add(Float(Double(needed) / 1000), at: seconds)
    }

    /// A packet arrived from the network at `arrivalMicros`, carrying media from `mediaMicros` on
    /// (its RTP timestamp in µs, unwrapped; any origin). Feeds the target delay.
    public mutating func packetArrived(mediaMicros: UInt64, arrivalMicros: UInt64) {
        // A stream's first second is not its jitter: what queued while the connection came up
        // arrives in a burst, and the receiver's clock mapping settles.
        latestArrivalMicros = max(latestArrivalMicros, arrivalMicros)
        let difference = Int64(bitPattern: arrivalMicros &- mediaMicros)
        let base = arrivalBase ?? difference
        arrivalBase = base
        let first = firstArrivalMicros ?? arrivalMicros
        firstArrivalMicros = first
        let relative = Float(Double(difference - base) / 1000)
        let seconds = Double(arrivalMicros) / 1_000_000
        if let fastest = allArrivalDelays.value(at: 0), relative < fastest - 10 {
            // The path got faster by more than half a packet: what the window holds was measured from
            // the old, slower path and would read as jitter. Start the measurement over.
            arrivalDelays.removeAll()
            allArrivalDelays.removeAll()
            chunkDelays.removeAll()
            lateDelays.removeAll()
            pathStartMediaMicros = mediaMicros
            upstreamDeclarations.removeAll()
        }
        allArrivalDelays.add(relative, at: seconds)
        guard arrivalMicros &- first >= 1_000_000 else { return }
        arrivalDelays.add(relative, at: seconds)
    }

    /// A decoded chunk: `samples` whose first one is at media time `mediaMicros` (its RTP timestamp
    /// in µs, on `packetArrived`'s scale), here at `arrivalMicros`. It is late when it came after
    /// its first sample's playout time at the target (its timeline time plus the target, less the
    /// output's lead: when the output takes it).
    ///
    /// `madeUpUpstream`: audio the decoder made up for a lost packet (`upstreamConcealed`). It is
    /// played like any other, but counted neither as a chunk nor as late: it is no packet (late
    /// packets are what NetEq counts as discarded); when it comes after its time, the playout's own
    /// concealment shows it.
    public mutating func insert(_ samples: [Float], mediaMicros: UInt64, arrivalMicros: UInt64, madeUpUpstream: Bool = false) {
        guard !samples.isEmpty else { return }
        // A run of made-up audio that comes while the playout conceals the same gap continues it.
        if madeUpUpstream, !lastChunkMadeUp, !concealing { statistics.concealmentEvents += 1 }
        lastChunkMadeUp = madeUpUpstream
        // Held behind a lost packet: its wait is the declaration's, which `upstreamConcealed`
        // measures; counted here too, it would raise the target, the wait derived from it, and
        // the declaration with it.
        let held = madeUpUpstream || lastHeldMicros.map({ arrivalMicros &- $0 <= Self.heldBurstMicros }) == true
        if held { lastHeldMicros = arrivalMicros }
        // What the jitter buffer and the decoder add (`chunkDelays`), from the path measured now.
        var relative: Float?
        if !held, let base = arrivalBase, let first = firstArrivalMicros, arrivalMicros &- first >= 1_000_000,
           mediaMicros >= pathStartMediaMicros || pathStartMediaMicros - mediaMicros > 10_000_000 {
            let delay = Float(Double(Int64(bitPattern: arrivalMicros &- mediaMicros) - base) / 1000)
            chunkDelays.add(delay, at: Double(arrivalMicros) / 1_000_000)
            relative = delay
        }
        if !madeUpUpstream {
            statistics.chunks += 1
            if playing, let timeline = timelineMicros(ofMediaMicros: mediaMicros),
               Int64(bitPattern: arrivalMicros &- timeline) > Int64(effectiveTargetMicros - outputLeadMicros) {
                statistics.lateChunks += 1
                // Not while the path loses packets: the late ones are then mostly those held behind
                // a loss, whose wait the declaration floor covers (`upstreamLossFloorMicros`).
                if let relative, !losesPackets { lateDelays.add(relative, at: Double(arrivalMicros) / 1_000_000) }
            }
        }
        defer { noteChunkBoundary() }
        guard let origin = originMicros else {
            originMicros = mediaMicros
            bufferStart = 0
            buffer = samples
            read = 0
            lastBoundaryPhase = 0
            return
        }
        let start = position(ofMicros: mediaMicros, origin: origin)
        let end = bufferStart + Int64(buffer.count)
        let tolerance = Int64(configuration.sampleRate / 1000)
        if start > end + Int64(configuration.sampleRate / 2) {
            // Half a second missing: the stream paused (or the timeline moved); start over.
            restart(at: mediaMicros, with: samples)
            return
        }
        if start > end + tolerance {
            // A gap the decoder did not conceal: filled with silence, to keep the timeline.
            buffer.append(contentsOf: repeatElement(0, count: Int(start - end)))
            buffer.append(contentsOf: samples)
        } else if start >= end - tolerance {
            buffer.append(contentsOf: samples)
        } else {
            // Overlaps what is here (a duplicate, or a chunk whose place was played): keep the new part.
            let skip = Int(min(end - start, Int64(samples.count)))
            statistics.droppedSamples += skip
            if skip < samples.count { buffer.append(contentsOf: samples[skip...]) }
        }
        let overflow = buffer.count - read - Int(Int64(configuration.maximumDelayMicros) * 2 * rate / 1_000_000)
        if overflow > 0 {
            read += overflow
            statistics.droppedSamples += overflow
        }
        compact()
    }

    private mutating func restart(at mediaMicros: UInt64, with samples: [Float]) {
        statistics.droppedSamples += buffer.count - read
        originMicros = mediaMicros
        bufferStart = 0
        buffer = samples
        read = 0
        lastBoundaryPhase = 0
        playing = false
        concealing = false
        concealedBlocks = 0
    }

    private mutating func compact() {
        if read > 48_000 {
            buffer.removeFirst(read)
            bufferStart += Int64(read)
            read = 0
        }
    }

    /// The next block, to be played at `playoutMicros`.
    public mutating func nextBlock(playoutMicros: UInt64) -> Block {
        // A synced stream that stopped (the sender's camera is off) stops holding the voice back.
        syncedNeeds.forget(before: Double(playoutMicros) / 1_000_000 - configuration.windowSeconds)
        upstreamDeclarations.forget(before: Double(playoutMicros) / 1_000_000 - configuration.windowSeconds)
        lateDelays.forget(before: Double(playoutMicros) / 1_000_000 - configuration.windowSeconds)
        if let measured = measuredTargets {
            lastMeasuredTargetMicros = measured.straddling
            lastMeasuredCreditMicros = measured.straddling - measured.aligned
        }
        statistics.targetDelayMicros = effectiveTargetMicros
        guard let origin = originMicros, let anchor = anchorMicros else {
            return Block(samples: silence(), timelineMicros: nil, mediaMicros: nil, kind: .silence)
        }
        // The next sample to play: its media and timeline times, and how much later than the
        // target for where it is read it would play.
        func reading() -> (media: UInt64, timeline: UInt64, error: Int64) {
            let media = micros(ofPosition: bufferStart + Int64(read), origin: origin)
            let timeline = UInt64(bitPattern: Int64(bitPattern: media) &+ anchor)
            let target = effectiveTargetMicros
            statistics.targetDelayMicros = target
            return (media, timeline, Int64(bitPattern: playoutMicros &- timeline) - Int64(target))
        }
        var (readMedia, readMicros, error) = reading()
        if !playing {
            // (Re)start: wait in silence until the first sample would play at the target delay,
            // and the first packets have shown where the fastest ones stand.
            let arriving = firstArrivalMicros.map { latestArrivalMicros &- $0 } ?? 0
            // On the grid the delay can only be what the output's clock gives it, in blocks: the
            // first that is not below the target (by more than the playout would expand).
            let earliest = readsOnGrid ? -1_000 : -Int64(blockMicros) / 2
            guard error >= earliest, arriving >= Self.arrivalsBeforeStartMicros else {
                return Block(samples: silence(), timelineMicros: nil, mediaMicros: nil, kind: .silence)
            }
            // Later than the target already (stale audio at the start): what nobody has heard yet
            // is left out, so that the first block plays at the target.
            var stale = min(Int(error * rate / 1_000_000), buffer.count - read - blockSamples)
            // Onto the grid, when that leaves something out.
            if let grid = gridPhase, stale > 0 {
                let off = (phase(of: bufferStart + Int64(read + stale)) - grid + blockSamples) % blockSamples
                if off <= stale { stale -= off }
            }
            if stale > 0 {
                read += stale
                statistics.droppedSamples += stale
                (readMedia, readMicros, error) = reading()
            }
            playing = true
            history = []
        }
        statistics.playedSamples += blockSamples
        let block: Block
        let available = buffer.count - read
        if available < blockSamples {
            block = conceal()
        } else {
            block = play(error: error, available: available, timelineMicros: readMicros, mediaMicros: readMedia)
            statistics.currentDelayMicros = UInt64(max(Int64(bitPattern: playoutMicros &- (block.timelineMicros ?? readMicros)), 0))
        }
        remember(block.samples)
        return block
    }

    private func silence() -> [Float] { [Float](repeating: 0, count: blockSamples) }

    /// A block from data, `error` µs later (positive) or earlier than the target.
    private mutating func play(error: Int64, available: Int, timelineMicros: UInt64, mediaMicros: UInt64) -> Block {
        let n = blockSamples
        let errorSamples = Int(error * rate / 1_000_000)
        // The target is the least delay that is safe: the playout stays between it and 5 ms above.
        let above = Int(rate) * 5 / 1000, below = Int(rate) / 1000
        blocksSinceSpeechAcceleration += 1
        var output: [Float]
        var kind = BlockKind.normal
        // Where the block's audio comes from once a catch-up skipped (µs after its first sample).
        var skippedMicros: UInt64 = 0
        if errorSamples > Int(rate) / 10, available >= n + 2 * fadeSamples {
            // More than 100 ms late (the start after a burst that queued while the connection came
            // up, a path that got much faster): stretching would take seconds, so the excess is
            // left out at once, with a cross-fade, down to just above the target.
            let removed = aligningSkip(errorSamples: errorSamples, least: fadeSamples, most: available - n)
                ?? min(errorSamples - Int(rate) / 1000, available - n)
            output = Self.joined(Array(buffer[read..<read + n + removed]), skipping: removed, outputCount: n, fade: fadeSamples)
            read += n + removed
            statistics.acceleratedSamples += removed
            kind = .accelerated(removed: removed)
            skippedMicros = UInt64(removed) * 1_000_000 / UInt64(rate)
        } else if configuration.shortensBlocks, errorSamples > below, errorSamples < n, readsOnGrid, alignmentCreditMicros > 0,
                  Self.rms(buffer[read..<read + n]) < Self.quiet {
            // On the grid and above the target: a shorter block, so that the output's clock moves
            // instead of the reading position.
            output = Self.joined(Array(buffer[read..<read + n]), skipping: errorSamples, outputCount: n - errorSamples,
                                 fade: min(fadeSamples, n - errorSamples))
            read += n
            statistics.acceleratedSamples += errorSamples
            statistics.playedSamples -= errorSamples
            kind = .accelerated(removed: errorSamples)
        } else if errorSamples > above || (gridPhase != nil && !readsOnGrid && alignmentCreditMicros > 0), available >= n + shortestPeriod,
           let (removed, samples) = accelerated(by: errorSamples, available: available) {
            output = samples
            read += n + removed
            statistics.acceleratedSamples += removed
            kind = .accelerated(removed: removed)
        } else if errorSamples < -below, history.count >= longestPeriod,
                  let (inserted, samples) = expanded(by: -errorSamples) {
            output = samples
            read += n - inserted
            statistics.expandedSamples += inserted
            kind = .expanded(inserted: inserted)
        } else {
            output = Array(buffer[read..<read + n])
            read += n
        }
        if concealing {
            // Join the concealment's continuation to the data that came back.
            let continuation = concealment(count: fadeSamples)
            for i in 0..<min(fadeSamples, output.count) {
                let w = Float(i + 1) / Float(fadeSamples + 1)
                output[i] = continuation[i] * (1 - w) + output[i] * w
            }
            concealing = false
        }
        concealedBlocks = 0
        compact()
        return Block(samples: output, timelineMicros: timelineMicros + skippedMicros, mediaMicros: mediaMicros + skippedMicros, kind: kind)
    }

    /// Plays `n` samples from `n + removed` of the input: near-silence loses up to what the error
    /// asks (within one block), speech one pitch period that resembles the next. Near-silence read
    /// off the chunks' grid skips onto it, also when the delay is within its band.
    private mutating func accelerated(by errorSamples: Int, available: Int) -> (Int, [Float])? {
        let n = blockSamples
        let most = min(available - n, n)
        let input = buffer[read..<read + n + most]
        let above = Int(rate) * 5 / 1000
        if Self.rms(input) < Self.quiet {
            // Near-silence is joined inaudibly however little is left out.
            if let removed = aligningSkip(errorSamples: errorSamples, least: 1, most: most) {
                return (removed, Self.joined(Array(input), skipping: removed, outputCount: n, fade: fadeSamples))
            }
            // On the grid, a skip of less than a block would leave it for a higher target.
            guard errorSamples > above, !readsOnGrid || alignmentCreditMicros == 0 else { return nil }
            // Down to just above the target.
            let removed = min(errorSamples - Int(rate) / 1000, most)
            guard removed >= fadeSamples else { return nil }
            return (removed, Self.joined(Array(input), skipping: removed, outputCount: n, fade: fadeSamples))
        }
        guard errorSamples > above else { return nil }
        // A period no longer than the excess, so that the delay does not fall below the target
        // (on the grid, the target a block higher that leaving it brings).
        let credit = readsOnGrid ? Int(Int64(alignmentCreditMicros) * rate / 1_000_000) : 0
        let longest = min(most, longestPeriod, errorSamples - credit - Int(rate) / 1000)
        guard blocksSinceSpeechAcceleration >= 2, longest >= shortestPeriod else { return nil }
        let segment = Array(input)
        guard let (period, similarity) = Self.bestPeriod(segment, from: 0, against: 0, periods: shortestPeriod...longest),
              similarity > 0.6 else { return nil }
        blocksSinceSpeechAcceleration = 0
        // The first period cross-fades into the second, which is then skipped.
        var output = [Float](repeating: 0, count: n)
        for i in 0..<period {
            let w = Float(i + 1) / Float(period + 1)
            output[i] = segment[i] * (1 - w) + segment[period + i] * w
        }
        for i in period..<n { output[i] = segment[i + period] }
        return (period, output)
    }

    /// Plays `n` samples from `n − inserted` of the input: the coming period cross-fades into the
    /// last one played, which the input then follows again.
    private mutating func expanded(by errorSamples: Int) -> (Int, [Float])? {
        let n = blockSamples
        let input = Array(buffer[read..<read + n])
        let recent = Array(history.suffix(longestPeriod))
        let quietNow = Self.rms(input[...]) < Self.quiet && Self.rms(recent[...]) < Self.quiet
        let period: Int
        if quietNow {
            period = min(max(errorSamples, shortestPeriod), n / 2)
        } else {
            let joined = recent + input
            guard let (found, similarity) = Self.bestPeriod(joined, from: recent.count, against: recent.count, periods: shortestPeriod...n / 2, backwards: true),
                  similarity > 0.5 else { return nil }
            period = found
        }
        var output = [Float](repeating: 0, count: n)
        let last = history.count - period
        for i in 0..<period {
            let w = Float(i + 1) / Float(period + 1)
            output[i] = input[i] * (1 - w) + history[last + i] * w
        }
        for i in period..<n { output[i] = input[i - period] }
        return (period, output)
    }

    /// A made-up block: the last pitch period repeated, fading out over about 60 ms.
    private mutating func conceal() -> Block {
        if !concealing {
            concealing = true
            statistics.concealmentEvents += 1
            concealGain = 1
            concealPhase = 0
            let recent = history.suffix(2 * longestPeriod)
            if recent.count >= 2 * shortestPeriod, Self.rms(recent) >= Self.quiet,
               let (period, _) = Self.bestPeriod(Array(recent), from: recent.count, against: recent.count,
                                                 periods: shortestPeriod...min(recent.count / 2, longestPeriod), backwards: true, lookback: true) {
                concealPeriod = period
            } else {
                concealPeriod = min(max(history.count, 1), fadeSamples * 2)
            }
        }
        concealedBlocks += 1
        statistics.concealedSamples += blockSamples
        let samples = concealment(count: blockSamples)
        concealPhase += blockSamples
        concealGain *= 0.6
        if concealedBlocks * blockSamples > Int(rate) {
            // A second with nothing: the stream stopped; the next chunk starts the playout afresh.
            playing = false
            concealing = false
            concealedBlocks = 0
            originMicros = nil
            buffer = []
            read = 0
            history = []
        }
        return Block(samples: samples, timelineMicros: nil, mediaMicros: nil, kind: .concealed)
    }

    /// `count` samples of the concealment from where it stands (the gain ramps to the next block's).
    private func concealment(count: Int) -> [Float] {
        guard !history.isEmpty else { return [Float](repeating: 0, count: count) }
        let period = min(concealPeriod, history.count)
        let base = history.count - period
        // The concealment's own output is in the history too: index the period as it stood.
        return (0..<count).map { i in
            let ramp = concealGain * (1 - 0.4 * Float(i) / Float(max(blockSamples, 1)))
            return history[base + (concealPhase + i) % period] * ramp
        }
    }

    private mutating func remember(_ samples: [Float]) {
        if concealing { return } // keep the period that is being repeated
        history.append(contentsOf: samples)
        if history.count > 4 * longestPeriod { history.removeFirst(history.count - 4 * longestPeriod) }
    }

    // MARK: - Signal helpers

    /// Near-silence: below −48 dBFS RMS.
    static let quiet: Float = 0.004

    static func rms(_ samples: ArraySlice<Float>) -> Float {
        guard !samples.isEmpty else { return 0 }
        var sum: Float = 0
        for sample in samples { sum += sample * sample }
        return (sum / Float(samples.count)).squareRoot()
    }

    /// `input` with `skipping` samples after the first `fade` left out, the join cross-faded; the
    /// first `outputCount` samples of the result.
    static func joined(_ input: [Float], skipping: Int, outputCount: Int, fade: Int) -> [Float] {
        var output = [Float](repeating: 0, count: outputCount)
        for i in 0..<outputCount {
            if i < fade {
                let w = Float(i + 1) / Float(fade + 1)
                output[i] = input[i] * (1 - w) + input[i + skipping] * w
            } else {
                output[i] = input[i + skipping]
            }
        }
        return output
    }

    /// The period in `periods` at which `samples` best repeats, with its normalised correlation.
    /// Forwards: `samples[from...]` against `samples[from + period...]`. Backwards: the period
    /// ending at `against` against the one before it (`lookback`), or the `period` samples from
    /// `from` against the `period` samples before `against`.
    static func bestPeriod(_ samples: [Float], from: Int, against: Int, periods: ClosedRange<Int>,
                           backwards: Bool = false, lookback: Bool = false) -> (Int, Float)? {
        var best: (Int, Float)?
        let length = min(periods.lowerBound * 2, 240)
        for period in periods {
            let a: Int, b: Int
            if !backwards {
                a = from; b = from + period
            } else if lookback {
                a = against - period; b = against - 2 * period
            } else {
                a = from; b = against - period
            }
            guard a >= 0, b >= 0, a + length <= samples.count, b + length <= samples.count else { continue }
            var ab: Float = 0, aa: Float = 0, bb: Float = 0
            for i in 0..<length {
                let x = samples[a + i], y = samples[b + i]
                ab += x * y; aa += x * x; bb += y * y
            }
            guard aa > 0, bb > 0 else { continue }
            let similarity = ab / (aa * bb).squareRoot()
            if best == nil || similarity > best!.1 { best = (period, similarity) }
        }
        return best
    }
}
