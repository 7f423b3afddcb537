import Foundation
import XCTest
import VeilCore

// Foundation has an `Expression` of its own.
private typealias Expression = VeilCore.Expression

/// The jitter buffer on simulated networks: every time is passed in, nothing sleeps.
///
/// Frames carry a "clock face" in their head yaw: the yaw is the frame's capture time modulo
/// `phasePeriod`, mapped onto −180…180°. Linear interpolation (along the shorter arc) of a linear
/// function is exact, so the yaw of any picture the buffer draws tells which capture time it
/// shows — independently of what the buffer says about itself in `sourceTimeMicros`.
final class ExpressionJitterBufferTests: XCTestCase {
    /// 30 fps.
    private let interval: UInt64 = 33_333
    /// Where the sender's media clock is when the test streams start.
    private let senderStart: UInt64 = 7_000_000_000
    /// Local clock minus sender clock.
    private let clockOffset: UInt64 = 123_456_789
    private static let phasePeriod: UInt64 = 2_000_000

    // MARK: Stream helpers

    private func captureTime(_ index: Int) -> UInt64 { senderStart + UInt64(index) * interval }

    /// An expression that encodes `time` in the yaw and varies everywhere else too.
    private func content(at time: UInt64, index: Int) -> Expression {
        let phase = Double(time % Self.phasePeriod) / Double(Self.phasePeriod)
        let seconds = Double(time) / 1e6
        var e = Expression(headPose: HeadPose(yaw: Float(phase * 360 - 180),
                                              pitch: Float(10 * sin(seconds * 1.7)),
                                              roll: Float(5 * cos(seconds * 2.3))),
                           gaze: Gaze(x: Float(0.5 * sin(seconds * 3.1)), y: Float(0.3 * cos(seconds * 1.3))))
        e[.jawOpen] = Float(0.5 + 0.5 * sin(seconds * 2 * .pi * 3))
        e[.mouthSmileLeft] = Float(index % 10) / 10
        e[.eyeBlinkRight] = Float(0.5 + 0.5 * cos(seconds * 5))
        return e
    }

    private func frame(_ index: Int, sequenceBase: UInt32 = 0, state: ExpressionFrame.State = .tracked,
                       time: UInt64? = nil) -> ExpressionFrame {
        let t = time ?? captureTime(index)
        return ExpressionFrame(sequence: sequenceBase &+ UInt32(truncatingIfNeeded: index), captureTimeMicros: t,
                               state: state, expression: content(at: t, index: index))
    }

    /// The capture time a drawn expression shows, read from its yaw, as a signed difference from
    /// `reference` (valid within half a period).
    private func shownTimeOffset(_ e: Expression, from reference: UInt64) -> Double {
        let shownPhase = Double(e.headPose.yaw + 180) / 360 * Double(Self.phasePeriod)
        let referencePhase = Double(reference % Self.phasePeriod)
        var difference = shownPhase - referencePhase
        let period = Double(Self.phasePeriod)
        difference -= (difference / period).rounded() * period
        return difference
    }

    private func assertExpression(_ actual: Expression, _ expected: Expression, accuracy: Float = 1e-5,
                                  _ message: String = "", file: StaticString = #filePath, line: UInt = #line) {
        for shape in BlendShape.allCases {
            XCTAssertEqual(actual[shape], expected[shape], accuracy: accuracy, "\(shape.name) \(message)", file: file, line: line)
        }
        XCTAssertEqual(actual.headPose.yaw, expected.headPose.yaw, accuracy: accuracy * 100, "yaw \(message)", file: file, line: line)
        XCTAssertEqual(actual.headPose.pitch, expected.headPose.pitch, accuracy: accuracy * 100, "pitch \(message)", file: file, line: line)
        XCTAssertEqual(actual.headPose.roll, expected.headPose.roll, accuracy: accuracy * 100, "roll \(message)", file: file, line: line)
        XCTAssertEqual(actual.gaze == nil, expected.gaze == nil, "gaze presence \(message)", file: file, line: line)
        if let a = actual.gaze, let b = expected.gaze {
            XCTAssertEqual(a.x, b.x, accuracy: accuracy, "gaze x \(message)", file: file, line: line)
            XCTAssertEqual(a.y, b.y, accuracy: accuracy, "gaze y \(message)", file: file, line: line)
        }
    }

    /// `e` with every coefficient, angle and gaze axis scaled by `factor` (an ease towards neutral).
    private func scaled(_ e: Expression, _ factor: Float) -> Expression {
        var out = Expression(headPose: HeadPose(yaw: e.headPose.yaw * factor, pitch: e.headPose.pitch * factor,
                                                roll: e.headPose.roll * factor),
                             gaze: e.gaze.map { Gaze(x: $0.x * factor, y: $0.y * factor) })
        for shape in BlendShape.allCases { out[shape] = e[shape] * factor }
        return out
    }

    /// A network event: a frame reaching the receiver at a local time.
    private struct Arrival {
        var frame: ExpressionFrame
        var local: UInt64
    }

    /// Feeds arrivals up to each render tick, then renders the audio's sender media time at that
    /// tick; returns (tick local time, audio media time, playout) per tick.
    /// The buffer is asked for the audio time plus `renderLead` (docs/lip-sync.md: the call layer may
    /// ask for a little ahead to centre the error over the picture's time on screen). Arrivals after
    /// the last tick are inserted at the end.
    private func play(_ arrivals: [Arrival], into buffer: inout ExpressionJitterBuffer, audioLatency: UInt64,
                      ticks: [UInt64], renderLead: UInt64 = 0) -> [(local: UInt64, audio: UInt64, playout: ExpressionJitterBuffer.Playout)] {
        let sorted = arrivals.enumerated().sorted { ($0.element.local, $0.offset) < ($1.element.local, $1.offset) }.map(\.element)
        var next = 0
        var out: [(UInt64, UInt64, ExpressionJitterBuffer.Playout)] = []
        for tick in ticks {
            while next < sorted.count, sorted[next].local <= tick {
                buffer.insert(sorted[next].frame, arrivalTimeMicros: sorted[next].local)
                next += 1
            }
            let audio = tick - clockOffset - audioLatency
            out.append((tick, audio, buffer.expression(atPlayoutOf: audio + renderLead)))
        }
        for arrival in sorted[next...] { buffer.insert(arrival.frame, arrivalTimeMicros: arrival.local) }
        return out
    }

