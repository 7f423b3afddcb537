import Foundation

extension ChromiumAnchor {
    /// One event the page (bench/anchor/call.html) reported on its console.
    enum PageEvent: Equatable, Sendable {
        /// The audio context runs and the worklet is loaded.
        case ready(sampleRate: Double, userAgent: String)
        /// A connection state of side `a` or `b` changed.
        case connection(side: String, state: String)
        /// Burst `burst` (of pitch `hertz`) starts at `seconds` on the audio clock, which is
        /// `wallMillis` on the wall clock; the page's main thread heard of it at `receivedMillis`.
        case emitted(burst: Int, seconds: Double, hertz: Double, wallMillis: Double, receivedMillis: Double)
        /// Side B's audio rose above the threshold after silence at `seconds` (audio clock), with
        /// the pitch its zero crossings gave.
        case heard(seconds: Double, hertz: Double, peak: Double, wallMillis: Double)
        /// Side B's inbound-rtp audio statistics.
        case stats(ReceiverStats)
        /// Something in the page failed.
        case failed(String)

        /// What precedes each event's JSON on the console.
        static let marker = "VEIL-ANCHOR "

        /// The event in one line of chromium's stderr, or nil if it holds none. With
        /// `--enable-logging=stderr` a console message reads
        /// `[pid:tid:time:INFO:CONSOLE:49] "VEIL-ANCHOR {…}", source: file:///…/call.html (49)`,
        /// the message printed as it is (quotes inside the JSON are not escaped).
        init?(logLine: String) {
            guard let start = logLine.range(of: Self.marker) else { return nil }
            var json = logLine[start.upperBound...]
            if let end = json.range(of: "\", source: ", options: .backwards) { json = json[..<end.lowerBound] }
            guard let line = try? JSONDecoder().decode(Line.self, from: Data(json.utf8)) else { return nil }
            switch line.type {
            case "ready":
                self = .ready(sampleRate: line.sampleRate ?? 0, userAgent: line.userAgent ?? "")
            case "state":
                self = .connection(side: line.side ?? "?", state: line.state ?? "?")
            case "emitted":
                guard let burst = line.burst, let seconds = line.seconds, let wall = line.wallMillis else { return nil }
                self = .emitted(burst: burst, seconds: seconds, hertz: line.hertz ?? 0, wallMillis: wall,
                                receivedMillis: line.receivedMillis ?? wall)
            case "heard":
                guard let seconds = line.seconds, let wall = line.wallMillis else { return nil }
                self = .heard(seconds: seconds, hertz: line.hertz ?? 0, peak: line.peak ?? 0, wallMillis: wall)
            case "stats":
                guard let stats = try? JSONDecoder().decode(ReceiverStats.self, from: Data(json.utf8)) else { return nil }
                self = .stats(stats)
            case "error":
                self = .failed(line.message ?? "unknown error")
            default:
                return nil
            }
        }

        /// Every field any event has.
        private struct Line: Decodable {
            var type: String
            var sampleRate: Double?, userAgent: String?
            var side: String?, state: String?
            var burst: Int?, seconds: Double?, hertz: Double?, peak: Double?, wallMillis: Double?, receivedMillis: Double?
            var message: String?
        }
    }

    /// Side B's inbound-rtp audio statistics at one moment (cumulative counters, as getStats gives them).
    struct ReceiverStats: Decodable, Equatable, Sendable {
        var wallMillis: Double
        /// Seconds, summed over the samples emitted.
        var jitterBufferDelay: Double, jitterBufferTargetDelay: Double
        var jitterBufferEmittedCount: Double
        var concealedSamples: Double, totalSamplesReceived: Double
        /// Runs of concealed audio (absent from pages that do not report it).
        var concealmentEvents: Double?
        var packetsLost: Double, packetsReceived: Double, packetsDiscarded: Double
        /// The selected candidate pair's remote end ("host:port").
        var remote: String?
    }

