@testable import VeilCall
import XCTest

/// PeerStatistics built from get-stats entries shaped like GStreamer 1.22's (copied from a real
/// run), without a network.
final class PeerStatisticsTests: XCTestCase {
    /// 1.22 swaps the candidate entries: the one typed "local-candidate" has the remote's id and
    /// address. The pair's ids are what count.
    private func entries(sentBytes: Int, receivedBytes: Int, received: Int, lost: Int, rtt: String = "0.0008392333984375",
                         fractionLost: String = "0") -> [StatsEntry] {
        [
            StatsEntry(type: "remote-candidate", fields: ["id": "ice-candidate-local_1_192.0.2.2_36708", "address": "192.0.2.2",
                                                          "port": "36708", "candidate-type": "host", "protocol": "udp"]),
            StatsEntry(type: "local-candidate", fields: ["id": "ice-candidate-remote_1_203.0.113.5_38423", "address": "203.0.113.5",
                                                         "port": "38423", "candidate-type": "srflx", "protocol": "udp"]),
            StatsEntry(type: "candidate-pair", fields: ["id": "pair", "local-candidate-id": "ice-candidate-local_1_192.0.2.2_36708",
                                                        "remote-candidate-id": "ice-candidate-remote_1_203.0.113.5_38423"]),
            StatsEntry(type: "inbound-rtp", fields: ["id": "in", "bytes-received": "\(receivedBytes)", "packets-received": "\(received)",
                                                     "packets-lost": "\(lost)", "jitter": "0.00010416666666666667"]),
            StatsEntry(type: "outbound-rtp", fields: ["id": "out", "bytes-sent": "\(sentBytes)", "packets-sent": "100"]),
            StatsEntry(type: "remote-inbound-rtp", fields: ["id": "rin", "round-trip-time": rtt, "fraction-lost": fractionLost, "packets-lost": "-1"]),
        ]
    }

    func testCandidatePairIsResolvedByIDDespiteSwappedEntries() {
        let current = StatsSample(timeMicros: 2_000_000, entries: entries(sentBytes: 8000, receivedBytes: 8000, received: 100, lost: 0), counters: PeerCounters())
        let stats = PeerStatistics(current: current, previous: StatsSample(timeMicros: 0, entries: [], counters: PeerCounters()),
                                   state: .connected, connectMillis: 80)
        XCTAssertEqual(stats.candidatePair?.local, CandidateEndpoint(address: "192.0.2.2", port: 36708, type: .host, transport: "udp"))
        XCTAssertEqual(stats.candidatePair?.remote, CandidateEndpoint(address: "203.0.113.5", port: 38423, type: .srflx, transport: "udp"))
        XCTAssertEqual(stats.candidatePair?.remote.description, "203.0.113.5:38423 (srflx)")
        XCTAssertEqual(CandidateEndpoint(address: "fe80::1", port: 5, type: .host, transport: "udp").description, "[fe80::1]:5 (host)")
        XCTAssertEqual(stats.roundTripTimeMillis ?? 0, 0.839, accuracy: 0.001)
        XCTAssertEqual(stats.jitterMillis ?? 0, 0.104, accuracy: 0.001)
        XCTAssertEqual(stats.connectMillis, 80)
        XCTAssertEqual(stats.quality, .excellent)
    }

    func testRatesComeFromTheDifferenceBetweenSnapshots() {
        var counters = PeerCounters()
        counters.framesSent = 30
        counters.bytesSent = 30 * 40
        counters.framesReceived = 60
        counters.bytesReceived = 60 * 40
        counters.framesDropped = 2
        let previous = StatsSample(timeMicros: 1_000_000, entries: entries(sentBytes: 4000, receivedBytes: 5000, received: 50, lost: 0),
                                   counters: PeerCounters())
        let current = StatsSample(timeMicros: 3_000_000, entries: entries(sentBytes: 12000, receivedBytes: 13000, received: 140, lost: 10),
                                  counters: counters)
        let stats = PeerStatistics(current: current, previous: previous, state: .connected, connectMillis: nil)
        XCTAssertEqual(stats.intervalSeconds, 2)
        XCTAssertEqual(stats.audioBitrateOut, 8 * 8000 / 2)
        XCTAssertEqual(stats.audioBitrateIn, 8 * 8000 / 2)
        XCTAssertEqual(stats.audioPacketsReceivedPerSecond, 45)
        XCTAssertEqual(stats.packetsLost, 10)
        XCTAssertEqual(stats.lossFraction ?? -1, 10.0 / 100, accuracy: 1e-9)
        XCTAssertEqual(stats.quality, .bad, "10 % loss")
        XCTAssertEqual(stats.expression.framesSentPerSecond, 15)
        XCTAssertEqual(stats.expression.framesReceivedPerSecond, 30)
        XCTAssertEqual(stats.expression.framesDroppedPerSecond, 1)
        XCTAssertEqual(stats.expression.bytesSentPerSecond, 600)
        XCTAssertEqual(stats.expression.bytesReceivedPerSecond, 1200)
        XCTAssertEqual(stats.expression.framesSent, 30)
    }