    /// Render ticks at 30 fps, deliberately out of phase with the sender's frames.
    private func renderTicks(from start: UInt64, count: Int, phase: UInt64 = 11_111) -> [UInt64] {
        (0..<count).map { start + phase + UInt64($0) * 33_333 }
    }

    // MARK: Drawing frames and between frames

    func testInOrderDeliveryDrawsEachFrameAtItsCaptureTime() {
        var buffer = ExpressionJitterBuffer()
        for k in 0..<90 {
            XCTAssertEqual(buffer.insert(frame(k), arrivalTimeMicros: captureTime(k) + clockOffset + 30_000), .accepted)
            if k == 0 { continue }
            let shown = buffer.expression(atPlayoutOf: captureTime(k - 1))
            XCTAssertEqual(shown.expression, frame(k - 1).expression, "frame \(k - 1)")
            XCTAssertEqual(shown.source, .frame)
            XCTAssertEqual(shown.faceWeight, 1)
            XCTAssertEqual(shown.earlier?.sequence, UInt32(k - 1))
            XCTAssertEqual(shown.sourceTimeMicros, captureTime(k - 1))
            XCTAssertEqual(shown.mediaTimeMicros, captureTime(k - 1))
        }
        let stats = buffer.statistics
        XCTAssertEqual(stats.framesReceived, 90)
        XCTAssertEqual(stats.lateDropped, 0)
        XCTAssertEqual(stats.duplicates, 0)
        XCTAssertEqual(stats.gapsInterpolated, 0)
        XCTAssertLessThanOrEqual(stats.bufferedFrames, 2, "frames before the one drawn are discarded")
    }

    func testMidwayBetweenTwoFramesIsTheAverage() {
        var a = Expression(headPose: HeadPose(yaw: 10, pitch: -4, roll: 170), gaze: Gaze(x: -0.5, y: 0.2))
        var b = Expression(headPose: HeadPose(yaw: 30, pitch: 8, roll: -170), gaze: Gaze(x: 0.5, y: -0.6))
        for shape in BlendShape.allCases {
            a[shape] = Float(shape.rawValue) / 51
            b[shape] = 1 - Float(shape.rawValue) / 51
        }
        var buffer = ExpressionJitterBuffer()
        buffer.insert(ExpressionFrame(sequence: 1, captureTimeMicros: 1_000_000, state: .tracked, expression: a), arrivalTimeMicros: 5)
        buffer.insert(ExpressionFrame(sequence: 2, captureTimeMicros: 1_040_000, state: .tracked, expression: b), arrivalTimeMicros: 6)

        let midway = buffer.expression(atPlayoutOf: 1_020_000)
        XCTAssertEqual(midway.source, .interpolated)
        XCTAssertEqual(midway.sourceTimeMicros, 1_020_000)
        XCTAssertEqual(midway.earlier?.weight ?? 0, 0.5, accuracy: 1e-6)
        XCTAssertEqual(midway.later?.weight ?? 0, 0.5, accuracy: 1e-6)
        for shape in BlendShape.allCases {
            XCTAssertEqual(midway.expression[shape], (a[shape] + b[shape]) / 2, accuracy: 1e-6, shape.name)
        }
        XCTAssertEqual(midway.expression.headPose.yaw, 20, accuracy: 1e-4)
        XCTAssertEqual(midway.expression.headPose.pitch, 2, accuracy: 1e-4)
        // 170° and −170° are 20° apart through 180°, not 340° through 0°.
        XCTAssertEqual(abs(midway.expression.headPose.roll), 180, accuracy: 1e-4)
        XCTAssertEqual(midway.expression.gaze?.x ?? .nan, 0, accuracy: 1e-6)
        XCTAssertEqual(midway.expression.gaze?.y ?? .nan, -0.2, accuracy: 1e-6)

        let threeQuarters = buffer.expression(atPlayoutOf: 1_030_000)
        XCTAssertEqual(threeQuarters.expression[.jawOpen], a[.jawOpen] + 0.75 * (b[.jawOpen] - a[.jawOpen]), accuracy: 1e-6)
        XCTAssertEqual(threeQuarters.expression.headPose.yaw, 25, accuracy: 1e-4)
        XCTAssertEqual(threeQuarters.expression.headPose.roll, -175, accuracy: 1e-4)
    }

    func testGazeIsInterpolatedOnlyWhenBothFramesHaveOne() {
        var a = Expression(gaze: Gaze(x: 0.8, y: 0.8))
        a[.jawOpen] = 0.2
        var b = Expression(gaze: nil)
        b[.jawOpen] = 0.6
        var buffer = ExpressionJitterBuffer()
        buffer.insert(ExpressionFrame(sequence: 1, captureTimeMicros: 100_000, state: .tracked, expression: a), arrivalTimeMicros: 0)
        buffer.insert(ExpressionFrame(sequence: 2, captureTimeMicros: 200_000, state: .tracked, expression: b), arrivalTimeMicros: 0)
        let early = buffer.expression(atPlayoutOf: 140_000)
        XCTAssertEqual(early.expression.gaze, Gaze(x: 0.8, y: 0.8), "the nearer frame's gaze, not a blend with nothing")
        XCTAssertEqual(early.expression[.jawOpen], 0.36, accuracy: 1e-6)
        let late = buffer.expression(atPlayoutOf: 160_000)
        XCTAssertNil(late.expression.gaze)
    }

