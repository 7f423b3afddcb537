import Foundation
import Synchronization
import VeilCore
import VeilExpressionSource
import XCTest

/// A source with nothing behind it: scripted expressions, one every `interval`, stamped on the
/// clock it is given and moved by the voice's mouth as the strict level would; after the script,
/// lost frames until stopped. What every real source does around its input, without the input.
final class ScriptedExpressionSource: ExpressionSource, @unchecked Sendable {
    let script: [Float]
    let interval: TimeInterval
    let clock: @Sendable () -> UInt64
    let loop = ExpressionSourceThread(name: "veil-scripted")
    var sourceDescription: String { "a script of \(script.count) expressions" }

    init(script: [Float], interval: TimeInterval = 0.002, clock: @escaping @Sendable () -> UInt64) {
        self.script = script
        self.interval = interval
        self.clock = clock
    }

    func start(voiceMouth: @escaping @Sendable () -> Float?, deliver: @escaping @Sendable (ExpressionFrame) -> Void) {
        loop.start { [self] in
            var sequence: UInt32 = 0
            while loop.isRunning {
                let index = Int(sequence)
                if index < script.count {
                    var expression = Expression()
                    expression[.mouthSmileLeft] = script[index]
                    expression[.jawOpen] = voiceMouth() ?? 0
                    deliver(ExpressionFrame(sequence: sequence, captureTimeMicros: clock(), state: .tracked, expression: expression))
                } else {
                    deliver(ExpressionFrame(sequence: sequence, captureTimeMicros: clock(), state: .lost))
                }
                sequence &+= 1
                Thread.sleep(forTimeInterval: interval)
            }
        }
    }

    func stop() { loop.stop() }
}

final class ExpressionSourceTests: XCTestCase {
    /// Frames collected from a source's thread.
    final class Collected: Sendable {
        let frames = Mutex<[ExpressionFrame]>([])
        var count: Int { frames.withLock { $0.count } }
        func waitFor(_ count: Int, timeout: TimeInterval = 5) -> Bool {
            let deadline = Date().addingTimeInterval(timeout)
            while self.count < count, Date() < deadline { Thread.sleep(forTimeInterval: 0.001) }
            return self.count >= count
        }
    }

    func testASourceDeliversItsFramesInOrderThroughTheVoiceAndOnItsClock() {
        let ticks = Mutex<UInt64>(1_000)
        let source: ExpressionSource = ScriptedExpressionSource(script: [0.1, 0.5, 0.9]) {
            ticks.withLock { $0 += 33_333; return $0 }
        }
        XCTAssertEqual(source.sourceDescription, "a script of 3 expressions")
        let collected = Collected()
        source.start(voiceMouth: { 0.25 }) { frame in collected.frames.withLock { $0.append(frame) } }
        XCTAssertTrue(collected.waitFor(5), "the source delivered \(collected.count) frames")
        source.stop()
        let frames = collected.frames.withLock { $0 }
        XCTAssertEqual(frames.map(\.sequence), Array(0..<UInt32(frames.count)))
        XCTAssertEqual(frames.prefix(3).map(\.state), [.tracked, .tracked, .tracked])
        XCTAssertEqual(frames.prefix(3).map { $0.expression[.mouthSmileLeft] }, [0.1, 0.5, 0.9])
        XCTAssertEqual(frames.prefix(3).map { $0.expression[.jawOpen] }, [0.25, 0.25, 0.25])
        XCTAssertTrue(frames.dropFirst(3).allSatisfy { $0.state == .lost && $0.expression == .neutral })
        XCTAssertEqual(zip(frames, frames.dropFirst()).filter { $0.captureTimeMicros >= $1.captureTimeMicros }.count, 0,
                       "capture times come from the clock, in order")
    }

    func testNothingIsDeliveredOnceStopReturns() {
        let source = ScriptedExpressionSource(script: Array(repeating: 0.5, count: 10_000), interval: 0) { 0 }
        let collected = Collected()
        source.start(voiceMouth: { nil }) { frame in collected.frames.withLock { $0.append(frame) } }
        // A second start does nothing: one thread, one sequence.
        source.start(voiceMouth: { nil }) { _ in XCTFail("the second start delivered") }
        XCTAssertTrue(collected.waitFor(20))
        source.stop()
        let atStop = collected.count
        Thread.sleep(forTimeInterval: 0.05)
        XCTAssertEqual(collected.count, atStop, "frames came after stop() returned")
        source.stop()
        XCTAssertFalse(source.loop.isRunning)
        XCTAssertEqual(collected.frames.withLock { $0.map(\.sequence) }, Array(0..<UInt32(atStop)))
    }

    func testStoppingASourceNeverStartedReturnsAtOnce() {
        let source = ScriptedExpressionSource(script: [0.5]) { 0 }
        source.stop()
        XCTAssertFalse(source.loop.isRunning)
    }

    func testAStopThatWaitsTooLongGivesUpAfterItsTimeout() {
        let thread = ExpressionSourceThread(name: "veil-stuck", stopTimeout: 0.05)
        let release = DispatchSemaphore(value: 0)
        thread.start { release.wait() }
        XCTAssertFalse(thread.stop(), "the loop never returned, yet stop() said it did")
        release.signal()
    }
}
