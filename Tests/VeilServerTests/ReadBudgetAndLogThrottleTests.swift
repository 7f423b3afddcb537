import Foundation
import VeilCore
@testable import VeilServer
import XCTest

/// The server-wide halves of the limits, without I/O: the read budget shared by all connections
/// and the log throttle for lines strangers can cause. Time is a number.
final class ReadBudgetAndLogThrottleTests: XCTestCase {
    func testStrangersShareTheirOwnBudgetAndParticipantsKeepTheirs() {
        let configuration = RoomDirectory.Configuration(unjoinedServerByteRate: .init(perSecond: 10_000, burst: 20_000),
                                                        serverByteRate: .init(perSecond: 100_000, burst: 200_000))
        var budget = ReadBudget(configuration, now: 0)
        XCTAssertEqual(budget.allowance(joined: false, now: 0), ReadBudget.readSize)
        // Strangers spend their 20 000: they pause, participants read on.
        budget.charge(20_000, joined: false, now: 0)
        XCTAssertLessThan(budget.allowance(joined: false, now: 0), ReadBudget.smallestRead)
        XCTAssertEqual(budget.allowance(joined: true, now: 0), ReadBudget.readSize)
        // 0.1 s later 1000 bytes are back for strangers: still under the smallest read, they wait.
        XCTAssertEqual(budget.allowance(joined: false, now: 0.1), 1000)
        XCTAssertEqual(budget.allowance(joined: false, now: 0.5), 5000)
        // Everyone together: participants spending the whole server budget pause strangers too.
        budget.charge(200_000, joined: true, now: 0.5)
        XCTAssertLessThan(budget.allowance(joined: true, now: 0.5), ReadBudget.smallestRead)
        XCTAssertLessThan(budget.allowance(joined: false, now: 0.5), ReadBudget.smallestRead)
        XCTAssertEqual(budget.allowance(joined: true, now: 1.5), ReadBudget.readSize, "refilled at 100 000 per second")
    }

    func testStrangersLogLinesAreHeldBackAndCountedParticipantsAreNot() {
        var throttle = LogThrottle()
        var written = 0
        for n in 0..<1000 {
            let code: SignalingErrorCode = n % 4 == 0 ? .tokenExpired : .tokenForged
            if throttle.admit(.refused(room: "r", user: "eve", code: code), now: Double(n) / 200) { written += 1 }
        }
        // 5 s at 200 a second: the burst of 50, then 5 a second.
        XCTAssertEqual(written, 50 + 25, accuracy: 1)
        let summaries = throttle.summaries(now: 5.5) // 5 s after the first line held back
        XCTAssertEqual(summaries.count, 1)
        XCTAssertEqual(summaries.first?.kind, "refuse")
        XCTAssertEqual((summaries.first?.lines ?? 0) + written, 1000, "every line written or counted")
        XCTAssertEqual(summaries.first?.codes.values.reduce(0, +), summaries.first?.lines)
        XCTAssertEqual(throttle.summaries(now: 6), [], "counted once")
        // Participants' lines are never held back.
        for n in 0..<500 {
            XCTAssertTrue(throttle.admit(.joined(room: "r", user: "u\(n)", participants: 1, resumed: false), now: 6))
            XCTAssertTrue(throttle.admit(.kicked(room: "r", user: "u\(n)", code: .rateLimited), now: 6))
        }
        // Closed connections have their own allowance; a short flood is summarised when flushed.
        for _ in 0..<60 { _ = throttle.admit(.closed(ConnectionID(1), code: .pingTimeout), now: 7) }
        XCTAssertEqual(throttle.summaries(now: 7), [], "not yet due")
        XCTAssertEqual(throttle.summaries(now: 7, flush: true).map(\.lines), [10])
        let line = RoomServerEvent(date: Date(timeIntervalSince1970: 0), kind: .heldBack(kind: "refuse", lines: 12, codes: ["token_forged": 9, "token_expired": 3], seconds: 5))
        XCTAssertEqual(line.description, "1970-01-01T00:00:00.000Z held-back kind=refuse lines=12 seconds=5.0 codes=token_forged:9,token_expired:3")
    }
}
