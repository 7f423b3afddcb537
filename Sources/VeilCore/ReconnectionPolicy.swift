// When to reconnect: pure state machines that the call layer drives with events and local times
// and that answer with what to do next. They never read a clock, sleep or touch a socket.
// All times are microseconds on one monotonic local clock chosen by the caller
// (e.g. `g_get_monotonic_time()`); timers are the caller's.

/// Reconnection to the room server after the connection drops: exponential backoff with full
/// jitter, reset once a connection has been stable for a while, optionally giving up.
///
/// The k-th retry since the last stable connection (k = 0, 1, …) waits a uniformly random time in
/// `minimumDelayMicros…min(maximumDelayMicros, initialDelayMicros × 2^k)` ("full jitter": clients
/// that lost the same server spread out instead of returning in waves). A connection that lasts
/// `stableAfterMicros` resets k to 0; one that drops sooner keeps growing the backoff, so a server
/// that accepts and then drops clients is not hammered. The random numbers come from a generator
/// seeded at creation, so a seed reproduces a run.
///
/// Drive it like this:
/// 1. `start(at:)` → `.startAttempt(timeoutAt:)`: connect now, arm a timer for the timeout.
/// 2. Report the outcome: `connected(at:)`, `attemptFailed(at:)`; later `connectionLost(at:)`.
/// 3. `.connect(at:)`: arm a timer; when it fires call `timerFired(at:)`, which answers
///    `.startAttempt` when it is time (or `.connect(at:)` again if the timer fired early).
/// 4. A timer at an attempt's timeout → `timerFired(at:)` → `.abandonAttempt(retryAt:)` (cancel the
///    attempt, arm the retry timer) or `.giveUp`.
/// Events that do not apply in the current state are ignored (`.none`), so stray or repeated
/// callbacks are harmless.
public struct ReconnectionPolicy: Sendable {
    /// Tuning of a `ReconnectionPolicy`.
    public struct Configuration: Equatable, Sendable {
        /// The ceiling of the first retry's delay; each further retry doubles it.
        public var initialDelayMicros: UInt64
        /// The largest ceiling.
        public var maximumDelayMicros: UInt64
        /// The smallest delay; 0 is pure full jitter.
        public var minimumDelayMicros: UInt64
        /// A connection that lasts this long resets the backoff.
        public var stableAfterMicros: UInt64
        /// An attempt with no outcome after this long is abandoned and counts as failed.
        public var attemptTimeoutMicros: UInt64
        /// Retries allowed since the last stable connection before giving up; nil: never give up.
        public var maximumAttempts: Int?

        /// Defaults: ceilings 250 ms, 500 ms, 1 s … 8 s, no floor, stable after 10 s, attempts time
        /// out after 10 s, never give up.
        public init(initialDelayMicros: UInt64 = 250_000, maximumDelayMicros: UInt64 = 8_000_000,
                    minimumDelayMicros: UInt64 = 0, stableAfterMicros: UInt64 = 10_000_000,
                    attemptTimeoutMicros: UInt64 = 10_000_000, maximumAttempts: Int? = nil) {
            self.initialDelayMicros = initialDelayMicros
            self.maximumDelayMicros = maximumDelayMicros
            self.minimumDelayMicros = minimumDelayMicros
            self.stableAfterMicros = stableAfterMicros
            self.attemptTimeoutMicros = attemptTimeoutMicros
            self.maximumAttempts = maximumAttempts
        }
    }

    /// Where the connection stands.
    public enum State: Equatable, Sendable {
        /// Not started.
        case idle
        /// An attempt is under way; it is abandoned at `deadline`.
        case connecting(deadline: UInt64)
        /// Connected since the given time.
        case connected(since: UInt64)
        /// Waiting to retry at the given time.
        case waiting(until: UInt64)
        /// `maximumAttempts` retries failed; nothing more happens until `retryNow(at:)`.
        case gaveUp
    }