    func testReorderedAndDuplicatedDeliveryDrawsTheSameAsInOrder() {
        var rng = SplitMix64(seed: 7)
        let count = 300
        var inOrder: [Arrival] = []
        var shuffled: [Arrival] = []
        var duplicatesSent = 0
        for k in 0..<count {
            let f = frame(k)
            inOrder.append(Arrival(frame: f, local: f.captureTimeMicros + clockOffset + 20_000))
            shuffled.append(Arrival(frame: f, local: f.captureTimeMicros + clockOffset + UInt64.random(in: 20_000...150_000, using: &rng)))
            if Double.random(in: 0..<1, using: &rng) < 0.2 {
                duplicatesSent += 1
                shuffled.append(Arrival(frame: f, local: f.captureTimeMicros + clockOffset + UInt64.random(in: 20_000...150_000, using: &rng)))
            }
        }
        let reordered = zip(shuffled.sorted { $0.local < $1.local }, shuffled.sorted { $0.frame.sequence < $1.frame.sequence })
            .filter { $0.0.frame.sequence != $0.1.frame.sequence }.count
        XCTAssertGreaterThan(reordered, count / 4, "the simulated network must actually reorder")

        let ticks = renderTicks(from: captureTime(0) + clockOffset + 200_000, count: 280)
        var reference = ExpressionJitterBuffer()
        var subject = ExpressionJitterBuffer()
        let expected = play(inOrder, into: &reference, audioLatency: 200_000, ticks: ticks)
        let actual = play(shuffled, into: &subject, audioLatency: 200_000, ticks: ticks)
        for (e, a) in zip(expected, actual) {
            XCTAssertEqual(a.playout, e.playout, "tick at \(a.local)")
        }
        XCTAssertEqual(actual.filter { $0.playout.source == .interpolated }.count, ticks.count, "ticks fall between frames")
        XCTAssertEqual(subject.statistics.duplicates, duplicatesSent)
        XCTAssertGreaterThan(duplicatesSent, 30)
        XCTAssertEqual(subject.statistics.lateDropped, 0)
        XCTAssertEqual(subject.statistics.framesReceived, count + duplicatesSent)
    }

    // MARK: Loss

    func testShortLossIsInterpolatedAcrossTheGap() {
        var buffer = ExpressionJitterBuffer()
        let lost: Set<Int> = [10, 11, 12, 13, 20]
        for k in 0..<30 where !lost.contains(k) { buffer.insert(frame(k), arrivalTimeMicros: 0) }

        let before = buffer.expression(atPlayoutOf: captureTime(9))
        XCTAssertEqual(before.expression, frame(9).expression)
        // Frames 9 and 14 are five intervals apart; halfway is the average.
        let halfway = captureTime(9) + 5 * interval / 2
        let bridged = buffer.expression(atPlayoutOf: halfway)
        XCTAssertEqual(bridged.source, .interpolated)
        XCTAssertEqual(bridged.earlier?.sequence, 9)
        XCTAssertEqual(bridged.later?.sequence, 14)
        XCTAssertEqual(bridged.expression[.mouthSmileLeft], (frame(9).expression[.mouthSmileLeft] + frame(14).expression[.mouthSmileLeft]) / 2,
                       accuracy: 1e-5)
        XCTAssertEqual(shownTimeOffset(bridged.expression, from: halfway), 0, accuracy: 5, "the picture shows the moment heard")
        _ = buffer.expression(atPlayoutOf: captureTime(12))
        XCTAssertEqual(buffer.statistics.gapsInterpolated, 1, "one gap, however many ticks fall in it")
        _ = buffer.expression(atPlayoutOf: captureTime(19) + interval)
        XCTAssertEqual(buffer.statistics.gapsInterpolated, 2)
        XCTAssertEqual(buffer.expression(atPlayoutOf: captureTime(21)).expression, frame(21).expression)
    }

    func testLongLossHoldsThenEasesToNeutralThenEasesBackIn() {
        var buffer = ExpressionJitterBuffer()
        for k in 0...9 { buffer.insert(frame(k), arrivalTimeMicros: 0) }
        let last = frame(9).expression
        let t9 = captureTime(9)
        XCTAssertEqual(buffer.expression(atPlayoutOf: t9).expression, last)

        for age: UInt64 in [100_000, 300_000, 499_000, 500_000] {
            let held = buffer.expression(atPlayoutOf: t9 + age)
            XCTAssertEqual(held.expression, last, "held at +\(age) µs")
            XCTAssertEqual(held.source, .held)
            XCTAssertEqual(held.faceWeight, 1)
            XCTAssertEqual(held.sourceTimeMicros, t9)
        }
        let quarter = buffer.expression(atPlayoutOf: t9 + 562_500)
        XCTAssertEqual(quarter.source, .easing)
        XCTAssertEqual(quarter.faceWeight, 0.75, accuracy: 1e-6)
        assertExpression(quarter.expression, scaled(last, 0.75), "a quarter of the way to neutral")
        let half = buffer.expression(atPlayoutOf: t9 + 625_000)
        XCTAssertEqual(half.faceWeight, 0.5, accuracy: 1e-6)
        assertExpression(half.expression, scaled(last, 0.5), "halfway to neutral")
        for age: UInt64 in [750_000, 800_000] {
            let gone = buffer.expression(atPlayoutOf: t9 + age)
            XCTAssertEqual(gone.expression, .neutral, "neutral at +\(age) µs")
            XCTAssertEqual(gone.source, .neutral)
            XCTAssertEqual(gone.faceWeight, 0)
            XCTAssertNil(gone.sourceTimeMicros)
        }

        // The lost stretch turns up after all: too late to be drawn.
        for k in 10...25 { XCTAssertEqual(buffer.insert(frame(k), arrivalTimeMicros: 1), .late) }
        // The stream resumes at frame 40 (1.03 s after frame 9); the picture eases into it.
        for k in 40...45 { XCTAssertEqual(buffer.insert(frame(k), arrivalTimeMicros: 2), .accepted) }
        let t40 = captureTime(40)
        XCTAssertEqual(buffer.expression(atPlayoutOf: t40 - 200_000).expression, .neutral, "before the re-entry ease")
        let easingIn = buffer.expression(atPlayoutOf: t40 - 75_000)
        XCTAssertEqual(easingIn.source, .easing)
        XCTAssertEqual(easingIn.faceWeight, 0.5, accuracy: 1e-6)
        XCTAssertEqual(easingIn.expression[.jawOpen], frame(40).expression[.jawOpen] / 2, accuracy: 1e-6)
        XCTAssertEqual(buffer.expression(atPlayoutOf: t40).expression, frame(40).expression)
        XCTAssertEqual(buffer.statistics.lateDropped, 16)
        XCTAssertEqual(buffer.statistics.gapsInterpolated, 0, "a gap longer than 500 ms is not interpolated")
    }

