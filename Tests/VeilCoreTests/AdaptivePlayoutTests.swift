import XCTest
@testable import VeilCore

/// The adaptive playout on a simulated network: a voice-like signal cut into 20 ms chunks arrives
/// with the jitter a schedule gives, and blocks are taken every 10 ms as a sound card would.
final class AdaptivePlayoutTests: XCTestCase {
    /// A voiced, speech-like signal: harmonics of a gliding 110–190 Hz pitch, in syllables
    /// (150–300 ms on, 60–200 ms of near-silence between), at 48 kHz.
    static func voice(seconds: Double, seed: UInt64 = 1) -> [Float] {
        var random = SplitMix64(seed: seed)
        let count = Int(seconds * 48_000)
        var samples = [Float](repeating: 0, count: count)
        var phase = 0.0, index = 0
        while index < count {
            let on = 7_200 + Int(random.next() % 7_200), off = 2_880 + Int(random.next() % 6_720)
            let pitch = 110 + Double(random.next() % 80)
            for i in 0..<on where index + i < count {
                let envelope = sin(Double.pi * Double(i) / Double(on))
                phase += 2 * Double.pi * (pitch + 20 * Double(i) / Double(on)) / 48_000
                samples[index + i] = Float(envelope * (0.3 * sin(phase) + 0.15 * sin(2 * phase) + 0.08 * sin(3 * phase)))
            }
            index += on + off
        }
        return samples
    }

    struct Run {
        var blocks: [AdaptivePlayout.Block] = []
        var playoutTimes: [UInt64] = []
        var targets: [UInt64] = []
        var delays: [Int64] = []
        var playout: AdaptivePlayout
        var output: [Float] { blocks.flatMap(\.samples) }
    }

    /// Plays `signal` through a playout whose chunks arrive `jitter(k)` ms after their timeline time
    /// (in order: a chunk never overtakes the one before), or never when `lost(k)`. The output takes
    /// each block `leadMicros` before it is heard, and tells the playout so when `toldLead`.
    /// `frameArrival(k)`, when given, is when the avatar's frame captured at k/30 s arrives, in ms
    /// after the voice of that moment (nil: lost).
    static func run(_ signal: [Float], configuration: AdaptivePlayout.Configuration = .init(),
                    leadMicros: UInt64 = 0, toldLead: Bool = true,
                    frameArrival: ((Int) -> Double?)? = nil, chunk: Int = 960, firstBlockMicros: UInt64 = 5_000,
                    jitter: (Int) -> Double, lost: (Int) -> Bool = { _ in false }) -> Run {
        var run = Run(playout: AdaptivePlayout(configuration: configuration))
        if toldLead { run.playout.outputLeadMicros = leadMicros }
        let start: UInt64 = 10_000_000
        let chunkMicros = UInt64(chunk) * 1000 / 48
        var arrivals: [(time: UInt64, index: Int)] = []
        var previous: UInt64 = 0
        for k in 0..<signal.count / chunk where !lost(k) {
            let time = max(start + UInt64(k) * chunkMicros + UInt64(max(jitter(k), 0) * 1000), previous)
            previous = time
            arrivals.append((time, k))
        }
        var frames: [(time: UInt64, media: UInt64)] = []
        if let frameArrival {
            for k in 0..<signal.count * 30 / 48_000 {
                let media = start + UInt64(k) * 1_000_000 / 30
                if let after = frameArrival(k) { frames.append((UInt64(Int64(media) + Int64(after * 1000)), media)) }
            }
            frames.sort { $0.time < $1.time }
        }
        var next = 0, nextFrame = 0
        var playout = start + firstBlockMicros  // the sound card's first block
        let end = start + UInt64(signal.count / 48) * 1000
        while playout < end {
            while nextFrame < frames.count, frames[nextFrame].time <= playout - leadMicros {
                run.playout.syncedFrameArrived(mediaMicros: frames[nextFrame].media, arrivalMicros: frames[nextFrame].time)
                nextFrame += 1
            }
            while next < arrivals.count, arrivals[next].time <= playout - leadMicros {
                let k = arrivals[next].index
                // Media time on the local clock's scale: a packet without delay arrives at its media time.
                run.playout.packetArrived(mediaMicros: start + UInt64(k) * chunkMicros, arrivalMicros: arrivals[next].time)
                run.playout.insert(Array(signal[k * chunk..<(k + 1) * chunk]), mediaMicros: start + UInt64(k) * chunkMicros, arrivalMicros: arrivals[next].time)
                next += 1
            }
            let block = run.playout.nextBlock(playoutMicros: playout)
            run.blocks.append(block)
            run.playoutTimes.append(playout)
            run.targets.append(run.playout.statistics.targetDelayMicros)
            run.delays.append(block.timelineMicros.map { Int64(playout) - Int64($0) } ?? -1)
            playout += UInt64(block.samples.count) * 1_000_000 / 48_000
        }
        return run
    }