    /// What the caller should do after an event.
    public enum Action: Equatable, Sendable {
        /// Nothing.
        case none
        /// Retry at the given time: arm a timer and call `timerFired(at:)` when it fires.
        case connect(at: UInt64)
        /// Connect now; report `connected(at:)` or `attemptFailed(at:)`, and call `timerFired(at:)`
        /// at `timeoutAt` if neither has happened by then.
        case startAttempt(timeoutAt: UInt64)
        /// The attempt under way timed out: cancel it (do not report its outcome) and retry at
        /// `retryAt` (arm a timer, then `timerFired(at:)`).
        case abandonAttempt(retryAt: UInt64)
        /// Stop retrying (cancel any attempt under way) and report the connection as failed.
        case giveUp
    }

    /// The configuration in use, repaired: the initial delay at least 1 µs, the maximum not below the
    /// initial, the minimum not above the maximum, `maximumAttempts` not negative.
    public let configuration: Configuration
    /// Where the connection stands.
    public private(set) var state: State = .idle
    /// Retries scheduled since the last stable connection (the exponent of the next ceiling).
    public private(set) var retries = 0
    private var random: SplitMix64

    /// A policy in state `idle`. `seed` fixes the jitter's random sequence (tests pass one; the
    /// default draws it from the system generator).
    public init(configuration: Configuration = Configuration(), seed: UInt64 = UInt64.random(in: .min ... .max)) {
        var c = configuration
        c.initialDelayMicros = max(1, c.initialDelayMicros)
        c.maximumDelayMicros = max(c.maximumDelayMicros, c.initialDelayMicros)
        c.minimumDelayMicros = min(c.minimumDelayMicros, c.maximumDelayMicros)
        c.maximumAttempts = c.maximumAttempts.map { max(0, $0) }
        self.configuration = c
        random = SplitMix64(seed: seed)
    }

    /// The ceiling of the delay before retry number `retry` (0-based): `initialDelay × 2^retry`,
    /// at most `maximumDelay`, at least `minimumDelay`.
    public func delayCeilingMicros(forRetry retry: Int) -> UInt64 {
        let c = configuration
        let doubled = retry >= 63 ? nil : c.initialDelayMicros.multipliedReportingOverflow(by: 1 << UInt64(max(0, retry)))
        let ceiling = doubled.flatMap { $0.overflow ? nil : $0.partialValue } ?? c.maximumDelayMicros
        return max(min(ceiling, c.maximumDelayMicros), c.minimumDelayMicros)
    }

    // MARK: Events

    /// Begin: connect for the first time. From `idle` (or `gaveUp`, like `retryNow(at:)`).
    public mutating func start(at now: UInt64) -> Action {
        switch state {
        case .idle: return beginAttempt(at: now)
        case .gaveUp: return retryNow(at: now)
        case .connecting, .connected, .waiting: return .none
        }
    }

    /// The connection is up (and, for the server, the room rejoined).
    public mutating func connected(at now: UInt64) -> Action {
        if case .connected = state { return .none }
        state = .connected(since: now)
        return .none
    }

    /// An established connection dropped. While connecting, the same as `attemptFailed(at:)`.
    public mutating func connectionLost(at now: UInt64) -> Action {
        switch state {
        case .connected(let since):
            if now >= since, now - since >= configuration.stableAfterMicros { retries = 0 }
            return scheduleRetry(at: now, abandoning: false)
        case .connecting:
            return scheduleRetry(at: now, abandoning: false)
        case .idle, .waiting, .gaveUp:
            return .none
        }
    }

    /// The attempt under way failed. Also accepted while waiting once the retry time has come, for
    /// a caller that started the attempt without calling `timerFired(at:)`.
    public mutating func attemptFailed(at now: UInt64) -> Action {
        switch state {
        case .connecting:
            return scheduleRetry(at: now, abandoning: false)
        case .waiting(let until) where now >= until:
            return scheduleRetry(at: now, abandoning: false)
        case .idle, .connected, .waiting, .gaveUp:
            return .none
        }
    }