    func testGapLongerThanTheHoldLimitIsNotInterpolatedEvenWhenBothEndsAreKnown() {
        var buffer = ExpressionJitterBuffer()
        buffer.insert(frame(0), arrivalTimeMicros: 0)
        buffer.insert(frame(30), arrivalTimeMicros: 0) // 1 s later
        let early = buffer.expression(atPlayoutOf: captureTime(0) + 400_000)
        XCTAssertEqual(early.expression, frame(0).expression, "held, not 40 % of the way to a frame a second away")
        XCTAssertEqual(early.source, .held)
        XCTAssertEqual(buffer.expression(atPlayoutOf: captureTime(0) + 800_000).expression, .neutral)
        XCTAssertEqual(buffer.expression(atPlayoutOf: captureTime(30)).expression, frame(30).expression)
    }

    func testLostFramesEaseToNeutralQuicklyAndTheFaceComesBack() {
        var buffer = ExpressionJitterBuffer()
        for k in 0..<30 { buffer.insert(frame(k, state: (10..<20).contains(k) ? .lost : .tracked), arrivalTimeMicros: 0) }
        XCTAssertEqual(buffer.expression(atPlayoutOf: captureTime(9)).expression, frame(9).expression)
        let leaving = buffer.expression(atPlayoutOf: captureTime(9) + interval / 2)
        XCTAssertEqual(leaving.source, .easing)
        XCTAssertEqual(leaving.faceWeight, 0.5, accuracy: 1e-4)
        assertExpression(leaving.expression, scaled(frame(9).expression, 0.5), accuracy: 1e-4, "within one frame interval")
        let gone = buffer.expression(atPlayoutOf: captureTime(10))
        XCTAssertEqual(gone.expression, .neutral)
        XCTAssertEqual(gone.faceWeight, 0)
        for k in [12, 15, 18] {
            let none = buffer.expression(atPlayoutOf: captureTime(k) + 5_000)
            XCTAssertEqual(none.expression, .neutral)
            XCTAssertEqual(none.source, .neutral)
        }
        let returning = buffer.expression(atPlayoutOf: captureTime(19) + interval / 2)
        XCTAssertEqual(returning.faceWeight, 0.5, accuracy: 1e-4)
        XCTAssertEqual(returning.expression[.jawOpen], frame(20).expression[.jawOpen] / 2, accuracy: 1e-4)
        XCTAssertEqual(buffer.expression(atPlayoutOf: captureTime(20)).expression, frame(20).expression)
        XCTAssertEqual(buffer.statistics.gapsInterpolated, 0)
    }

    func testASparseLostFrameIsReachedWithinTheLostEase() {
        var buffer = ExpressionJitterBuffer()
        buffer.insert(frame(0), arrivalTimeMicros: 0)
        buffer.insert(ExpressionFrame(sequence: 1, captureTimeMicros: captureTime(0) + 300_000, state: .lost), arrivalTimeMicros: 0)
        let t0 = captureTime(0)
        XCTAssertEqual(buffer.expression(atPlayoutOf: t0 + 150_000).expression, frame(0).expression, "held until 100 ms before")
        let easing = buffer.expression(atPlayoutOf: t0 + 250_000)
        XCTAssertEqual(easing.faceWeight, 0.5, accuracy: 1e-6)
        assertExpression(easing.expression, scaled(frame(0).expression, 0.5))
        XCTAssertEqual(buffer.expression(atPlayoutOf: t0 + 300_000).expression, .neutral)
        XCTAssertEqual(buffer.expression(atPlayoutOf: t0 + 2_000_000).expression, .neutral)
    }

    func testNothingReceivedDrawsNeutral() {
        var buffer = ExpressionJitterBuffer()
        let audio = buffer.expression(atPlayoutOf: 1_000_000)
        XCTAssertEqual(audio.expression, .neutral)
        XCTAssertEqual(audio.source, .neutral)
        XCTAssertEqual(audio.faceWeight, 0)
        var silent = ExpressionJitterBuffer()
        XCTAssertEqual(silent.expression(atLocalTime: 5_000_000).expression, .neutral)
    }

    // MARK: Late, duplicate, wrap-around, capacity

    func testFramesOlderThanTheRenderedTimeAreDroppedAndCounted() {
        var buffer = ExpressionJitterBuffer()
        var control = ExpressionJitterBuffer()
        for k in 0...10 where k != 4 {
            buffer.insert(frame(k), arrivalTimeMicros: 0)
            control.insert(frame(k), arrivalTimeMicros: 0)
        }
        let now = captureTime(6) + 10_000
        XCTAssertEqual(buffer.expression(atPlayoutOf: now), control.expression(atPlayoutOf: now))
        XCTAssertEqual(buffer.insert(frame(4), arrivalTimeMicros: 1), .late)
        XCTAssertEqual(buffer.insert(frame(6), arrivalTimeMicros: 1), .duplicate)
        XCTAssertEqual(buffer.insert(ExpressionFrame(sequence: 99, captureTimeMicros: now - 1, state: .tracked), arrivalTimeMicros: 1), .late)
        XCTAssertEqual(buffer.insert(frame(11), arrivalTimeMicros: 1), .accepted)
        control.insert(frame(11), arrivalTimeMicros: 1)
        let stats = buffer.statistics
        XCTAssertEqual(stats.lateDropped, 2)
        XCTAssertEqual(stats.duplicates, 1)
        for t in [now, now + 5_000, captureTime(8), captureTime(11)] {
            XCTAssertEqual(buffer.expression(atPlayoutOf: t), control.expression(atPlayoutOf: t), "late frames change nothing")
        }
    }