    static func median(_ values: [Int64]) -> Int64 {
        let sorted = values.sorted()
        return sorted.isEmpty ? 0 : sorted[sorted.count / 2]
    }

    /// Indexes of the blocks played at or after `seconds` into the run.
    static func blocks(after seconds: Double, in run: Run) -> Range<Int> {
        let first = Int(seconds * 100)
        return min(first, run.blocks.count)..<run.blocks.count
    }

    func testACleanPathPlaysEverySampleUnchangedAtASmallDelay() {
        let signal = Self.voice(seconds: 8)
        let run = Self.run(signal, jitter: { _ in 0.5 })
        let settled = Self.blocks(after: 3, in: run)
        let delays = settled.map { run.delays[$0] }.filter { $0 >= 0 }
        let delay = Self.median(delays)
        print("clean: target \(run.playout.statistics.targetDelayMicros) µs, delay p50 \(delay) µs, statistics \(run.playout.statistics)")
        // After the fastest packets: the 3 ms margin, raised to the 5 ms least (blocks are read on
        // the packets' grid, so none waits for a second packet).
        XCTAssertEqual(run.playout.statistics.targetDelayMicros, 5_000)
        XCTAssertLessThan(delay, 10_000, "the delay came down from its 80 ms start to the clean path's")
        XCTAssertEqual(run.playout.statistics.concealedSamples, 0)
        XCTAssertEqual(run.playout.statistics.lateChunks, 0)
        XCTAssertEqual(run.playout.statistics.concealmentEvents, 0)
        // Once settled, blocks play the received samples unchanged, from their own place.
        var unchanged = 0
        for index in settled where run.blocks[index].kind == .normal {
            guard let time = run.blocks[index].mediaMicros else { continue }
            let position = (Int(time - 10_000_000) * 48 + 999) / 1000
            if run.blocks[index].samples == Array(signal[position..<position + 480]) { unchanged += 1 }
        }
        XCTAssertGreaterThan(unchanged, settled.count * 9 / 10)
    }

    func testTheOutputsLeadIsAddedToTheTargetSoNothingIsTakenBeforeItCame() {
        // A sound server that takes each block 40 ms before it is heard.
        let signal = Self.voice(seconds: 8, seed: 5)
        let told = Self.run(signal, leadMicros: 40_000, jitter: { _ in 0.5 })
        let untold = Self.run(signal, leadMicros: 40_000, toldLead: false, jitter: { _ in 0.5 })
        let settled = Self.blocks(after: 3, in: told)
        let delay = Self.median(settled.map { told.delays[$0] }.filter { $0 >= 0 })
        let concealed = { (run: Run) in Double(run.playout.statistics.concealedSamples) / Double(run.playout.statistics.playedSamples) }
        print("lead 40 ms: told → target \(told.playout.statistics.targetDelayMicros) µs, delay p50 \(delay) µs, concealed \(concealed(told)); untold → concealed \(concealed(untold)), late \(untold.playout.statistics.lateChunks)")
        XCTAssertEqual(told.playout.statistics.targetDelayMicros, 45_000, accuracy: 1_000, "the clean path's 5 ms plus the lead")
        XCTAssertEqual(Double(delay), 45_000, accuracy: 5_000)
        XCTAssertEqual(told.playout.statistics.concealedSamples, 0)
        XCTAssertEqual(told.playout.statistics.lateChunks, 0)
        // Not told, the playout would aim at 13 ms and find each block missing when taken.
        XCTAssertGreaterThan(concealed(untold), 0.02)
    }