    /// A timer armed for `.connect(at:)` or `.startAttempt(timeoutAt:)` fired.
    public mutating func timerFired(at now: UInt64) -> Action {
        switch state {
        case .waiting(let until):
            return now >= until ? beginAttempt(at: now) : .connect(at: until)
        case .connecting(let deadline):
            return now >= deadline ? scheduleRetry(at: now, abandoning: true) : .none
        case .idle, .connected, .gaveUp:
            return .none
        }
    }

    /// Connect now instead of waiting (the user asked, or the network came back). From `gaveUp` the
    /// backoff starts over.
    public mutating func retryNow(at now: UInt64) -> Action {
        switch state {
        case .waiting, .idle:
            return beginAttempt(at: now)
        case .gaveUp:
            retries = 0
            return beginAttempt(at: now)
        case .connecting, .connected:
            return .none
        }
    }

    // MARK: Transitions

    private mutating func beginAttempt(at now: UInt64) -> Action {
        let deadline = now.addingSaturating(configuration.attemptTimeoutMicros)
        state = .connecting(deadline: deadline)
        return .startAttempt(timeoutAt: deadline)
    }

    private mutating func scheduleRetry(at now: UInt64, abandoning: Bool) -> Action {
        if let limit = configuration.maximumAttempts, retries >= limit {
            state = .gaveUp
            return .giveUp
        }
        let ceiling = delayCeilingMicros(forRetry: retries)
        let floor = min(configuration.minimumDelayMicros, ceiling)
        let delay = UInt64.random(in: floor ... ceiling, using: &random)
        retries += 1
        let when = now.addingSaturating(delay)
        state = .waiting(until: when)
        return abandoning ? .abandonAttempt(retryAt: when) : .connect(at: when)
    }
}

/// Recovery of one failed peer connection: first an ICE restart, then a full renegotiation (a new
/// peer connection), then report it failed — each step with a timeout.
///
/// Events come from the peer connection's state (`connected`, `disconnected`, `failed`) and from
/// the caller's timers; actions say which step to take. A `disconnected` state is given
/// `disconnectedGraceMicros` to recover on its own (ICE often does) before recovery starts; a
/// `failed` state starts it at once. A failure or timeout during a step moves to the next step;
/// `connected` at any point ends recovery. In a mesh, only one side of a pair should act on
/// `.restartICE` / `.renegotiate` (the side that makes offers, e.g. the one whose participant id
/// sorts first), or both should use perfect negotiation, so that two offers do not cross.
public struct PeerRecoveryPolicy: Sendable {
    /// Tuning of a `PeerRecoveryPolicy`.
    public struct Configuration: Equatable, Sendable {
        /// How long a `disconnected` peer connection may recover by itself.
        public var disconnectedGraceMicros: UInt64
        /// How long one ICE restart may take.
        public var iceRestartTimeoutMicros: UInt64
        /// How long one renegotiation may take.
        public var renegotiationTimeoutMicros: UInt64
        /// ICE restarts to try before renegotiating (0 skips them).
        public var iceRestartAttempts: Int
        /// Renegotiations to try before reporting failure (0 skips them).
        public var renegotiationAttempts: Int

        /// Defaults: 2 s grace, one ICE restart with 5 s, one renegotiation with 10 s.
        public init(disconnectedGraceMicros: UInt64 = 2_000_000, iceRestartTimeoutMicros: UInt64 = 5_000_000,
                    renegotiationTimeoutMicros: UInt64 = 10_000_000, iceRestartAttempts: Int = 1,
                    renegotiationAttempts: Int = 1) {
            self.disconnectedGraceMicros = disconnectedGraceMicros
            self.iceRestartTimeoutMicros = iceRestartTimeoutMicros
            self.renegotiationTimeoutMicros = renegotiationTimeoutMicros
            self.iceRestartAttempts = iceRestartAttempts
            self.renegotiationAttempts = renegotiationAttempts
        }
    }