    func testRenderedTimeNeverRunsBackwards() {
        var buffer = ExpressionJitterBuffer()
        for k in 0..<10 { buffer.insert(frame(k), arrivalTimeMicros: 0) }
        let forward = buffer.expression(atPlayoutOf: captureTime(5))
        let jitteredBack = buffer.expression(atPlayoutOf: captureTime(5) - 3_000)
        XCTAssertEqual(jitteredBack.mediaTimeMicros, captureTime(5), "a small step back is clamped")
        XCTAssertEqual(jitteredBack.expression, forward.expression)
    }

    func testSequenceNumbersWrapAround() {
        let base = UInt32.max - 9 // frames 0…9 have sequences max−9…max, frame 10 has 0, frame 11 has 1
        var inOrder = ExpressionJitterBuffer()
        var shuffled = ExpressionJitterBuffer()
        var rng = SplitMix64(seed: 11)
        let indices = Array(0..<30).filter { $0 != 10 && $0 != 20 } // sequences 0 and 10 are lost
        for k in indices { inOrder.insert(frame(k, sequenceBase: base), arrivalTimeMicros: 0) }
        for k in indices.shuffled(using: &rng) { shuffled.insert(frame(k, sequenceBase: base), arrivalTimeMicros: 0) }
        XCTAssertEqual(shuffled.insert(frame(9, sequenceBase: base), arrivalTimeMicros: 0), .duplicate, "sequence UInt32.max")
        XCTAssertEqual(shuffled.insert(frame(11, sequenceBase: base), arrivalTimeMicros: 0), .duplicate, "sequence 1")

        var sequencesSeen: [UInt32] = []
        for tick in stride(from: captureTime(0), to: captureTime(29), by: 10_000) {
            let a = inOrder.expression(atPlayoutOf: tick)
            let b = shuffled.expression(atPlayoutOf: tick)
            XCTAssertEqual(a, b)
            XCTAssertTrue(b.source == .interpolated || b.source == .frame, "\(b.source)")
            if let s = b.earlier?.sequence, sequencesSeen.last != s { sequencesSeen.append(s) }
        }
        XCTAssertEqual(sequencesSeen, indices.dropLast().map { base &+ UInt32($0) }, "wrapping sequences in capture order")
        XCTAssertEqual(shuffled.statistics.gapsInterpolated, 2, "max → 1 and 9 → 11 are gaps")
        XCTAssertEqual(inOrder.statistics.gapsInterpolated, 2)
        XCTAssertEqual(shuffled.statistics.duplicates, 2)
    }

    func testCaptureTimeWrappingAt2To48IsFollowed() {
        // The wire sends capture times modulo 2^48; a sender clock near the top keeps going at 0.
        let top: UInt64 = 1 << 48
        var buffer = ExpressionJitterBuffer()
        let times = (0..<20).map { (top - 300_000 + UInt64($0) * interval) % top }
        for (k, t) in times.enumerated() { buffer.insert(frame(k, time: t), arrivalTimeMicros: 0) }
        for k in 0..<19 {
            let midway = (times[k] + interval / 2) % top
            let shown = buffer.expression(atPlayoutOf: midway)
            XCTAssertEqual(shown.source, .interpolated, "frame \(k)")
            XCTAssertEqual(shown.earlier?.sequence, UInt32(k))
            XCTAssertEqual(shown.sourceTimeMicros, midway)
        }
        XCTAssertEqual(buffer.statistics.lateDropped, 0)
        XCTAssertEqual(LipSync.audioLeadMicros(audioMediaTimeMicros: 5, sourceTimeMicros: top - 5), 10)
    }

    func testMemoryStaysBoundedUnderAFloodOfFrames() {
        var rng = SplitMix64(seed: 3)
        // One buffer follows audio, the other plays out on its own: both see the same flood.
        var audioBuffer = ExpressionJitterBuffer(configuration: .init(capacity: 64))
        var localBuffer = ExpressionJitterBuffer(configuration: .init(capacity: 64))
        var audio: UInt64 = 50_000_000
        var local: UInt64 = 1_000_000
        var outcomes: [ExpressionJitterBuffer.InsertOutcome: Int] = [:]
        for i in 0..<20_000 {
            let time: UInt64
            switch i % 4 {
            case 0: time = UInt64.random(in: 0 ... .max, using: &rng) // garbage from anywhere
            case 1: time = audio + UInt64.random(in: 0...10_000_000, using: &rng) // far ahead
            default: time = audio - 1_000_000 + UInt64.random(in: 0...2_000_000, using: &rng)
            }
            let f = ExpressionFrame(sequence: UInt32.random(in: 0 ... .max, using: &rng), captureTimeMicros: time,
                                    state: Bool.random(using: &rng) ? .tracked : .lost,
                                    expression: content(at: time, index: i))
            local += UInt64.random(in: 0...2_000, using: &rng)
            outcomes[audioBuffer.insert(f, arrivalTimeMicros: local), default: 0] += 1
            localBuffer.insert(f, arrivalTimeMicros: local)
            XCTAssertLessThanOrEqual(audioBuffer.statistics.bufferedFrames, 64)
            XCTAssertLessThanOrEqual(localBuffer.statistics.bufferedFrames, 64)
            if i % 7 == 0 {
                audio += UInt64.random(in: 0...40_000, using: &rng)
                for shown in [audioBuffer.expression(atPlayoutOf: audio), localBuffer.expression(atLocalTime: local)] {
                    XCTAssertTrue(shown.expression.coefficients.allSatisfy { $0 >= 0 && $0 <= 1 })
                    XCTAssertTrue(shown.faceWeight >= 0 && shown.faceWeight <= 1)
                }
            }
        }
        let stats = audioBuffer.statistics
        XCTAssertEqual(stats.framesReceived, 20_000)
        XCTAssertEqual(stats.duplicates, outcomes[.duplicate, default: 0])
        XCTAssertEqual(stats.lateDropped, outcomes[.late, default: 0])
        XCTAssertEqual(outcomes.values.reduce(0, +), 20_000)
        XCTAssertGreaterThan(stats.overflowDropped, 1_000, "the flood did overflow the buffer")
        XCTAssertGreaterThan(stats.lateDropped, 1_000)
        for delay in [stats.targetDelayMicros, localBuffer.statistics.targetDelayMicros, localBuffer.statistics.currentDelayMicros] {
            XCTAssertGreaterThanOrEqual(delay, 40_000)
            XCTAssertLessThanOrEqual(delay, 200_000)
        }
    }