    func testTheVoiceWaitsForTheAvatarsFramesUpToACeiling() {
        let signal = Self.voice(seconds: 20, seed: 7)
        let settledTarget = { (run: Run) in Self.median(Self.blocks(after: 4, in: run).prefix(600).map { Int64(run.targets[$0]) }) }
        // Frames at 30/s that come 25 ms before their voice (which waits for its 20 ms packets):
        // the next frame after any moment is there 8 ms after it, and the voice's own 5 ms is enough.
        let prompt = Self.run(signal, frameArrival: { _ in -25 }, jitter: { _ in 0.5 })
        // One frame in five lost, the rest 10 ms after their voice: after each loss, every moment of
        // the gap is drawn towards the next frame, which comes 67 + 10 ms after the first of them.
        let lossy = Self.run(signal, frameArrival: { k in k % 5 == 2 ? nil : 10 }, jitter: { _ in 0.5 })
        // Frames 20 ms after their voice, none lost (tracking took its time): a moment just before
        // a frame is drawn from the one before, and the voice does not wait for it.
        let tracked = Self.run(signal, frameArrival: { _ in 20 }, jitter: { _ in 0.5 })
        // Frames 250 ms late: the voice waits 100 ms at most.
        let late = Self.run(signal, frameArrival: { _ in 250 }, jitter: { _ in 0.5 })
        // Frames 40 ms late that stop after 5 s (a camera turned off): the voice goes back to its own delay.
        let stopped = Self.run(signal, frameArrival: { k in k < 150 ? 40 : nil }, jitter: { _ in 0.5 })
        let stoppedEnd = Self.median(Self.blocks(after: 13, in: stopped).map { Int64(stopped.targets[$0]) })
        print("synced stream: prompt \(settledTarget(prompt)) µs, one in five lost \(settledTarget(lossy)) µs, 20 ms late \(settledTarget(tracked)) µs, 250 ms late \(settledTarget(late)) µs, stopped \(settledTarget(stopped)) → \(stoppedEnd) µs")
        XCTAssertEqual(Double(settledTarget(prompt)), 5_000, accuracy: 1_000)
        XCTAssertEqual(Double(settledTarget(lossy)), 76_700, accuracy: 2_000)
        XCTAssertEqual(Double(settledTarget(tracked)), 20_000, accuracy: 1_500)
        XCTAssertEqual(settledTarget(late), 100_000)
        XCTAssertEqual(Double(settledTarget(stopped)), 40_000, accuracy: 1_500)
        XCTAssertEqual(Double(stoppedEnd), 5_000, accuracy: 1_000)
        for run in [prompt, lossy, tracked, late, stopped] {
            XCTAssertEqual(run.playout.statistics.lateChunks, 0)
        }
    }

    func testTheDelayFollowsJitterUpAndComesBackDownWithinTenSeconds() {
        let signal = Self.voice(seconds: 30, seed: 3)
        var random = SplitMix64(seed: 11)
        // Clean for 8 s, then 0–60 ms of jitter for 10 s, then clean again.
        let run = Self.run(signal, jitter: { k in
            let seconds = Double(k) / 50
            let draw = Double(random.next() >> 11) / Double(1 << 53)
            return seconds >= 8 && seconds < 18 ? 60 * draw : 0.5
        })
        let jittery = Self.blocks(after: 11, in: run).prefix(700)  // 11–18 s
        let jitterDelay = Self.median(jittery.map { run.delays[$0] }.filter { $0 >= 0 })
        let after = Self.blocks(after: 28, in: run)  // 10 s after the jitter ended
        let afterDelay = Self.median(after.map { run.delays[$0] }.filter { $0 >= 0 })
        let statistics = run.playout.statistics
        let late = Double(statistics.lateChunks) / Double(statistics.chunks)
        print("jitter: delay p50 \(jitterDelay) µs under 0–60 ms jitter, \(afterDelay) µs 10 s after; late \(statistics.lateChunks)/\(statistics.chunks); \(statistics)")
        XCTAssertGreaterThan(jitterDelay, 50_000, "the delay rose above the jitter")
        XCTAssertLessThan(jitterDelay, 100_000, "the delay stayed near the jitter")
        XCTAssertLessThan(afterDelay, 25_000, "the delay came back down within 10 s")
        XCTAssertLessThanOrEqual(late, 0.01, "late chunks")
    }

