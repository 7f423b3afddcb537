import Foundation
import XCTest
@testable import VeilBench

/// The Chromium anchor of the bench's latency section: libwebrtc's mouth-to-ear delay through
/// Veil's relay, in Debian's chromium; and the harness's timeline on made-up page events.
final class ChromiumAnchorTests: XCTestCase {
    /// A short schedule through one call: clean, then 80 ± 20 ms of one-way jitter. The bursts get
    /// across, the delay is plausible when clean and grows by at least the delay the relay adds,
    /// and the call really went through the relay.
    func testChromiumsMouthToEarDelayFollowsTheRelay() throws {
        let anchor = ChromiumAnchor()
        guard FileManager.default.isExecutableFile(atPath: anchor.chromium) else {
            throw XCTSkip("chromium is not installed (Debian package chromium; scripts/bootstrap installs it)")
        }
        guard UDPRelay.hostAddress() != nil else { throw XCTSkip("no IPv4 address besides loopback for the relay") }
        let schedule = [LatencyCondition(name: "clean", seconds: 6),
                        LatencyCondition(name: "80 ± 20 ms jitter", delayMillis: 80, jitterMillis: 20, seconds: 6)]
        let results = try anchor.run(schedule) { print($0) }
        print(Self.table(results))

        XCTAssertEqual(results.map(\.name), schedule.map(\.name))
        guard results.count == 2 else { return }
        for result in results {
            let label = "under \(result.name)"
            XCTAssertGreaterThanOrEqual(result.burstsSent, 10, "bursts sent \(label)")
            XCTAssertGreaterThanOrEqual(result.detectedShare, 0.8, "share of bursts heard \(label)")
            XCTAssertTrue(result.throughRelay, "side B's selected pair does not send to the relay \(label)")
            XCTAssertGreaterThan(result.datagramsForwardedAToB, 100, "datagrams relayed a → b \(label)")
            XCTAssertGreaterThan(result.datagramsForwardedBToA, 0, "datagrams relayed b → a \(label)")
            XCTAssertNotNil(result.netEqDelayMillis, "NetEq's delay \(label)")
            XCTAssertGreaterThan(result.packetsReceived, 100, "packets received \(label)")
        }
        let clean = try XCTUnwrap(results[0].mouthToEarPercentile(50))
        let jitter = try XCTUnwrap(results[1].mouthToEarPercentile(50))
        XCTAssertTrue((5...250).contains(clean), "clean mouth-to-ear p50 \(clean) ms")
        XCTAssertGreaterThanOrEqual(jitter - clean, 40, "the 80 ms relay delay added only \(jitter - clean) ms to the p50")
    }

    /// The timeline on a made-up run: it starts once a burst was heard, switches mid-gap, ends each
    /// condition on whole bursts, matches an onset heard more than a period late to its own burst
    /// by pitch, counts a burst never heard, and takes NetEq's delay between the boundaries.
    func testTimelineSplitsBurstsByConditionAndMatchesOnsetsByPitch() throws {
        typealias Event = ChromiumAnchor.PageEvent
        let schedule = [LatencyCondition(name: "fast", seconds: 2), LatencyCondition(name: "slow", delayMillis: 600, seconds: 2)]
        var timeline = ChromiumAnchor.Timeline(schedule: schedule, periodMillis: 500, relayFacingB: "192.0.2.2:4000")
        let origin = 1_000_000.0
        let tones = [600.0, 1000, 1400, 1800]
        // Bursts 2–5 fall in "fast" (60 ms), 6–9 in "slow" (700 ms, more than a period); 7 is lost.
        let slowFrom = origin + 2750
        func delay(_ burst: Int) -> Double { origin + Double(burst) * 500 < slowFrom ? 60 : 700 }
        func neteq(_ burst: Int) -> Double { origin + Double(burst) * 500 < slowFrom ? 0.040 : 0.200 }
        var events: [(Double, Event)] = [(origin - 100, .ready(sampleRate: 48000, userAgent: "Mozilla/5.0 (X11) HeadlessChrome/156.0.0.0 Safari/537.36"))]
        var delaySum = 0.0
        for burst in 0..<12 {
            let wall = origin + Double(burst) * 500, seconds = Double(burst) * 0.5, hertz = tones[burst % 4]
            events.append((wall, .emitted(burst: burst, seconds: seconds, hertz: hertz, wallMillis: wall, receivedMillis: wall + 3)))
            if burst > 0 { delaySum += 24_000 * neteq(burst) }
            events.append((wall + 5, .stats(.init(wallMillis: wall + 5, jitterBufferDelay: delaySum, jitterBufferTargetDelay: delaySum,
                                                   jitterBufferEmittedCount: Double(burst) * 24_000, concealedSamples: 0,
                                                   totalSamplesReceived: Double(burst) * 24_000, packetsLost: 0,
                                                   packetsReceived: Double(burst) * 25, packetsDiscarded: 0, remote: "192.0.2.2:4000"))))
            if burst != 7 {
                let heard = wall + delay(burst)
                events.append((heard, .heard(seconds: seconds + delay(burst) / 1000, hertz: hertz + 17, peak: 0.5, wallMillis: heard)))
            }
        }
        events.append((origin + 3900, .heard(seconds: 3.9, hertz: 300, peak: 0.2, wallMillis: origin + 3900)))  // a pitch never sent
        var relayed = 0
        for (wall, event) in events.sorted(by: { $0.0 < $1.0 }) {
            while let pending = timeline.pendingSwitch, pending.wallMillis <= wall {
                relayed += 100
                timeline.switched(atWallMillis: pending.wallMillis, forwardedAToB: relayed, forwardedBToA: relayed / 2, dropped: 0)
            }
            timeline.handle(event)
        }

        XCTAssertEqual(timeline.boundaries.map(\.wallMillis), [origin + 750, origin + 2750])
        XCTAssertEqual(timeline.ended?.wallMillis, origin + 4750)
        XCTAssertFalse(timeline.isComplete(nowMillis: origin + 5000), "burst 7 was not heard: the harness waits for it")
        XCTAssertTrue(timeline.isComplete(nowMillis: origin + 4750 + 2000))
        let results = timeline.results()
        XCTAssertEqual(results.map(\.name), ["fast", "slow"])
        guard results.count == 2 else { return }
        let (fast, slow) = (results[0], results[1])
        XCTAssertEqual(fast.burstsSent, 4)
        XCTAssertEqual(fast.burstsDetected, 4)
        XCTAssertEqual(fast.mouthToEarMillis.count, 4)
        for value in fast.mouthToEarMillis { XCTAssertEqual(value, 60, accuracy: 1e-6) }
        XCTAssertEqual(slow.burstsSent, 4)
        XCTAssertEqual(slow.burstsDetected, 3, "burst 7 is counted, not heard")
        for value in slow.mouthToEarMillis { XCTAssertEqual(value, 700, accuracy: 1e-6) }
        XCTAssertEqual(slow.unmatchedOnsets, 1)
        XCTAssertEqual(try XCTUnwrap(fast.netEqDelayMillis), 40, accuracy: 1e-6)
        XCTAssertEqual(try XCTUnwrap(slow.netEqDelayMillis), 200, accuracy: 1e-6)
        XCTAssertEqual(try XCTUnwrap(fast.concealedSecondsPerMinute), 0, accuracy: 1e-9)
        XCTAssertEqual(fast.packetsReceived, 100)
        XCTAssertEqual(fast.datagramsForwardedAToB, 100)
        XCTAssertEqual(fast.seconds, 2, accuracy: 1e-9)
        XCTAssertTrue(fast.throughRelay && slow.throughRelay)
        XCTAssertEqual(try XCTUnwrap(fast.audioClockRate), 1, accuracy: 1e-9)
        XCTAssertEqual(fast.browser, "HeadlessChrome/156.0.0.0")
    }