    func testABacklogAfterAStallIsSkippedNotReplayed() {
        var buffer = ExpressionJitterBuffer()
        let latency: UInt64 = 150_000
        var arrivals: [Arrival] = []
        for k in 0..<120 {
            let f = frame(k)
            // Frames 30…59 are stuck in the network until frame 60 goes out, then arrive together.
            let local = (30..<60).contains(k) ? captureTime(60) + clockOffset + 40_000 : f.captureTimeMicros + clockOffset + 40_000
            arrivals.append(Arrival(frame: f, local: local))
        }
        let ticks = renderTicks(from: captureTime(0) + clockOffset + latency, count: 110)
        let shown = play(arrivals, into: &buffer, audioLatency: latency, ticks: ticks)
        var tooLate = 0
        for (local, audio, playout) in shown {
            let stuck = (captureTime(29) ..< captureTime(60) + 40_000 - latency).contains(audio)
            if local >= captureTime(60) + clockOffset + 40_000 {
                // Once the backlog is in, the picture is the moment being heard, never the backlog's start.
                XCTAssertEqual(playout.source, .interpolated)
                XCTAssertEqual(playout.sourceTimeMicros, audio)
                XCTAssertEqual(shownTimeOffset(playout.expression, from: audio), 0, accuracy: 5)
            } else if stuck {
                XCTAssertNotEqual(playout.source, .interpolated, "nothing after frame 29 has arrived")
                tooLate += 1
            }
        }
        XCTAssertGreaterThan(tooLate, 10)
        // Everything in the backlog captured before the time rendered when it arrived was dropped.
        let backlogArrival = captureTime(60) + clockOffset + 40_000
        let renderedBeforeBacklog = shown.filter { $0.local < backlogArrival }.map(\.audio).max() ?? 0
        let dropped = (30..<60).filter { captureTime($0) < renderedBeforeBacklog }.count
        XCTAssertEqual(buffer.statistics.lateDropped, dropped)
        XCTAssertGreaterThan(dropped, 20)
    }

    // MARK: Lip-sync

    /// A sender at 30 fps, per-frame network delay `minimumDelay + jitter`, optional loss.
    private func stream(frames: Int, seed: UInt64, minimumDelay: UInt64 = 20_000, jitter: ClosedRange<UInt64> = 0...130_000,
                        loss: Double = 0) -> [Arrival] {
        var rng = SplitMix64(seed: seed)
        var arrivals: [Arrival] = []
        for k in 0..<frames {
            let delay = minimumDelay + UInt64.random(in: jitter, using: &rng)
            if Double.random(in: 0..<1, using: &rng) < loss { continue }
            arrivals.append(Arrival(frame: frame(k), local: captureTime(k) + clockOffset + delay))
        }
        return arrivals
    }

    func testEveryRenderTickIsWithinTheLipSyncWindow() {
        // Network delay 20…150 ms, uniformly jittered (so frames overtake each other); the audio
        // pipeline plays sender media time m at local time m + offset + 190 ms. Each tick's picture
        // stays on screen for one render interval (33 ms) while the audio moves on.
        let audioLatency: UInt64 = 190_000
        let arrivals = stream(frames: 600, seed: 21)
        for renderLead: UInt64 in [0, 16_667] {
            var buffer = ExpressionJitterBuffer()
            let ticks = renderTicks(from: captureTime(0) + clockOffset + audioLatency, count: 590, phase: 7_777)
            let shown = play(arrivals, into: &buffer, audioLatency: audioLatency, ticks: ticks, renderLead: renderLead)

            var leads: [Int64] = []
            for (local, audio, playout) in shown {
                guard let source = playout.sourceTimeMicros else { return XCTFail("nothing drawn at \(local)") }
                XCTAssertTrue(playout.source == .interpolated || playout.source == .frame, "\(playout.source) at \(local)")
                // The call layer's measure: render time minus the local time the audio of that capture time plays.
                let audioOfSourcePlaysAt = source + clockOffset + audioLatency
                let lead = LipSync.audioLeadMicros(renderTimeMicros: local, audioPlayoutTimeMicros: audioOfSourcePlaysAt)
                XCTAssertEqual(lead, LipSync.audioLeadMicros(audioMediaTimeMicros: audio, sourceTimeMicros: source))
                XCTAssertEqual(lead, -Int64(renderLead), "the picture shows the moment asked for")
                for heard in [lead, lead + 33_333] { // when the picture appears, and just before it is replaced
                    XCTAssertTrue(LipSync.isAcceptable(audioLeadMicros: heard), "lead \(heard) µs at \(local)")
                    leads.append(heard)
                }
                // Each frame used, on its own, is within the window too.
                for used in [playout.earlier, playout.later].compactMap({ $0 }) {
                    let frameLead = LipSync.audioLeadMicros(audioMediaTimeMicros: audio, sourceTimeMicros: used.captureTimeMicros)
                    XCTAssertTrue(LipSync.isAcceptable(audioLeadMicros: frameLead), "frame \(used.sequence) lead \(frameLead) µs")
                    XCTAssertLessThanOrEqual((frameLead + Int64(renderLead)).magnitude, interval)
                }
                // And the picture itself shows that moment (read from the drawn yaw).
                XCTAssertEqual(shownTimeOffset(playout.expression, from: audio + renderLead), 0, accuracy: 20, "at \(local)")
            }
            print("Lip-sync, 20–150 ms network, audio 190 ms behind capture, asking \(renderLead / 1000) ms ahead: audio lead \(Double(leads.min() ?? 0) / 1000)…\(Double(leads.max() ?? 0) / 1000) ms while each picture is shown")
            let stats = buffer.statistics
            XCTAssertEqual(stats.lateDropped, 0)
            // The estimator asks for no more delay than the audio has: fastest path (20 ms) + target ≤ 190 ms.
            XCTAssertLessThanOrEqual(20_000 + stats.targetDelayMicros + renderLead, audioLatency + 16_667)
        }
    }