    func testAPathThatGetsFasterIsNotMistakenForJitter() {
        // 150 ms of fixed delay, then none: the packets come sooner, which is no jitter at all.
        let signal = Self.voice(seconds: 12, seed: 13)
        let run = Self.run(signal, jitter: { k in k < 300 ? 150 : 0.5 })
        let late = Self.blocks(after: 9, in: run)  // 3 s after the change
        let target = Self.median(late.map { Int64(run.targets[$0]) })
        let delay = Self.median(late.map { run.delays[$0] }.filter { $0 >= 0 })
        print("faster path: target \(target) µs, delay \(delay) µs 3 s after the change")
        XCTAssertLessThan(target, 30_000, "the target came back to the clean path's")
        XCTAssertLessThan(delay, 30_000)
    }

    func testTheVoiceIsTimedByTheFastestPacketsNotByTheFirst() {
        // A path of 150–250 ms whose first packets came 400 ms late (queued behind a slow
        // handshake) and then in a burst: the voice plays a quantile of the jitter after the
        // fastest packets, as if the start had been clean.
        let signal = Self.voice(seconds: 10, seed: 17)
        var random = SplitMix64(seed: 23)
        let run = Self.run(signal, jitter: { k in
            let draw = Double(random.next() >> 11) / Double(1 << 53)
            return k < 10 ? 400 : 150 + 100 * draw
        })
        let settled = Self.blocks(after: 5, in: run)
        // From the sample's media time (sent, here) to the output: the path's delay plus the playout's.
        let sinceSent = Self.median(settled.compactMap { index in
            run.blocks[index].mediaMicros.map { Int64(run.playoutTimes[index]) - Int64($0) }
        })
        let target = run.playout.statistics.targetDelayMicros
        let anchor = run.playout.anchorMicros ?? 0
        print("late first packets: fastest packets \(anchor) µs after sending, target \(target) µs after them, voice \(sinceSent) µs after sending; \(run.playout.statistics)")
        XCTAssertEqual(Double(anchor), 150_000, accuracy: 5_000, "the timeline is the fastest packets'")
        XCTAssertEqual(Double(target), 113_000, accuracy: 10_000, "the jitter's 99th percentile, a block and the margin")
        XCTAssertLessThan(sinceSent, 290_000, "the voice plays soon after its slowest packets, not after the late first ones")
        // The first second plays at the initial 80 ms, below this path's 100 ms of jitter.
        XCTAssertLessThan(Double(run.playout.statistics.lateChunks) / Double(run.playout.statistics.chunks), 0.02)
    }

    func testStretchingKeepsTheWaveContinuous() {
        // Fixed 80 ms, then the playout is asked for 20 ms: it must remove 60 ms of speech by
        // periods, not by jumps; the largest step between samples stays that of the voice itself.
        let signal = Self.voice(seconds: 6, seed: 5)
        var step: Float = 0
        for i in 1..<signal.count { step = max(step, abs(signal[i] - signal[i - 1])) }
        for jitterMillis in [0.5, 30] {
            var random = SplitMix64(seed: 2)
            let run = Self.run(signal, jitter: { _ in jitterMillis * Double(random.next() >> 11) / Double(1 << 53) })
            let output = run.output
            var largest: Float = 0
            for i in 1..<output.count { largest = max(largest, abs(output[i] - output[i - 1])) }
            let statistics = run.playout.statistics
            print("jitter 0–\(jitterMillis) ms: largest step \(largest) (voice \(step)); accelerated \(statistics.acceleratedSamples), expanded \(statistics.expandedSamples), concealed \(statistics.concealedSamples)")
            XCTAssertGreaterThan(statistics.acceleratedSamples, 48 * 20, "the start's 80 ms came down by acceleration")
            XCTAssertLessThan(largest, step * 2.5, "a jump in the wave (a click) at jitter \(jitterMillis)")
        }
    }

