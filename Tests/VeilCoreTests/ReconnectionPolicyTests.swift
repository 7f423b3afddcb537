import XCTest
import VeilCore

/// The reconnection state machines driven by hand: events in, actions out, times made up.
final class ReconnectionPolicyTests: XCTestCase {
    private typealias Action = ReconnectionPolicy.Action

    /// The retry time of an action that schedules one.
    private func retryTime(_ action: Action, file: StaticString = #filePath, line: UInt = #line) -> UInt64? {
        switch action {
        case .connect(let at): return at
        case .abandonAttempt(let at): return at
        default:
            XCTFail("expected a retry, got \(action)", file: file, line: line)
            return nil
        }
    }

    /// Connects, loses the connection at once and fails every retry; returns each retry's delay.
    private func failingDelays(seed: UInt64, retries: Int, configuration: ReconnectionPolicy.Configuration = .init()) -> [UInt64] {
        var policy = ReconnectionPolicy(configuration: configuration, seed: seed)
        var now: UInt64 = 1_000_000
        _ = policy.start(at: now)
        _ = policy.connected(at: now)
        var action = policy.connectionLost(at: now)
        var delays: [UInt64] = []
        for _ in 0..<retries {
            guard let at = retryTime(action) else { break }
            delays.append(at - now)
            now = at
            XCTAssertEqual(policy.timerFired(at: now), .startAttempt(timeoutAt: now + configuration.attemptTimeoutMicros))
            now += 1_000
            action = policy.attemptFailed(at: now)
        }
        return delays
    }

    func testBackoffCeilingsDoubleFrom250MillisecondsTo8Seconds() {
        let policy = ReconnectionPolicy(seed: 1)
        XCTAssertEqual((0..<8).map { policy.delayCeilingMicros(forRetry: $0) },
                       [250_000, 500_000, 1_000_000, 2_000_000, 4_000_000, 8_000_000, 8_000_000, 8_000_000])
        XCTAssertEqual(policy.delayCeilingMicros(forRetry: 10_000), 8_000_000, "no overflow however long it fails")
    }

    func testEveryDelayLiesWithinItsCeilingAndTheJitterSpansIt() {
        let retries = 9
        var perRetry = [[UInt64]](repeating: [], count: retries)
        for seed in 0..<400 as Range<UInt64> {
            for (k, delay) in failingDelays(seed: seed, retries: retries).enumerated() { perRetry[k].append(delay) }
        }
        let policy = ReconnectionPolicy(seed: 0)
        for (k, delays) in perRetry.enumerated() {
            let ceiling = policy.delayCeilingMicros(forRetry: k)
            XCTAssertEqual(delays.count, 400)
            XCTAssertTrue(delays.allSatisfy { $0 <= ceiling }, "retry \(k) above \(ceiling)")
            // Full jitter: uniform over 0…ceiling, so the draws cover the range and average half of it.
            XCTAssertLessThan(Double(delays.min() ?? ceiling), 0.05 * Double(ceiling), "retry \(k)")
            XCTAssertGreaterThan(Double(delays.max() ?? 0), 0.95 * Double(ceiling), "retry \(k)")
            let mean = Double(delays.reduce(0, +)) / Double(delays.count)
            XCTAssertEqual(mean / Double(ceiling), 0.5, accuracy: 0.06, "retry \(k)")
        }
    }

    func testAFloorIsRespected() {
        let configuration = ReconnectionPolicy.Configuration(minimumDelayMicros: 100_000)
        for seed in 0..<50 as Range<UInt64> {
            let delays = failingDelays(seed: seed, retries: 6, configuration: configuration)
            XCTAssertTrue(delays.allSatisfy { $0 >= 100_000 }, "\(delays)")
        }
    }

    func testTheSameSeedGivesTheSameDelays() {
        XCTAssertEqual(failingDelays(seed: 42, retries: 10), failingDelays(seed: 42, retries: 10))
        XCTAssertNotEqual(failingDelays(seed: 42, retries: 10), failingDelays(seed: 43, retries: 10))
    }