    /// A console message as chromium prints it on stderr: the JSON is taken from between the
    /// marker and the `", source:` chromium appends, quotes inside it as they are.
    func testPageEventIsReadFromChromiumsLogLine() {
        let line = #"[9119:9119:1202/190734.684764:INFO:CONSOLE:49] "VEIL-ANCHOR {"type":"heard","seconds":0.8175,"hertz":1000,"peak":0.51,"wallMillis":1796238619953.2769}", source: file:///work/main/bench/anchor/call.html?relayHost=192.0.2.2&a=1&b=2 (49)"#
        XCTAssertEqual(ChromiumAnchor.PageEvent(logLine: line), .heard(seconds: 0.8175, hertz: 1000, peak: 0.51, wallMillis: 1796238619953.2769))
        let error = #"[1:1:1202/1.1:INFO:CONSOLE:49] "VEIL-ANCHOR {"type":"error","message":"said \"no\""}", source: file:///x (49)"#
        XCTAssertEqual(ChromiumAnchor.PageEvent(logLine: error), .failed(#"said "no""#))
        XCTAssertNil(ChromiumAnchor.PageEvent(logLine: "[1:1:1202/1.1:ERROR:dbus/bus.cc:405] Failed to connect to the bus"))
    }

    /// The figures the run printed, one row per condition.
    static func table(_ results: [ConditionResult]) -> String {
        func ms(_ value: Double?) -> String { value.map { String(format: "%.1f", $0) } ?? "-" }
        let header = ["condition", "heard", "m2e p50 ms", "m2e p95 ms", "NetEq delay (target) ms", "concealed s/min",
                      "lost", "discarded", "relayed a→b / b→a", "audio clock rate"]
        var rows = [header]
        for r in results {
            rows.append([r.name, "\(r.burstsDetected)/\(r.burstsSent)", ms(r.mouthToEarPercentile(50)), ms(r.mouthToEarPercentile(95)),
                         "\(ms(r.netEqDelayMillis)) (\(ms(r.netEqTargetDelayMillis)))",
                         r.concealedSecondsPerMinute.map { String(format: "%.2f", $0) } ?? "-",
                         "\(r.packetsLost)", "\(r.packetsDiscarded)", "\(r.datagramsForwardedAToB) / \(r.datagramsForwardedBToA)",
                         r.audioClockRate.map { String(format: "%.4f", $0) } ?? "-"])
        }
        let widths = header.indices.map { column in rows.map { $0[column].count }.max() ?? 0 }
        return rows.map { row in
            zip(row, widths).map { $0.padding(toLength: $1, withPad: " ", startingAt: 0) }.joined(separator: " | ")
        }.joined(separator: "\n")
    }
}