    func testAMissingChunkIsConcealedAndCountedLateWhenItComes() {
        let signal = Self.voice(seconds: 12, seed: 7)
        // Chunk 150 (3 s in) is 80 ms late; chunk 200 never comes (the decoder would conceal it).
        let run = Self.run(signal, jitter: { $0 == 150 ? 80 : 0.5 }, lost: { $0 == 200 })
        let statistics = run.playout.statistics
        print("late chunk: \(statistics)")
        XCTAssertGreaterThan(statistics.concealedSamples, 0)
        XCTAssertGreaterThanOrEqual(statistics.lateChunks, 1)
        // The late chunk left one run of concealment (the lost one's gap was filled before its
        // time: the target still covered the late chunk, and this decoder made up nothing).
        XCTAssertEqual(statistics.concealmentEvents, 1)
        // Nothing was skipped: every sample after the gap still plays (the delay grew instead).
        let tail = Self.blocks(after: 10, in: run)  // once the window has forgotten the late chunk
        XCTAssertLessThan(Self.median(tail.map { run.delays[$0] }.filter { $0 >= 0 }), 30_000, "the delay came back down")
        // The concealment fades: no block is louder than the voice around it.
        let peak = signal.map(abs).max() ?? 1
        for block in run.blocks where block.kind == .concealed {
            XCTAssertLessThanOrEqual(block.samples.map(abs).max() ?? 0, peak * 1.01)
        }
    }

    func testBlocksReadOnThePacketsGridWaitForOnePacketWhereverTheOutputsClockStands() {
        // The output's clock against the packets' arrivals at ten phases, 0 to 9 ms: on the grid
        // the delay can only be the phase plus whole blocks, and the playout takes the least of
        // those that is not below the target.
        let signal = Self.voice(seconds: 6, seed: 29)
        var delays: [Int64] = []
        for offset in stride(from: UInt64(0), to: 10_000, by: 1_000) {
            let run = Self.run(signal, firstBlockMicros: offset, jitter: { _ in 0.5 })
            let settled = Self.blocks(after: 3, in: run)
            let delay = Self.median(settled.map { run.delays[$0] }.filter { $0 >= 0 })
            delays.append(delay)
            let statistics = run.playout.statistics
            XCTAssertEqual(statistics.concealedSamples, 0, "output clock at +\(offset) µs")
            XCTAssertEqual(statistics.lateChunks, 0, "output clock at +\(offset) µs")
            XCTAssertEqual(statistics.targetDelayMicros, 5_000)
            XCTAssertGreaterThanOrEqual(delay, 4_000, "at most 1 ms below the target, at +\(offset) µs")
            XCTAssertLessThan(delay, 15_000, "less than a block above the target, at +\(offset) µs")
            // Settled blocks start where a packet or its second half starts.
            let onGrid = settled.filter { index in
                guard run.blocks[index].kind == .normal, let media = run.blocks[index].mediaMicros else { return false }
                let phase = (media - 10_000_000) % 10_000
                return phase <= 21 || phase >= 10_000 - 21
            }
            XCTAssertGreaterThan(onGrid.count, settled.count * 9 / 10, "output clock at +\(offset) µs")
        }
        print("on the packets' grid: delay p50 by output clock phase 0–9 ms: \(delays.map { $0 / 100 }) × 0.1 ms")
        // Straddling blocks needed a block more: 13–18 ms whatever the phase.
        XCTAssertLessThan(Double(delays.reduce(0, +)) / Double(delays.count), 11_000)
    }