    func testAFullCycle() {
        var policy = ReconnectionPolicy(seed: 5)
        XCTAssertEqual(policy.state, .idle)
        XCTAssertEqual(policy.start(at: 0), .startAttempt(timeoutAt: 10_000_000))
        XCTAssertEqual(policy.state, .connecting(deadline: 10_000_000))
        XCTAssertEqual(policy.connected(at: 300_000), .none)
        XCTAssertEqual(policy.state, .connected(since: 300_000))

        let lost = policy.connectionLost(at: 60_000_000)
        guard let retryAt = retryTime(lost) else { return }
        XCTAssertEqual(policy.state, .waiting(until: retryAt))
        XCTAssertLessThanOrEqual(retryAt - 60_000_000, 250_000)
        XCTAssertEqual(policy.timerFired(at: retryAt - 1), .connect(at: retryAt), "early timer: re-arm")
        XCTAssertEqual(policy.timerFired(at: retryAt), .startAttempt(timeoutAt: retryAt + 10_000_000))
        XCTAssertEqual(policy.attemptFailed(at: retryAt + 5_000).isRetry, true)
        XCTAssertEqual(policy.retries, 2)
        guard case .waiting(let second) = policy.state else { return XCTFail("\(policy.state)") }
        XCTAssertLessThanOrEqual(second - (retryAt + 5_000), 500_000)
        XCTAssertEqual(policy.timerFired(at: second), .startAttempt(timeoutAt: second + 10_000_000))
        XCTAssertEqual(policy.connected(at: second + 80_000), .none)
        XCTAssertEqual(policy.state, .connected(since: second + 80_000))
    }

    func testTheBackoffResetsOnlyAfterAStableConnection() {
        var policy = ReconnectionPolicy(configuration: .init(stableAfterMicros: 10_000_000), seed: 9)
        var now: UInt64 = 0
        _ = policy.start(at: now)
        // Five failures in a row: the next ceiling is 8 s.
        for _ in 0..<5 {
            let action = policy.attemptFailed(at: now)
            guard let at = retryTime(action) else { return }
            now = at
            _ = policy.timerFired(at: now)
        }
        XCTAssertEqual(policy.retries, 5)
        // Connected, but dropped after 9.9 s: not stable, the backoff keeps growing.
        _ = policy.connected(at: now)
        now += 9_900_000
        _ = policy.connectionLost(at: now)
        XCTAssertEqual(policy.retries, 6)
        guard case .waiting(let until) = policy.state else { return XCTFail() }
        now = until
        _ = policy.timerFired(at: now)
        // Connected for exactly 10 s: stable, the next retry is the first again.
        _ = policy.connected(at: now)
        now += 10_000_000
        let action = policy.connectionLost(at: now)
        XCTAssertEqual(policy.retries, 1)
        guard let at = retryTime(action) else { return }
        XCTAssertLessThanOrEqual(at - now, 250_000)
    }

    func testMaximumAttemptsGivesUpAndNeverGivesUpByDefault() {
        var limited = ReconnectionPolicy(configuration: .init(maximumAttempts: 3), seed: 2)
        var now: UInt64 = 0
        _ = limited.start(at: now)
        _ = limited.connected(at: now)
        var action = limited.connectionLost(at: 1_000)
        var attempts = 0
        while case .connect(let at) = action {
            now = at
            XCTAssertEqual(limited.timerFired(at: now), .startAttempt(timeoutAt: now + 10_000_000))
            attempts += 1
            action = limited.attemptFailed(at: now + 1)
        }
        XCTAssertEqual(action, .giveUp)
        XCTAssertEqual(attempts, 3)
        XCTAssertEqual(limited.state, .gaveUp)
        XCTAssertEqual(limited.timerFired(at: now + 100_000_000), .none)
        XCTAssertEqual(limited.attemptFailed(at: now + 100_000_000), .none)
        // The user asks again: a fresh start.
        XCTAssertEqual(limited.retryNow(at: 500_000_000), .startAttempt(timeoutAt: 510_000_000))
        XCTAssertEqual(limited.retries, 0)

        let unlimited = failingDelays(seed: 4, retries: 1_000)
        XCTAssertEqual(unlimited.count, 1_000)
        XCTAssertTrue(unlimited.allSatisfy { $0 <= 8_000_000 })
    }