    func testMissingFiguresStayUnknown() {
        let entries = [StatsEntry(type: "remote-inbound-rtp", fields: ["id": "r", "round-trip-time": "0", "fraction-lost": "64"])]
        let stats = PeerStatistics(current: StatsSample(timeMicros: 1, entries: entries, counters: PeerCounters()),
                                   previous: StatsSample(timeMicros: 0, entries: [], counters: PeerCounters()),
                                   state: .connecting, connectMillis: nil)
        XCTAssertNil(stats.candidatePair)
        XCTAssertNil(stats.roundTripTimeMillis, "0 means no round trip measured yet")
        XCTAssertNil(stats.lossFraction, "no audio arrived")
        XCTAssertEqual(stats.remoteLossFraction, 0.25, "a raw RTCP fraction (64/256)")
        XCTAssertEqual(stats.quality, .down, "not connected")
    }

    func testRemoteLossCountsTowardsQuality() {
        let current = StatsSample(timeMicros: 2_000_000, entries: entries(sentBytes: 1, receivedBytes: 1, received: 100, lost: 0, fractionLost: "0.2"),
                                  counters: PeerCounters())
        let stats = PeerStatistics(current: current, previous: StatsSample(timeMicros: 1_000_000, entries: [], counters: PeerCounters()),
                                   state: .connected, connectMillis: nil)
        XCTAssertEqual(stats.remoteLossFraction, 0.2)
        XCTAssertEqual(stats.quality, .veryBad)
    }
}

final class PlayoutMappingTests: XCTestCase {
    func testPlayoutIsSenderTimePlusOffsetPlusLatency() {
        let mapping = PlayoutMapping(offsetMicros: 41_500, latencyMicros: 120_000, referenceSenderMicros: 5_000_000)
        XCTAssertEqual(mapping.playoutTimeMicros(forSenderMediaTimeMicros: 5_000_000), 5_161_500)
        XCTAssertEqual(mapping.senderMediaTimeMicros(playingAt: 5_161_500), 5_000_000)
        let negative = PlayoutMapping(offsetMicros: -3_000_000_000, latencyMicros: 0, referenceSenderMicros: 4_000_000_000)
        XCTAssertEqual(negative.playoutTimeMicros(forSenderMediaTimeMicros: 4_000_000_000), 1_000_000_000, "clocks of two machines differ")
    }

    func testWireTimesAreUnwrappedNearTheLatestPacket() {
        let wrap: UInt64 = 1 << 48
        let reference = 3 * wrap + 1_000
        let mapping = PlayoutMapping(offsetMicros: 10, latencyMicros: 0, referenceSenderMicros: reference)
        // A frame captured 2 ms before the reference, sent modulo 2^48.
        XCTAssertEqual(mapping.playoutTimeMicros(forSenderMediaTimeMicros: (reference - 2_000) % wrap), reference - 2_000 + 10)
        // Just after a wrap of the 48-bit counter.
        XCTAssertEqual(PlayoutMapping.unwrap48(5, near: 4 * wrap - 10), 4 * wrap + 5)
        XCTAssertEqual(PlayoutMapping.unwrap48(wrap - 5, near: 4 * wrap + 10), 4 * wrap - 5)
        XCTAssertEqual(PlayoutMapping.unwrap48(123_456, near: 123_000), 123_456, "full times pass through")
    }
}

final class ExpressionSendPolicyTests: XCTestCase {
    func testFramesAreDroppedOnceFourFramesAreWaiting() {
        XCTAssertTrue(ExpressionSendPolicy.shouldSend(bufferedAmount: 0, frameSize: 81, maximumBuffered: 512))
        XCTAssertTrue(ExpressionSendPolicy.shouldSend(bufferedAmount: 384, frameSize: 128, maximumBuffered: 512))
        XCTAssertFalse(ExpressionSendPolicy.shouldSend(bufferedAmount: 400, frameSize: 128, maximumBuffered: 512))
        XCTAssertFalse(ExpressionSendPolicy.shouldSend(bufferedAmount: 1 << 20, frameSize: 14, maximumBuffered: 512))
    }
}