    func testShorterBlocksInSilenceMoveTheOutputsClockToTheTarget() {
        // The same ten phases, with an output that takes blocks of any length (`shortensBlocks`),
        // as the playout thread does: a near-silent block is shortened by what the delay is above
        // the target, and the delay is the target's whatever the phase.
        let signal = Self.voice(seconds: 6, seed: 29)
        var configuration = AdaptivePlayout.Configuration()
        configuration.shortensBlocks = true
        var delays: [Int64] = []
        for offset in stride(from: UInt64(0), to: 10_000, by: 1_000) {
            let run = Self.run(signal, configuration: configuration, firstBlockMicros: offset, jitter: { _ in 0.5 })
            let settled = Self.blocks(after: 3, in: run)
            let delay = Self.median(settled.map { run.delays[$0] }.filter { $0 >= 0 })
            delays.append(delay)
            XCTAssertEqual(run.playout.statistics.concealedSamples, 0, "output clock at +\(offset) µs")
            XCTAssertEqual(run.playout.statistics.lateChunks, 0, "output clock at +\(offset) µs")
            XCTAssertEqual(Double(delay), 5_000, accuracy: 1_000, "at the 5 ms target, at +\(offset) µs")
            // Every sample of speech is played: only near-silence is left out.
            XCTAssertEqual(run.playout.statistics.expandedSamples, 0, "output clock at +\(offset) µs")
        }
        print("shorter blocks in silence: delay p50 by output clock phase 0–9 ms: \(delays.map { $0 / 100 }) × 0.1 ms")
    }

    func testPacketsOffTheBlockGridKeepTheBlockInTheTarget() {
        // 7.5 ms packets: their boundaries fall on no 10 ms grid, so a block may need two packets.
        let signal = Self.voice(seconds: 6, seed: 31)
        let run = Self.run(signal, chunk: 360, jitter: { _ in 0.5 })
        let settled = Self.blocks(after: 3, in: run)
        let delay = Self.median(settled.map { run.delays[$0] }.filter { $0 >= 0 })
        print("7.5 ms packets: target \(run.playout.statistics.targetDelayMicros) µs, delay p50 \(delay) µs; \(run.playout.statistics)")
        XCTAssertEqual(run.playout.statistics.targetDelayMicros, 13_000, accuracy: 1_000, "the margin and a block")
        XCTAssertEqual(run.playout.statistics.concealedSamples, 0)
        XCTAssertEqual(run.playout.statistics.lateChunks, 0)
    }

    func testAStepInThePathsDelayIsOneConcealmentNotOnePerPacket() {
        // Clean for 5 s, then every packet 60 ms later: the first after the step comes after its
        // time, whatever the receiver does; the playout waits for it (one concealment), and the
        // target covers its delay at once, so that the playout does not hurry back down and meet
        // the next packet late too.
        let signal = Self.voice(seconds: 10, seed: 37)
        let run = Self.run(signal, jitter: { k in k < 250 ? 0.5 : 60.5 })
        let statistics = run.playout.statistics
        let settled = Self.blocks(after: 6, in: run)
        let delay = Self.median(settled.map { run.delays[$0] }.filter { $0 >= 0 })
        print("step of 60 ms: \(statistics.concealmentEvents) concealment events, \(statistics.lateChunks) late chunks, delay p50 \(delay) µs after it; \(statistics)")
        XCTAssertEqual(statistics.concealmentEvents, 1)
        XCTAssertLessThanOrEqual(statistics.lateChunks, 1)
        XCTAssertGreaterThan(delay, 60_000, "the delay rose with the path's")
        XCTAssertLessThan(delay, 80_000)
    }

    func testAFixedDelayIsKept() {
        var configuration = AdaptivePlayout.Configuration()
        configuration.fixedDelayMicros = 80_000
        let run = Self.run(Self.voice(seconds: 5), configuration: configuration, jitter: { _ in 0.5 })
        let delay = Self.median(Self.blocks(after: 2, in: run).map { run.delays[$0] }.filter { $0 >= 0 })
        print("fixed 80 ms: delay p50 \(delay) µs")
        XCTAssertEqual(Double(delay), 80_000, accuracy: 6_000)
        XCTAssertEqual(run.playout.statistics.concealedSamples, 0)
    }

    func testAStreamThatStopsRestartsAtItsTargetInsteadOfPlayingStaleAudio() {
        let signal = Self.voice(seconds: 6, seed: 9)
        // Nothing arrives between 2 and 4 s (a dead path): after a second of concealment the
        // playout waits, and the voice resumes at the target delay, not two seconds behind.
        let run = Self.run(signal, jitter: { _ in 0.5 }, lost: { k in k >= 100 && k < 200 })
        let resumed = Self.blocks(after: 4.5, in: run)
        let delay = Self.median(resumed.map { run.delays[$0] }.filter { $0 >= 0 })
        print("restart: delay p50 after the pause \(delay) µs; \(run.playout.statistics)")
        XCTAssertLessThan(delay, 100_000)
        // The concealment lasted at most about a second, then silence.
        XCTAssertLessThanOrEqual(run.playout.statistics.concealedSamples, 48_000 + 480)
        XCTAssertGreaterThan(run.playout.statistics.concealedSamples, 0)
    }