    func testAnAttemptThatHangsIsAbandonedAtItsTimeout() {
        var policy = ReconnectionPolicy(configuration: .init(attemptTimeoutMicros: 3_000_000), seed: 6)
        XCTAssertEqual(policy.start(at: 0), .startAttempt(timeoutAt: 3_000_000))
        XCTAssertEqual(policy.timerFired(at: 2_999_999), .none)
        let action = policy.timerFired(at: 3_000_000)
        guard case .abandonAttempt(let retryAt) = action else { return XCTFail("\(action)") }
        XCTAssertLessThanOrEqual(retryAt - 3_000_000, 250_000)
        XCTAssertEqual(policy.state, .waiting(until: retryAt))

        var limited = ReconnectionPolicy(configuration: .init(attemptTimeoutMicros: 1_000, maximumAttempts: 0), seed: 6)
        _ = limited.start(at: 0)
        XCTAssertEqual(limited.timerFired(at: 1_000), .giveUp)
    }

    func testStrayEventsAreIgnored() {
        var policy = ReconnectionPolicy(seed: 8)
        XCTAssertEqual(policy.connectionLost(at: 5), .none, "not connected yet")
        XCTAssertEqual(policy.attemptFailed(at: 5), .none)
        XCTAssertEqual(policy.timerFired(at: 5), .none)
        XCTAssertEqual(policy.state, .idle)
        _ = policy.start(at: 10)
        XCTAssertEqual(policy.start(at: 11), .none, "already connecting")
        _ = policy.connected(at: 20)
        XCTAssertEqual(policy.connected(at: 21), .none)
        XCTAssertEqual(policy.state, .connected(since: 20), "a repeated connected keeps the first time")
        XCTAssertEqual(policy.attemptFailed(at: 30), .none, "no attempt under way")
        XCTAssertEqual(policy.timerFired(at: 30), .none)
        XCTAssertEqual(policy.retryNow(at: 30), .none)
        guard let at = retryTime(policy.connectionLost(at: 40)) else { return }
        XCTAssertEqual(policy.connectionLost(at: 41), .none, "lost twice")
        XCTAssertEqual(policy.attemptFailed(at: at - 1), .none, "no attempt before the retry time")
        // An attempt that succeeded although the caller never told us it started still counts.
        XCTAssertEqual(policy.connected(at: at + 5), .none)
        XCTAssertEqual(policy.state, .connected(since: at + 5))
    }

    func testConnectionLostWhileConnectingCountsAsAFailedAttempt() {
        var policy = ReconnectionPolicy(seed: 12)
        _ = policy.start(at: 0)
        XCTAssertTrue(policy.connectionLost(at: 100).isRetry)
        XCTAssertEqual(policy.retries, 1)
    }

    func testRetryNowSkipsTheWait() {
        var policy = ReconnectionPolicy(seed: 13)
        _ = policy.start(at: 0)
        _ = policy.attemptFailed(at: 10)
        XCTAssertEqual(policy.retryNow(at: 20), .startAttempt(timeoutAt: 10_000_020))
        XCTAssertEqual(policy.retries, 1, "the backoff is kept")
    }

    func testNonsenseConfigurationIsRepaired() {
        let c = ReconnectionPolicy(configuration: .init(initialDelayMicros: 0, maximumDelayMicros: 0, minimumDelayMicros: 50,
                                                        maximumAttempts: -4), seed: 0).configuration
        XCTAssertEqual(c.initialDelayMicros, 1)
        XCTAssertEqual(c.maximumDelayMicros, 1)
        XCTAssertEqual(c.minimumDelayMicros, 1)
        XCTAssertEqual(c.maximumAttempts, 0)
    }

    // MARK: Peer recovery

    func testAFailedPeerTriesICERestartThenRenegotiationThenFails() {
        var peer = PeerRecoveryPolicy()
        XCTAssertEqual(peer.state, .healthy)
        XCTAssertEqual(peer.failed(at: 1_000), .restartICE(timeoutAt: 5_001_000))
        XCTAssertEqual(peer.state, .restartingICE(attempt: 1, deadline: 5_001_000))
        XCTAssertEqual(peer.timerFired(at: 5_000_999), .none, "not yet")
        XCTAssertEqual(peer.timerFired(at: 5_001_000), .renegotiate(timeoutAt: 15_001_000))
        XCTAssertEqual(peer.state, .renegotiating(attempt: 1, deadline: 15_001_000))
        XCTAssertEqual(peer.disconnected(at: 6_000_000), .none, "ignored while recovering")
        XCTAssertEqual(peer.timerFired(at: 15_001_000), .reportFailed)
        XCTAssertEqual(peer.state, .failed)
        XCTAssertEqual(peer.failed(at: 16_000_000), .none)
        XCTAssertEqual(peer.timerFired(at: 99_000_000), .none)
        // The other side renegotiated and it works again.
        XCTAssertEqual(peer.connected(at: 20_000_000), .reportRecovered)
        XCTAssertEqual(peer.state, .healthy)
        XCTAssertEqual(peer.connected(at: 20_000_001), .none)
    }