    func testLipSyncHoldsUnderLossBecauseGapsAreInterpolated() {
        // 10 % loss. Where the frame after a gap has arrived, the gap is interpolated and the picture
        // is exactly in sync; where it has not (two or more losses in a row and the next frame still
        // in flight), the last frame is held — concealment, counted apart and kept rare.
        let audioLatency: UInt64 = 190_000
        let arrivals = stream(frames: 600, seed: 22, loss: 0.1)
        var buffer = ExpressionJitterBuffer()
        let ticks = renderTicks(from: captureTime(0) + clockOffset + audioLatency, count: 590)
        let shown = play(arrivals, into: &buffer, audioLatency: audioLatency, ticks: ticks)
        var concealed = 0
        for (local, audio, playout) in shown {
            switch playout.source {
            case .frame, .interpolated:
                XCTAssertEqual(playout.sourceTimeMicros, audio, "at \(local)")
                XCTAssertEqual(shownTimeOffset(playout.expression, from: audio), 0, accuracy: 20)
            case .held:
                concealed += 1
                let age = audio - (playout.earlier?.captureTimeMicros ?? 0)
                XCTAssertLessThan(age, 4 * interval, "a held frame is only as old as the losses in a row")
            case .easing, .neutral:
                concealed += 1
                XCTAssertEqual(local, ticks[0], "only before the first frame, if it was lost")
            }
        }
        XCTAssertGreaterThan(buffer.statistics.gapsInterpolated, 30)
        XCTAssertLessThan(Double(concealed) / Double(shown.count), 0.02)
        print("Lip-sync under 10 % loss: \(buffer.statistics.gapsInterpolated) gaps interpolated, \(concealed) of \(shown.count) ticks concealed by holding")
    }

    func testTheLipSyncCheckCatchesAudioThatOutrunsTheFrames() {
        // Audio only 60 ms behind capture while frames take up to 150 ms: pictures must lag.
        let audioLatency: UInt64 = 60_000
        let arrivals = stream(frames: 300, seed: 23)
        var buffer = ExpressionJitterBuffer()
        let ticks = renderTicks(from: captureTime(0) + clockOffset + audioLatency, count: 290)
        let shown = play(arrivals, into: &buffer, audioLatency: audioLatency, ticks: ticks)
        let outside = shown.filter { tick in
            guard let source = tick.playout.sourceTimeMicros else { return true }
            return !LipSync.isAcceptable(audioLeadMicros: LipSync.audioLeadMicros(audioMediaTimeMicros: tick.audio, sourceTimeMicros: source) + 33_333)
        }
        XCTAssertGreaterThan(outside.count, 10)
        XCTAssertGreaterThan(buffer.statistics.lateDropped, 50)
        XCTAssertGreaterThan(20_000 + buffer.statistics.targetDelayMicros, audioLatency, "the statistics say the audio needs more delay")
    }

    // MARK: Without audio: adaptive delay

    func testAdaptiveDelayConvergesForAJitteryStreamAndRelaxesWhenItCalms() {
        var rng = SplitMix64(seed: 31)
        var buffer = ExpressionJitterBuffer()
        var arrivals: [Arrival] = []
        // 10 s with 0–100 ms of jitter, then 10 s with 0–5 ms.
        for k in 0..<600 {
            let jitter = k < 300 ? UInt64.random(in: 0...100_000, using: &rng) : UInt64.random(in: 0...5_000, using: &rng)
            arrivals.append(Arrival(frame: frame(k), local: captureTime(k) + clockOffset + 20_000 + jitter))
        }
        arrivals.sort { $0.local < $1.local }
        var next = 0
        var previous: (local: UInt64, media: UInt64)?
        var lateInJitteryPhase = 0, framesInJitteryPhase = 0, checkedJitteryPhase = 0
        let start = captureTime(0) + clockOffset
        for tick in stride(from: start, to: start + 20_000_000, by: 16_667) { // 60 Hz display
            while next < arrivals.count, arrivals[next].local <= tick {
                let outcome = buffer.insert(arrivals[next].frame, arrivalTimeMicros: arrivals[next].local)
                let k = Int(arrivals[next].frame.sequence)
                if (60..<300).contains(k) {
                    framesInJitteryPhase += 1
                    if outcome == .late { lateInJitteryPhase += 1 }
                }
                next += 1
            }
            let shown = buffer.expression(atLocalTime: tick)
            let stats = buffer.statistics
            if next > 0 {
                XCTAssertGreaterThanOrEqual(stats.currentDelayMicros, 40_000)
                XCTAssertLessThanOrEqual(stats.currentDelayMicros, 200_000)
            }
            if let p = previous, next > 1 {
                let dLocal = Double(tick - p.local)
                let dMedia = Double(shown.mediaTimeMicros) - Double(p.media)
                XCTAssertGreaterThanOrEqual(dMedia, 0.899 * dLocal - 2, "playout never jumps back or crawls at \(tick)")
                XCTAssertLessThanOrEqual(dMedia, 1.101 * dLocal + 2, "playout never jumps ahead at \(tick)")
            }
            if next > 0 { previous = (tick, shown.mediaTimeMicros) }

            if (9_000_000..<9_016_667).contains(tick - start) {
                checkedJitteryPhase += 1
                // p95 of uniform 0–100 ms is 95 ms, plus one 33 ms interval.
                XCTAssertEqual(Double(stats.targetDelayMicros), 128_000, accuracy: 12_000, "jittery target")
                XCTAssertEqual(Double(stats.currentDelayMicros), Double(stats.targetDelayMicros), accuracy: 3_000, "converged")
                XCTAssertEqual(shown.source, .interpolated)
            }
        }
        XCTAssertEqual(checkedJitteryPhase, 1)
        let stats = buffer.statistics
        XCTAssertEqual(stats.targetDelayMicros, 40_000, "calm stream: p95 (≤ 5 ms) + 33 ms is clamped up to 40 ms")
        XCTAssertEqual(Double(stats.currentDelayMicros), 40_000, accuracy: 500)
        XCTAssertLessThan(Double(lateInJitteryPhase) / Double(framesInJitteryPhase), 0.05)
        print("Adaptive delay: \(lateInJitteryPhase) of \(framesInJitteryPhase) frames late with 0–100 ms jitter")
    }