    /// A path with 0–40 ms of jitter (in order) that loses one packet in twenty for its first 12 s
    /// and none after, behind an upstream jitter buffer that holds the packets after a lost one
    /// until it declares the loss 90 ms after the lost packet's timeline time (its 2 ms wait
    /// included), then lets through audio made up for it and the packets it held (as GStreamer's
    /// RTP jitter buffer does).
    /// Returns the playout after 24 s, its targets 6–12 s and 20–24 s in, and the late chunks of
    /// the lossy part.
    /// 24 s of voice in 20 ms packets arriving 0 to `jitterMillis` after their timeline time, every
    /// 20th packet lost from `lossesFrom` s to 12 s; an RTP jitter buffer in front of the playout
    /// declares each loss `declaration` µs after the lost packet's timeline time (or when the next
    /// packet comes, if later) and releases the audio made up for it with the packets it held.
    /// The targets: median from 6 to 12 s (lossy), after 20 s (clean again), and before
    /// `lossesFrom` (from 3 s on); late chunks until 12.2 s.
    static func runBehindUpstreamLosses(reporting: Bool, declaration: UInt64 = 90_000, jitterMillis: Double = 40,
                                        lossesFrom: Double = 0)
        -> (playout: AdaptivePlayout, lossyTarget: Int64, cleanTarget: Int64, lossyLate: Int, targetBefore: Int64) {
        let signal = voice(seconds: 24, seed: 29)
        var random = SplitMix64(seed: 31)
        let start: UInt64 = 10_000_000, chunk = 960, wait: UInt64 = 2_000
        // (time the chunk reaches the playout, index, made up upstream); arrivals at the jitter buffer.
        var releases: [(time: UInt64, k: Int, madeUp: Bool)] = []
        var arrivals: [(time: UInt64, k: Int)] = []
        var previousArrival: UInt64 = 0, previousRelease: UInt64 = 0
        for k in 0..<signal.count / chunk {
            let media = start + UInt64(k) * 20_000
            let lost = k < 600 && k >= Int(lossesFrom * 50) && k % 20 == 7
            if lost {
                previousRelease = max(media + declaration, previousRelease)
                releases.append((previousRelease, k, true))
                continue
            }
            let draw = Double(random.next() >> 11) / Double(1 << 53)
            let arrival = max(media + UInt64(jitterMillis * 1000 * draw), previousArrival)
            previousArrival = arrival
            arrivals.append((arrival, k))
            previousRelease = max(arrival, previousRelease)
            releases.append((previousRelease, k, false))
        }
        var playout = AdaptivePlayout()
        var nextArrival = 0, nextRelease = 0
        var time = start + 5_000
        var lossyTargets: [Int64] = [], cleanTargets: [Int64] = [], targetsBefore: [Int64] = []
        var lateAt12 = 0
        while time < start + 24_000_000 {
            while nextArrival < arrivals.count, arrivals[nextArrival].time <= time {
                playout.packetArrived(mediaMicros: start + UInt64(arrivals[nextArrival].k) * 20_000, arrivalMicros: arrivals[nextArrival].time)
                nextArrival += 1
            }
            while nextRelease < releases.count, releases[nextRelease].time <= time {
                let (released, k, madeUp) = releases[nextRelease]
                let media = start + UInt64(k) * 20_000
                playout.insert(Array(signal[k * chunk..<(k + 1) * chunk]), mediaMicros: media, arrivalMicros: released, madeUpUpstream: madeUp)
                if madeUp, reporting { playout.upstreamConcealed(mediaMicros: media, durationMicros: 20_000, arrivalMicros: released, waitMicros: wait) }
                nextRelease += 1
            }
            _ = playout.nextBlock(playoutMicros: time)
            let seconds = Double(time - start) / 1_000_000
            if seconds >= 6, seconds < 12 { lossyTargets.append(Int64(playout.statistics.targetDelayMicros)) }
            if seconds >= 20 { cleanTargets.append(Int64(playout.statistics.targetDelayMicros)) }
            if seconds >= 3, seconds < lossesFrom { targetsBefore.append(Int64(playout.statistics.targetDelayMicros)) }
            if seconds < 12.2 { lateAt12 = playout.statistics.lateChunks }
            time += 10_000
        }
        return (playout, median(lossyTargets), median(cleanTargets), lateAt12, median(targetsBefore))
    }