    func testAFailureDuringAStepEscalatesAtOnce() {
        var peer = PeerRecoveryPolicy()
        _ = peer.failed(at: 0)
        XCTAssertEqual(peer.failed(at: 200_000), .renegotiate(timeoutAt: 10_200_000))
        XCTAssertEqual(peer.failed(at: 300_000), .reportFailed)
    }

    func testRecoveryDuringICERestartEndsIt() {
        var peer = PeerRecoveryPolicy()
        _ = peer.failed(at: 0)
        XCTAssertEqual(peer.connected(at: 1_500_000), .reportRecovered)
        XCTAssertEqual(peer.timerFired(at: 5_000_000), .none, "the old timeout is stale")
        XCTAssertEqual(peer.failed(at: 9_000_000), .restartICE(timeoutAt: 14_000_000), "a new failure starts over")
    }

    func testADisconnectionGetsAGracePeriod() {
        var peer = PeerRecoveryPolicy()
        XCTAssertEqual(peer.disconnected(at: 100), .wake(at: 2_000_100))
        XCTAssertEqual(peer.state, .disconnected(deadline: 2_000_100))
        XCTAssertEqual(peer.timerFired(at: 1_000_000), .none)
        XCTAssertEqual(peer.connected(at: 1_500_000), .reportRecovered, "came back on its own")
        XCTAssertEqual(peer.timerFired(at: 2_000_100), .none)

        XCTAssertEqual(peer.disconnected(at: 3_000_000), .wake(at: 5_000_000))
        XCTAssertEqual(peer.timerFired(at: 5_000_000), .restartICE(timeoutAt: 10_000_000))
        var early = PeerRecoveryPolicy()
        _ = early.disconnected(at: 0)
        XCTAssertEqual(early.failed(at: 10), .restartICE(timeoutAt: 5_000_010), "failed needs no grace")
    }

    func testAttemptCountsAreConfigurable() {
        var peer = PeerRecoveryPolicy(configuration: .init(iceRestartTimeoutMicros: 10, renegotiationTimeoutMicros: 20,
                                                           iceRestartAttempts: 2, renegotiationAttempts: 2))
        XCTAssertEqual(peer.failed(at: 0), .restartICE(timeoutAt: 10))
        XCTAssertEqual(peer.timerFired(at: 10), .restartICE(timeoutAt: 20))
        XCTAssertEqual(peer.state, .restartingICE(attempt: 2, deadline: 20))
        XCTAssertEqual(peer.timerFired(at: 20), .renegotiate(timeoutAt: 40))
        XCTAssertEqual(peer.timerFired(at: 40), .renegotiate(timeoutAt: 60))
        XCTAssertEqual(peer.timerFired(at: 60), .reportFailed)

        var renegotiateOnly = PeerRecoveryPolicy(configuration: .init(iceRestartAttempts: -1))
        XCTAssertEqual(renegotiateOnly.failed(at: 0), .renegotiate(timeoutAt: 10_000_000))
        var neither = PeerRecoveryPolicy(configuration: .init(iceRestartAttempts: 0, renegotiationAttempts: 0))
        XCTAssertEqual(neither.failed(at: 0), .reportFailed)
    }

    func testResetReturnsToHealthySilently() {
        var peer = PeerRecoveryPolicy()
        _ = peer.failed(at: 0)
        peer.reset()
        XCTAssertEqual(peer.state, .healthy)
        XCTAssertEqual(peer.timerFired(at: 99_000_000), .none)
    }
}

private extension ReconnectionPolicy.Action {
    var isRetry: Bool {
        switch self {
        case .connect, .abandonAttempt: return true
        default: return false
        }
    }
}