    func testAdaptiveDelayIsClampedToItsMaximum() {
        var rng = SplitMix64(seed: 32)
        var buffer = ExpressionJitterBuffer()
        for k in 0..<200 {
            buffer.insert(frame(k), arrivalTimeMicros: captureTime(k) + clockOffset + UInt64.random(in: 0...800_000, using: &rng))
        }
        XCTAssertEqual(buffer.statistics.targetDelayMicros, 200_000)
    }

    func testLocalModeDrawsFramesOneDelayAfterTheirFastestArrival() {
        // No jitter at all: every frame takes exactly 50 ms. The delay is the 40 ms minimum, so the
        // frame captured at c is drawn at local c + offset + 50 ms + 40 ms.
        var buffer = ExpressionJitterBuffer()
        for k in 0..<30 { buffer.insert(frame(k), arrivalTimeMicros: captureTime(k) + clockOffset + 50_000) }
        let shown = buffer.expression(atLocalTime: captureTime(20) + clockOffset + 90_000)
        XCTAssertEqual(shown.mediaTimeMicros, captureTime(20))
        XCTAssertEqual(shown.expression, frame(20).expression)
        XCTAssertEqual(buffer.statistics.currentDelayMicros, 40_000)
    }

    // MARK: Restarted streams

    func testARestartedSenderClockIsFollowedInAudioMode() {
        var buffer = ExpressionJitterBuffer()
        for k in 0..<10 { buffer.insert(frame(k), arrivalTimeMicros: 0) }
        _ = buffer.expression(atPlayoutOf: captureTime(8))
        // The peer reconnects: its clock and sequence numbers start again near zero.
        let restarted: [ExpressionFrame] = (0..<10).map { k in
            let time: UInt64 = 1_000_000 + UInt64(k) * interval
            return ExpressionFrame(sequence: UInt32(k), captureTimeMicros: time, state: .tracked,
                                   expression: content(at: time, index: k))
        }
        for f in restarted { buffer.insert(f, arrivalTimeMicros: 1) } // late for the old timeline
        let back = buffer.expression(atPlayoutOf: 1_000_000 + 2 * interval)
        for f in restarted { buffer.insert(f, arrivalTimeMicros: 2) }
        XCTAssertEqual(back.mediaTimeMicros, 1_000_000 + 2 * interval, "a big step back is a restart, not jitter")
        XCTAssertEqual(buffer.expression(atPlayoutOf: 1_000_000 + 4 * interval).expression, restarted[4].expression)
    }

    func testARestartedSenderClockIsFollowedInLocalMode() {
        var buffer = ExpressionJitterBuffer()
        var local: UInt64 = 10_000_000
        for k in 0..<60 {
            local = captureTime(k) + clockOffset + 30_000
            buffer.insert(frame(k), arrivalTimeMicros: local)
            _ = buffer.expression(atLocalTime: local)
        }
        // The sender's clock jumps an hour ahead.
        let jump: UInt64 = 3_600_000_000
        var last: ExpressionJitterBuffer.Playout?
        for k in 60..<75 {
            let t = captureTime(k) + jump
            local = captureTime(k) + clockOffset + 30_000
            buffer.insert(frame(k, time: t), arrivalTimeMicros: local)
            last = buffer.expression(atLocalTime: local + 40_000)
        }
        XCTAssertEqual(last?.faceWeight, 1)
        XCTAssertEqual(Double(last?.sourceTimeMicros ?? 0), Double(captureTime(74) + jump), accuracy: 30_000,
                       "playing the new timeline one delay behind its arrivals")
    }

    // MARK: Configuration

    func testNonsenseConfigurationIsRepaired() {
        let c = ExpressionJitterBuffer(configuration: .init(capacity: -3, minimumDelayMicros: 300_000, maximumDelayMicros: 10,
                                                           delayPercentile: .nan, jitterWindowMaximumSamples: 0,
                                                           delayAdaptationRate: -1)).configuration
        XCTAssertEqual(c.capacity, 2)
        XCTAssertEqual(c.maximumDelayMicros, 300_000)
        XCTAssertEqual(c.delayPercentile, 0.95)
        XCTAssertEqual(c.jitterWindowMaximumSamples, 8)
        XCTAssertEqual(c.delayAdaptationRate, 0.1)
    }

    func testLipSyncWindowBounds() {
        XCTAssertTrue(LipSync.isAcceptable(audioLeadMicros: 45_000))
        XCTAssertFalse(LipSync.isAcceptable(audioLeadMicros: 45_001))
        XCTAssertTrue(LipSync.isAcceptable(audioLeadMicros: -125_000))
        XCTAssertFalse(LipSync.isAcceptable(audioLeadMicros: -125_001))
        XCTAssertEqual(LipSync.audioLeadMicros(renderTimeMicros: 1_000, audioPlayoutTimeMicros: 1_500), -500)
    }
}