    /// The run as the harness sees it, from the page's events and the wall clock: when to switch
    /// the relay to the next condition, which bursts and statistics belong to which condition, and
    /// which heard onset is which burst. Pure: the driver feeds it events and times.
    ///
    /// **Attributing bursts to conditions.** The page is told nothing: it emits a burst every
    /// `periodMillis` on its audio clock and reports each with its wall-clock time. The harness
    /// switches the relay in the middle of the silence between two bursts (half a period after one
    /// burst's start), so every datagram of a burst crosses the relay under one condition, even if
    /// the burst's wall time is off by tens of milliseconds (the audio output's latency, a busy
    /// main thread). A burst belongs to the condition in force at its emission; its onset may be
    /// heard after the next switch. A condition ends at the first gap after its duration, so it
    /// holds whole bursts.
    ///
    /// **Matching onsets to bursts.** The page cycles the bursts through four pitches; an onset is
    /// matched to the oldest unheard burst of its pitch emitted less than `hearingWindowMillis`
    /// (four periods) before it. A burst heard late is thus never taken for the next one, and a
    /// burst never heard stays unmatched and counts as lost.
    struct Timeline {
        /// A switch of the relay: when it happened, and its counters then.
        struct Boundary: Equatable {
            var wallMillis: Double
            var forwardedAToB: Int, forwardedBToA: Int, dropped: Int
        }

        /// A burst the page emitted, and when its onset was heard (audio-clock seconds).
        struct Burst: Equatable {
            var burst: Int
            var seconds: Double, hertz: Double, wallMillis: Double, receivedMillis: Double
            var heardSeconds: Double?
        }

        let schedule: [LatencyCondition]
        let periodMillis: Double
        /// How long after its emission an onset may still be a burst's: the pitch cycle's length.
        let hearingWindowMillis: Double
        /// Where side B should be sending: the relay's socket facing it ("host:port").
        let relayFacingB: String

        private(set) var sampleRate = 0.0
        private(set) var browser = ""
        /// Connection states by side.
        private(set) var states: [String: String] = [:]
        private(set) var bursts: [Burst] = []
        /// Onsets matched to no burst: their wall times.
        private(set) var unmatchedOnsets: [Double] = []
        private(set) var stats: [ReceiverStats] = []
        /// When each condition began (`boundaries[k]` for `schedule[k]`).
        private(set) var boundaries: [Boundary] = []
        /// When the last condition ended.
        private(set) var ended: Boundary?
        /// The next switch: to which condition (nil: the end of the schedule) and when.
        private(set) var pendingSwitch: (condition: Int?, wallMillis: Double)?

        init(schedule: [LatencyCondition], periodMillis: Double, relayFacingB: String) {
            self.schedule = schedule
            self.periodMillis = periodMillis
            self.hearingWindowMillis = 4 * periodMillis
            self.relayFacingB = relayFacingB
        }

        /// Whether audio has gone all the way round: a burst was heard (the schedule starts then).
        var isFlowing: Bool { bursts.contains { $0.heardSeconds != nil } }

        /// Takes in one page event.
        mutating func handle(_ event: PageEvent) {
            switch event {
            case .ready(let rate, let userAgent):
                sampleRate = rate
                browser = Self.browserName(userAgent)
            case .connection(let side, let state):
                states[side] = state
            case .emitted(let burst, let seconds, let hertz, let wall, let received):
                bursts.append(Burst(burst: burst, seconds: seconds, hertz: hertz, wallMillis: wall, receivedMillis: received))
                planSwitch(afterBurstAt: wall)
            case .heard(let seconds, let hertz, _, let wall):
                // The burst's pitch, half the spacing of the page's pitches (400 Hz) either way.
                let index = bursts.firstIndex {
                    $0.heardSeconds == nil && $0.seconds < seconds && (seconds - $0.seconds) * 1000 < hearingWindowMillis
                        && abs($0.hertz - hertz) < 200
                }
                if let index { bursts[index].heardSeconds = seconds } else { unmatchedOnsets.append(wall) }
            case .stats(let snapshot):
                stats.append(snapshot)
            case .failed:
                break
            }
        }

        /// After a burst at `wall`: starts the schedule half a period later once audio flows, or
        /// ends the current condition half a period later if the next burst would fall past its end.
        private mutating func planSwitch(afterBurstAt wall: Double) {
            guard pendingSwitch == nil, ended == nil, isFlowing else { return }
            let midGap = wall + periodMillis / 2
            guard let current = boundaries.last else {
                pendingSwitch = (0, midGap)
                return
            }
            let index = boundaries.count - 1
            guard wall + periodMillis > current.wallMillis + schedule[index].seconds * 1000 else { return }
            pendingSwitch = (index + 1 < schedule.count ? index + 1 : nil, midGap)
        }

        /// Records that the pending switch happened at `wall`, with the relay's counters then.
        mutating func switched(atWallMillis wall: Double, forwardedAToB: Int, forwardedBToA: Int, dropped: Int) {
            guard let pending = pendingSwitch else { return }
            let boundary = Boundary(wallMillis: wall, forwardedAToB: forwardedAToB, forwardedBToA: forwardedBToA, dropped: dropped)
            if pending.condition == nil { ended = boundary } else { boundaries.append(boundary) }
            pendingSwitch = nil
        }