    /// Where recovery stands.
    public enum State: Equatable, Sendable {
        /// Connected (or never failed).
        case healthy
        /// Disconnected; recovery starts at `deadline` unless it reconnects first.
        case disconnected(deadline: UInt64)
        /// ICE restart number `attempt` (1-based) under way, given up at `deadline`.
        case restartingICE(attempt: Int, deadline: UInt64)
        /// Renegotiation number `attempt` (1-based) under way, given up at `deadline`.
        case renegotiating(attempt: Int, deadline: UInt64)
        /// Every step failed.
        case failed
    }

    /// What the caller should do after an event.
    public enum Action: Equatable, Sendable {
        /// Nothing.
        case none
        /// Arm a timer for the given time and call `timerFired(at:)` then.
        case wake(at: UInt64)
        /// Restart ICE (a new offer with ICE restart); call `timerFired(at:)` at `timeoutAt`.
        case restartICE(timeoutAt: UInt64)
        /// Tear the peer connection down and negotiate a new one; call `timerFired(at:)` at `timeoutAt`.
        case renegotiate(timeoutAt: UInt64)
        /// Recovery failed: report the peer connection as failed.
        case reportFailed
        /// The connection is back after having been reported in trouble.
        case reportRecovered
    }

    /// The configuration in use (attempt counts not negative).
    public let configuration: Configuration
    /// Where recovery stands.
    public private(set) var state: State = .healthy

    /// A policy in state `healthy`.
    public init(configuration: Configuration = Configuration()) {
        var c = configuration
        c.iceRestartAttempts = max(0, c.iceRestartAttempts)
        c.renegotiationAttempts = max(0, c.renegotiationAttempts)
        self.configuration = c
    }

    /// The peer connection reached `connected`.
    public mutating func connected(at now: UInt64) -> Action {
        if state == .healthy { return .none }
        state = .healthy
        return .reportRecovered
    }

    /// The peer connection reached `disconnected`: wait `disconnectedGraceMicros` for it to recover.
    /// Ignored while a recovery step is under way.
    public mutating func disconnected(at now: UInt64) -> Action {
        guard state == .healthy else { return .none }
        let deadline = now.addingSaturating(configuration.disconnectedGraceMicros)
        state = .disconnected(deadline: deadline)
        return .wake(at: deadline)
    }

    /// The peer connection reached `failed` (or the current step failed): take the next step.
    public mutating func failed(at now: UInt64) -> Action {
        state == .failed ? .none : escalate(at: now)
    }

    /// A timer armed by an action fired: take the next step if the current one has run out of time.
    public mutating func timerFired(at now: UInt64) -> Action {
        switch state {
        case .disconnected(let deadline), .restartingICE(_, let deadline), .renegotiating(_, let deadline):
            return now >= deadline ? escalate(at: now) : .none
        case .healthy, .failed:
            return .none
        }
    }

    /// Back to `healthy` without an action, e.g. when the peer connection was replaced because the
    /// signaling connection was re-established.
    public mutating func reset() { state = .healthy }

    private mutating func escalate(at now: UInt64) -> Action {
        let c = configuration
        var nextICE = 1, nextRenegotiation = 1
        switch state {
        case .healthy, .disconnected: break
        case .restartingICE(let attempt, _): nextICE = attempt + 1
        case .renegotiating(let attempt, _): nextICE = c.iceRestartAttempts + 1; nextRenegotiation = attempt + 1
        case .failed: return .none
        }
        if nextICE <= c.iceRestartAttempts {
            let deadline = now.addingSaturating(c.iceRestartTimeoutMicros)
            state = .restartingICE(attempt: nextICE, deadline: deadline)
            return .restartICE(timeoutAt: deadline)
        }
        if nextRenegotiation <= c.renegotiationAttempts {
            let deadline = now.addingSaturating(c.renegotiationTimeoutMicros)
            state = .renegotiating(attempt: nextRenegotiation, deadline: deadline)
            return .renegotiate(timeoutAt: deadline)
        }
        state = .failed
        return .reportFailed
    }
}

// MARK: - Helpers

private extension UInt64 {
    func addingSaturating(_ other: UInt64) -> UInt64 {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? .max : sum
    }
}
