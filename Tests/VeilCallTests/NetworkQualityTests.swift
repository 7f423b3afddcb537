@testable import VeilCall
import XCTest

final class NetworkQualityTests: XCTestCase {
    func testEachLevelFromRoundTripTimeAlone() {
        let cases: [(Double, NetworkQuality)] = [
            (0, .excellent), (40, .excellent), (100, .excellent), (100.1, .good), (200, .good),
            (250, .poor), (300, .poor), (450, .bad), (500, .bad), (501, .veryBad), (5_000, .veryBad),
        ]
        for (rtt, expected) in cases {
            XCTAssertEqual(NetworkQuality.assess(roundTripMillis: rtt, lossFraction: 0, isConnected: true), expected, "RTT \(rtt) ms")
        }
    }

    func testEachLevelFromLossAlone() {
        let cases: [(Double, NetworkQuality)] = [
            (0, .excellent), (0.01, .excellent), (0.02, .good), (0.03, .good), (0.05, .poor), (0.08, .poor),
            (0.12, .bad), (0.15, .bad), (0.3, .veryBad), (0.99, .veryBad), (1, .down),
        ]
        for (loss, expected) in cases {
            XCTAssertEqual(NetworkQuality.assess(roundTripMillis: 20, lossFraction: loss, isConnected: true), expected, "loss \(loss)")
        }
    }

    func testTheWorseMetricDecides() {
        XCTAssertEqual(NetworkQuality.assess(roundTripMillis: 20, lossFraction: 0.1, isConnected: true), .bad)
        XCTAssertEqual(NetworkQuality.assess(roundTripMillis: 450, lossFraction: 0, isConnected: true), .bad)
        XCTAssertEqual(NetworkQuality.assess(roundTripMillis: 250, lossFraction: 0.02, isConnected: true), .poor)
    }

    func testUnknownMetricsDoNotLowerTheLevel() {
        XCTAssertEqual(NetworkQuality.assess(roundTripMillis: nil, lossFraction: nil, isConnected: true), .excellent)
        XCTAssertEqual(NetworkQuality.assess(roundTripMillis: nil, lossFraction: 0.05, isConnected: true), .poor)
        XCTAssertEqual(NetworkQuality.assess(roundTripMillis: .nan, lossFraction: .nan, isConnected: true), .excellent)
        XCTAssertEqual(NetworkQuality.assess(roundTripMillis: -3, lossFraction: -0.5, isConnected: true), .excellent)
    }

    func testNotConnectedIsDown() {
        XCTAssertEqual(NetworkQuality.assess(roundTripMillis: 10, lossFraction: 0, isConnected: false), .down)
    }

    func testWorseInputNeverGivesABetterLevel() {
        let rtts: [Double] = stride(from: 0, through: 1_200, by: 7).map { $0 }
        let losses: [Double] = stride(from: 0, through: 1, by: 0.01).map { $0 }
        for loss in losses {
            var previous = NetworkQuality.excellent
            for rtt in rtts {
                let level = NetworkQuality.assess(roundTripMillis: rtt, lossFraction: loss, isConnected: true)
                XCTAssertGreaterThanOrEqual(level, previous)
                previous = level
            }
        }
    }

    func testOrderAndNames() {
        XCTAssertEqual(NetworkQuality.allCases.sorted(), [.excellent, .good, .poor, .bad, .veryBad, .down])
        XCTAssertEqual(NetworkQuality.allCases.map(\.description), ["excellent", "good", "poor", "bad", "veryBad", "down"])
    }
}