        /// When the driver must look again without a new event: the pending switch, or the end of
        /// the wait for the last bursts' onsets.
        var nextDeadlineMillis: Double? {
            if let pending = pendingSwitch { return pending.wallMillis }
            if let ended { return ended.wallMillis + hearingWindowMillis }
            return nil
        }

        /// Whether the run is over at `now`: the schedule has ended, and every burst of it was heard
        /// and a statistics snapshot from its last gap arrived, or the hearing window has passed.
        func isComplete(nowMillis now: Double) -> Bool {
            guard let ended else { return false }
            if now >= ended.wallMillis + hearingWindowMillis { return true }
            let allHeard = bursts.allSatisfy { $0.wallMillis >= ended.wallMillis || $0.heardSeconds != nil }
            let lastStats = stats.contains { $0.wallMillis <= ended.wallMillis && $0.wallMillis > ended.wallMillis - periodMillis }
            return allHeard && lastStats
        }

        /// The results of the conditions that ran (all of them once `isComplete`).
        func results() -> [ConditionResult] {
            boundaries.indices.compactMap { index in
                guard let end = index + 1 < boundaries.count ? boundaries[index + 1] : ended else { return nil }
                return result(schedule[index], from: boundaries[index], to: end)
            }
        }

        private func result(_ condition: LatencyCondition, from start: Boundary, to end: Boundary) -> ConditionResult {
            let inside = bursts.filter { $0.wallMillis >= start.wallMillis && $0.wallMillis < end.wallMillis }
            let heard = inside.compactMap { burst in burst.heardSeconds.map { ($0 - burst.seconds) * 1000 } }
            // The latest snapshot at or before each boundary.
            let before = { (wall: Double) in stats.last { $0.wallMillis <= wall } }
            let first = before(start.wallMillis), last = before(end.wallMillis)
            func delta(_ field: KeyPath<ReceiverStats, Double>) -> Double? {
                guard let first, let last else { return nil }
                return last[keyPath: field] - first[keyPath: field]
            }
            let emitted = delta(\.jitterBufferEmittedCount) ?? 0
            let samples = delta(\.totalSamplesReceived) ?? 0
            let during = stats.filter { $0.wallMillis > start.wallMillis && $0.wallMillis <= end.wallMillis }
            var clockRate: Double?
            if let a = inside.first, let b = inside.last, b.receivedMillis > a.receivedMillis {
                clockRate = (b.seconds - a.seconds) * 1000 / (b.receivedMillis - a.receivedMillis)
            }
            return ConditionResult(
                condition: condition,
                seconds: (end.wallMillis - start.wallMillis) / 1000,
                burstsSent: inside.count,
                burstsDetected: heard.count,
                mouthToEarMillis: heard,
                unmatchedOnsets: unmatchedOnsets.filter { $0 >= start.wallMillis && $0 < end.wallMillis }.count,
                netEqDelayMillis: emitted > 0 ? delta(\.jitterBufferDelay).map { $0 / emitted * 1000 } : nil,
                netEqTargetDelayMillis: emitted > 0 ? delta(\.jitterBufferTargetDelay).map { $0 / emitted * 1000 } : nil,
                concealedSecondsPerMinute: samples > 0 ? delta(\.concealedSamples).map { $0 / samples * 60 } : nil,
                concealmentEvents: first?.concealmentEvents.flatMap { a in last?.concealmentEvents.map { Int($0 - a) } },
                packetsReceived: Int(delta(\.packetsReceived) ?? 0),
                packetsLost: Int(delta(\.packetsLost) ?? 0),
                packetsDiscarded: Int(delta(\.packetsDiscarded) ?? 0),
                datagramsForwardedAToB: end.forwardedAToB - start.forwardedAToB,
                datagramsForwardedBToA: end.forwardedBToA - start.forwardedBToA,
                datagramsDropped: end.dropped - start.dropped,
                throughRelay: !during.isEmpty && during.allSatisfy { $0.remote == relayFacingB },
                audioClockRate: clockRate,
                browser: browser)
        }

        /// "HeadlessChrome/156.0.0.0" from a user agent; the whole string if it names no Chrome.
        static func browserName(_ userAgent: String) -> String {
            userAgent.split(separator: " ").first { $0.contains("Chrome/") }.map(String.init) ?? userAgent
        }
    }
}
