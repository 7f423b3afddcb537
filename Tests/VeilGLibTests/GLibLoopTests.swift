import CGLib
import Foundation
import Synchronization
import VeilGLib
import XCTest

final class GLibLoopTests: XCTestCase {
    func testPerformRunsOnTheLoopThread() throws {
        let loop = GLibLoop(name: "test-loop")
        XCTAssertFalse(loop.isCurrent)
        XCTAssertTrue(try loop.sync { loop.isCurrent })
        let value = try loop.sync { 6 * 7 }
        XCTAssertEqual(value, 42)
        loop.stop()
    }

    func testSyncRethrows() {
        struct Boom: Error {}
        let loop = GLibLoop(name: "test-loop")
        XCTAssertThrowsError(try loop.sync { throw Boom() }) { XCTAssertTrue($0 is Boom) }
    }

    func testTimersFireAndCancel() throws {
        let loop = GLibLoop(name: "test-loop")
        let count = Mutex(0)
        let done = DispatchSemaphore(value: 0)
        loop.every(milliseconds: 5) {
            let n = count.withLock { $0 += 1; return $0 }
            if n == 3 { done.signal() }
            return n < 3
        }
        XCTAssertEqual(done.wait(timeout: .now() + 2), .success)
        let cancelled = Mutex(false)
        let timer = loop.after(milliseconds: 200) { cancelled.withLock { $0 = true } }
        timer.cancel()
        Thread.sleep(forTimeInterval: 0.3)
        XCTAssertFalse(cancelled.withLock { $0 })
        XCTAssertEqual(count.withLock { $0 }, 3)
    }
}

final class GLibLoopStopTests: XCTestCase {
    func testStopIsPromptAndIdempotent() {
        let start = Date()
        for _ in 0..<50 {
            let loop = GLibLoop(name: "stop-test")
            loop.stop()
            loop.stop()
        }
        XCTAssertLessThan(Date().timeIntervalSince(start), 3, "stopping fifty loops twice each must not wait for timeouts")
    }
}