    func testThePacketsGridIsLeftWhileThePathLosesPackets() {
        // A clean path (0–1 ms of jitter) that loses every 20th packet from 4 to 12 s; the jitter
        // buffer declares each loss when the next packet comes. Packets held behind a loss come in
        // a burst with the audio made up for it, so while the path loses packets the blocks wait for
        // a second packet again: the target keeps its block, and goes without it once the window
        // has forgotten the losses.
        let run = Self.runBehindUpstreamLosses(reporting: true, declaration: 20_000, jitterMillis: 1, lossesFrom: 4)
        let statistics = run.playout.statistics
        print("a clean path losing packets: target \(run.targetBefore) µs before, \(run.lossyTarget) µs while losing, \(run.cleanTarget) µs after; late \(run.lossyLate); \(statistics)")
        XCTAssertEqual(run.targetBefore, 5_000, "on the grid before the losses: the 5 ms least")
        // The declaration (0–1 ms after the next packet's timeline time), wait, decoding and a block.
        XCTAssertGreaterThanOrEqual(run.lossyTarget, 13_000, "a block and the margin while losing")
        XCTAssertLessThanOrEqual(run.lossyTarget, 20_000)
        XCTAssertEqual(run.cleanTarget, 5_000, "back on the grid once the losses are forgotten")
        // 20 losses from 4 to 12 s, 380 packets: none of those held behind a loss came late.
        XCTAssertLessThanOrEqual(run.lossyLate, 3)
    }

    func testLossesDeclaredLateUpstreamAreCoveredWhileThePathLosesPackets() {
        let unreported = Self.runBehindUpstreamLosses(reporting: false)
        let reported = Self.runBehindUpstreamLosses(reporting: true)
        let chunks = 570  // the lossy part's received packets
        print("late upstream declarations: unreported target \(unreported.lossyTarget) µs, late \(unreported.lossyLate)/\(chunks); reported target \(reported.lossyTarget) µs, late \(reported.lossyLate)/\(chunks), declaration \(reported.playout.upstreamDeclarationMicros.map(String.init) ?? "none") µs; after the losses end \(reported.cleanTarget) µs")
        // Without the reports the target covers only the jitter (40 ms + block + margin), and most
        // losses make the packets held behind them late: a held packet's delay is the declaration's,
        // which raises the target only as reported (else the jitter buffer's wait, derived from the
        // target, would grow with it).
        XCTAssertLessThan(unreported.lossyTarget, 60_000)
        XCTAssertGreaterThan(unreported.lossyLate, 15)
        // With them: the declaration (90 ms after the lost packet's timeline time: 68 ms after the
        // next one's, less the 2 ms wait), wait and decoding, a block (on the packets' grid too:
        // the arrivals spread by more than a block).
        XCTAssertEqual(Double(reported.lossyTarget), 68_000 + 7_000 + 10_000, accuracy: 3_000)
        XCTAssertLessThanOrEqual(reported.lossyLate, chunks / 100, "at most 1 % late")
        // Each of the 30 losses is one concealment event: the playout's own, when the audio made up
        // upstream came after its time and continued it, else the made-up audio's.
        let events = reported.playout.statistics.concealmentEvents
        XCTAssertGreaterThanOrEqual(events, 30)
        XCTAssertLessThanOrEqual(events, 30 + 3)
        // Losses over and forgotten (6 s window): the target is the jitter's again.
        XCTAssertNil(reported.playout.upstreamDeclarationMicros)
        XCTAssertLessThan(reported.cleanTarget, 60_000)
    }
}
