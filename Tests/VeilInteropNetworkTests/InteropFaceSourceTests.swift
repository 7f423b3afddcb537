import Foundation
import Synchronization
import VeilCore
import VeilDatagram
import VeilInterop
import VeilInteropNetwork
import VeilTestSupport
import XCTest

/// `InteropFaceSource` over real UDP on loopback, without a call: VMC from python-osc (an
/// implementation Veil did not write), Veil → VMC → Veil and Veil → Live Link → Veil within
/// quantisation, one sender accepted, one log line per kind of bad input, lost frames when the
/// sender stops, and a flood that neither stalls the source nor grows its memory.
final class InteropFaceSourceTests: XCTestCase {
    /// What a running source handed over and logged.
    final class Collector: Sendable {
        let frames = Mutex<[(frame: ExpressionFrame, wall: Double)]>([])
        let log = Mutex<[String]>([])

        var tracked: [ExpressionFrame] { frames.withLock { $0.map(\.frame).filter { $0.state == .tracked } } }
        var all: [ExpressionFrame] { frames.withLock { $0.map(\.frame) } }
    }

    static let clock: @Sendable () -> UInt64 = { DispatchTime.now().uptimeNanoseconds / 1_000 }

    /// A source for `kind` on a free port (accepting `host`, any when empty), at `privacy`, started.
    func start(_ kind: InteropEndpoint.Kind, host: String = "", privacy: PrivacyLevel = .off,
               configure: (inout InteropFaceSource.Configuration) -> Void = { _ in }) throws -> (InteropFaceSource, Collector) {
        let collector = Collector()
        var configuration = InteropFaceSource.Configuration(endpoint: InteropEndpoint(kind: kind, host: host, port: 0))
        configuration.privacy = privacy
        configuration.log = { line in collector.log.withLock { $0.append(line) } }
        configure(&configuration)
        let source = try InteropFaceSource(configuration: configuration, clock: Self.clock)
        source.start { frame in
            let wall = Double(DispatchTime.now().uptimeNanoseconds) / 1e9
            collector.frames.withLock { $0.append((frame, wall)) }
        }
        addTeardownBlock { source.stop() }
        return (source, collector)
    }

    /// Waits (at most `seconds`, generous for a busy machine) until `condition` holds.
    @discardableResult
    func waitUntil(_ seconds: Double = 10, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while !condition() {
            if Date() > deadline { return false }
            Thread.sleep(forTimeInterval: 0.01)
        }
        return true
    }

    static func frame(_ seed: Int, gaze: Bool = true) -> ExpressionFrame {
        var expression = TestExpressions.random(seed: UInt64(seed))
        if !gaze { expression.gaze = nil }
        return ExpressionFrame(sequence: UInt32(seed), captureTimeMicros: UInt64(seed) * 33_333, state: .tracked, expression: expression)
    }

    /// Each received tracked frame is one that was sent, every coefficient exact, head and gaze
    /// within `radians`; returns how many of the sent arrived.
    func assertEachReceivedWasSent(_ received: [ExpressionFrame], _ sent: [ExpressionFrame], radians: Float = 1e-4,
                                   file: StaticString = #filePath, line: UInt = #line) -> Int {
        var matched = Set<Int>()
        for frame in received {
            guard let index = sent.firstIndex(where: { $0.expression.coefficients == frame.expression.coefficients }) else {
                XCTFail("a frame that was not sent: \(frame.expression.namedCoefficients)", file: file, line: line)
                continue
            }
            matched.insert(index)
            let want = sent[index].expression, got = frame.expression
            let degrees = radians * 180 / .pi
            XCTAssertEqual(got.headPose.yaw, want.headPose.yaw, accuracy: degrees, file: file, line: line)
            XCTAssertEqual(got.headPose.pitch, want.headPose.pitch, accuracy: degrees, file: file, line: line)
            XCTAssertEqual(got.headPose.roll, want.headPose.roll, accuracy: degrees, file: file, line: line)
            if let wantGaze = want.gaze {
                let gaze = try? XCTUnwrap(got.gaze, file: file, line: line)
                let tolerance = radians / ExpressionUpdate.gazeRange
                XCTAssertEqual(gaze?.x ?? .nan, wantGaze.x, accuracy: tolerance, file: file, line: line)
                XCTAssertEqual(gaze?.y ?? .nan, wantGaze.y, accuracy: tolerance, file: file, line: line)
            }
        }
        return matched.count
    }

    // MARK: Round trips and an independent sender

    func testVeilToVMCToVeilKeepsEveryCoefficientAndAngle() throws {
        try roundTrip(.vmc)
    }

    func testVeilToLiveLinkToVeilKeepsEveryCoefficientAndAngle() throws {
        try roundTrip(.liveLink)
    }

    private func roundTrip(_ kind: InteropEndpoint.Kind) throws {
        let (source, collector) = try start(kind)
        let sender = try InteropSender(endpoint: InteropEndpoint(kind: kind, host: "127.0.0.1", port: source.localAddress.port))
        let sent = (0..<20).map { Self.frame($0) }
        for frame in sent {
            sender.send(frame)
            Thread.sleep(forTimeInterval: 0.04)
        }
        XCTAssertTrue(waitUntil { source.statistics.expressions == sent.count }, "\(source.statistics)")
        XCTAssertTrue(waitUntil { collector.tracked.last?.expression.coefficients == sent.last?.expression.coefficients })
        let received = collector.tracked
        let arrived = assertEachReceivedWasSent(received, sent)
        print("\(kind.displayName): \(received.count) frames from \(sent.count) sent, \(arrived) distinct")
        XCTAssertGreaterThanOrEqual(arrived, sent.count / 2, "most frames come through one by one at 25 a second")
        XCTAssertEqual(source.statistics.dropped, [:])
        XCTAssertEqual(source.statistics.source, "127.0.0.1")
        // Stamped at arrival on the source's clock, in order.
        let times = collector.all.map(\.captureTimeMicros)
        XCTAssertEqual(times, times.sorted())
    }

    func testVMCFromPythonOSC() throws {
        let (source, collector) = try start(.vmc)
        let sent = (0..<12).map { Self.frame(100 + $0) }
        let request: [[String: Any]] = sent.map { frame in
            let update = ExpressionUpdate(frame.expression, time: Double(frame.captureTimeMicros) / 1e6)
            let head = update.head!.unityQuaternion, eye = update.leftEye!.unityQuaternion
            return ["blend": update.coefficients.mapValues(Double.init), "head": [head.x, head.y, head.z, head.w].map(Double.init),
                    "eyes": [eye.x, eye.y, eye.z, eye.w].map(Double.init), "time": Double(frame.captureTimeMicros) / 1e6]
        }
        let output = try PythonOSCPeer.run(["send", "127.0.0.1", "\(source.localAddress.port)", "0.04"],
                                       input: try JSONSerialization.data(withJSONObject: request))
        let summary = try XCTUnwrap(JSONSerialization.jsonObject(with: output) as? [String: Any])
        XCTAssertEqual(summary["sent"] as? Int, sent.count)
        XCTAssertTrue(waitUntil { source.statistics.expressions == sent.count }, "\(source.statistics)")
        XCTAssertTrue(waitUntil { collector.tracked.last?.expression.coefficients == sent.last?.expression.coefficients })
        let received = collector.tracked
        for frame in received {
            XCTAssertEqual(frame.expression.coefficients.count, 52)
            XCTAssertTrue(frame.expression.coefficients.allSatisfy { (0...1).contains($0) })
        }
        // python-osc sends doubles as float32 too: coefficients exact, angles within 1e-4 rad.
        XCTAssertGreaterThanOrEqual(assertEachReceivedWasSent(received, sent), sent.count / 2)
        // The root is read and ignored; python-osc's frames hold nothing Veil does not read.
        XCTAssertEqual(source.statistics.dropped, [:])
    }

    // MARK: Senders

    func testANamedSenderIsTheOnlyOneRead() throws {
        guard let ipv6 = try? DatagramSocket(bindingTo: "::1") else { throw XCTSkip("no IPv6 loopback here") }
        _ = ipv6
        let (source, collector) = try start(.liveLink, host: "127.0.0.1")
        let port = source.localAddress.port
        let fromV4 = try DatagramSocket(connectingTo: "127.0.0.1", port: port), fromV6 = try DatagramSocket(connectingTo: "::1", port: port)
        let packet = try LiveLinkFacePacket(deviceID: "d", subjectName: "s", frameTime: .init(seconds: 0), update: ExpressionUpdate(Self.frame(1).expression)).encoded()
        for _ in 0..<5 {
            try fromV6.send(packet)
            try fromV4.send(packet)
        }
        XCTAssertTrue(waitUntil { source.statistics.datagrams == 10 }, "\(source.statistics)")
        let statistics = source.statistics
        XCTAssertEqual(statistics.fromOtherSources, 5)
        XCTAssertEqual(statistics.expressions, 5)
        XCTAssertEqual(statistics.source, "127.0.0.1")
        let lines = collector.log.withLock { $0 }
        XCTAssertEqual(lines.filter { $0.contains("ignoring datagrams from ::1") }.count, 1, "\(lines)")
        XCTAssertEqual(lines.count, 2, "one line for the sender, one for the others: \(lines)")
    }

    func testWithoutANameTheFirstSenderIsKept() throws {
        let (source, collector) = try start(.liveLink)
        let port = source.localAddress.port
        let first = try DatagramSocket(connectingTo: "127.0.0.1", port: port)
        let packet = try LiveLinkFacePacket(deviceID: "d", subjectName: "s", frameTime: .init(seconds: 0), update: ExpressionUpdate(Self.frame(2).expression)).encoded()
        try first.send(packet)
        XCTAssertTrue(waitUntil { source.statistics.expressions == 1 })
        // The same host from another port is the same sender; another host is not.
        try DatagramSocket(connectingTo: "127.0.0.1", port: port).send(packet)
        var others = 0
        if let other = try? DatagramSocket(connectingTo: "::1", port: port) {
            for _ in 0..<5 { try other.send(packet) }
            others = 5
        }
        XCTAssertTrue(waitUntil { source.statistics.datagrams == 2 + others }, "\(source.statistics)")
        XCTAssertEqual(source.statistics.expressions, 2)
        XCTAssertEqual(source.statistics.fromOtherSources, others)
        let lines = collector.log.withLock { $0 }
        XCTAssertEqual(lines.first, "Live Link Face: taking expressions from 127.0.0.1, the first sender; datagrams from other addresses are ignored")
        XCTAssertEqual(lines.count, others > 0 ? 2 : 1, "\(lines)")
    }

    // MARK: Bad input

    func testBadDatagramsAreCountedWithOneLogLinePerKind() throws {
        let (source, collector) = try start(.liveLink)
        let socket = try DatagramSocket(connectingTo: "127.0.0.1", port: source.localAddress.port)
        let good = try LiveLinkFacePacket(deviceID: "phone", subjectName: "s", frameTime: .init(seconds: 0),
                                          update: ExpressionUpdate(Self.frame(3).expression)).encoded()
        var version = good; version[0] = 9
        var count = good; count[good.count - 61 * 4 - 1] = 52
        var values = good
        // NaN and out-of-range values are clamped, not refused.
        values.replaceSubrange((good.count - 61 * 4)..<(good.count - 60 * 4), with: [0x7f, 0xc0, 0, 0])
        values.replaceSubrange((good.count - 60 * 4)..<(good.count - 59 * 4), with: [0x41, 0x20, 0, 0])
        let garbage: [(String, [UInt8])] = [("truncated", Array(good.prefix(30))), ("unknownVersion", version), ("wrongCount", count),
                                            ("oversized", good + [UInt8](repeating: 1, count: 2_000)), ("malformed", good + [0, 0])]
        try socket.send(good)
        XCTAssertTrue(waitUntil { source.statistics.expressions == 1 })
        // A round at a time, each read before the next (a socket's queue holds only so many).
        for round in 0..<40 {
            for (_, bytes) in garbage { _ = try socket.send(bytes) }
            XCTAssertTrue(waitUntil { source.statistics.datagrams == 1 + (round + 1) * garbage.count }, "\(source.statistics)")
        }
        try socket.send(values)
        XCTAssertTrue(waitUntil { source.statistics.datagrams == 2 + 40 * garbage.count }, "\(source.statistics)")
        XCTAssertEqual(source.statistics.dropped, Dictionary(uniqueKeysWithValues: garbage.map { ($0.0, 40) }))
        XCTAssertEqual(source.statistics.expressions, 2)
        let lines = collector.log.withLock { $0 }
        print(lines.joined(separator: "\n"))
        XCTAssertEqual(lines.count, 1 + garbage.count, "\(lines)")
        for (kind, _) in garbage { XCTAssertEqual(lines.filter { $0.contains("(\(kind):") }.count, 1, "\(kind): \(lines)") }
        XCTAssertTrue(waitUntil { collector.tracked.count == 2 })
        let clamped = try XCTUnwrap(collector.tracked.last).expression
        XCTAssertEqual(clamped[BlendShape.allCases[0]], 0, "NaN is 0")
        XCTAssertEqual(clamped[BlendShape.allCases[1]], 1, "10 is 1")
    }

    // MARK: A sender that stops

    func testASenderThatStopsIsALostFaceUntilItComesBack() throws {
        let (source, collector) = try start(.liveLink)
        let socket = try DatagramSocket(connectingTo: "127.0.0.1", port: source.localAddress.port)
        // Before anything arrives: lost frames, as from a camera that sees no face.
        XCTAssertTrue(waitUntil { collector.all.count >= 3 })
        XCTAssertTrue(collector.all.allSatisfy { $0.state == .lost })
        func sendForAWhile(_ frames: Range<Int>) throws {
            for n in frames {
                try socket.send(try LiveLinkFacePacket(deviceID: "d", subjectName: "s", frameTime: .init(seconds: Double(n) / 30),
                                                       update: ExpressionUpdate(Self.frame(n).expression)).encoded())
                Thread.sleep(forTimeInterval: 1.0 / 30)
            }
        }
        try sendForAWhile(0..<30)
        XCTAssertTrue(waitUntil { source.statistics.expressions == 30 })
        // Stopped: lost frames again, the first 100 ms after the last expression, then 30 a second.
        func afterLastTracked() -> (last: ExpressionFrame, lost: [ExpressionFrame])? {
            let all = collector.all
            guard let index = all.lastIndex(where: { $0.state == .tracked }) else { return nil }
            return (all[index], Array(all[(index + 1)...]))
        }
        XCTAssertTrue(waitUntil { (afterLastTracked()?.lost.count ?? 0) >= 10 })
        let (lastTracked, lost) = try XCTUnwrap(afterLastTracked())
        XCTAssertGreaterThanOrEqual(lost.count, 10)
        XCTAssertGreaterThanOrEqual(lost[0].captureTimeMicros, lastTracked.captureTimeMicros + 100_000)
        // At most 30 lost frames a second: each is due a frame interval after the one before it was
        // due, and goes out when the loop wakes, so a late one is followed by one a little sooner;
        // n frames span at least n − 2 intervals, and a burst would span far less.
        let span = lost[lost.count - 1].captureTimeMicros - lost[0].captureTimeMicros
        XCTAssertGreaterThanOrEqual(span, UInt64(lost.count - 2) * 33_333, "at most 30 lost frames a second: \(lost.count) in \(span) µs")
        // Back: tracked frames again.
        let resumedAt = collector.frames.withLock { $0.count }
        try sendForAWhile(30..<45)
        XCTAssertTrue(waitUntil { collector.all.dropFirst(resumedAt).filter { $0.state == .tracked }.count >= 5 })
        let statistics = source.statistics
        print("lost \(statistics.framesLost), tracked \(statistics.framesTracked) of \(statistics.expressions) expressions")
    }

    // MARK: A flood

    /// 200 000 datagrams, one in ten a valid packet, as fast as the sender goes (at most 30 s):
    /// the source keeps giving frames on time (lost or tracked, never a pause of a second), its
    /// memory stays bounded, and expressions sent after the flood come through.
    func testAFloodNeitherStallsTheSourceNorGrowsItsMemory() throws {
        let (source, collector) = try start(.liveLink)
        let port = source.localAddress.port
        let socket = try DatagramSocket(connectingTo: "127.0.0.1", port: port)
        func packet(jaw: Float) throws -> [UInt8] {
            var expression = VeilCore.Expression()
            expression[.jawOpen] = jaw
            return try LiveLinkFacePacket(deviceID: "d", subjectName: "s", frameTime: .init(seconds: 0), update: ExpressionUpdate(expression)).encoded()
        }
        let valid = try packet(jaw: 0.25)
        var version = valid; version[0] = 5
        let garbage: [[UInt8]] = [Array(valid.prefix(17)), version, valid + [1], [UInt8](repeating: 0xff, count: 1_200), [],
                                  [UInt8](repeating: 0x2f, count: 60_000)]
        XCTAssertTrue(waitUntil { !collector.all.isEmpty })
        let residentBefore = Self.residentBytes()
        var outcomes: [DatagramSocket.SendOutcome: Int] = [:]
        let start = Date()
        var sent = 0
        while sent < 200_000, Date().timeIntervalSince(start) < 30 {
            let bytes = sent % 10 == 0 ? valid : garbage[sent % garbage.count]
            outcomes[try socket.send(bytes), default: 0] += 1
            sent += 1
        }
        let floodSeconds = Date().timeIntervalSince(start)
        let floodEnd = Double(DispatchTime.now().uptimeNanoseconds) / 1e9
        // After the flood: a new expression comes through.
        let after = try packet(jaw: 0.75)
        var cameThrough = false
        let deadline = Date().addingTimeInterval(10)
        while !cameThrough, Date() < deadline {
            try socket.send(after)
            Thread.sleep(forTimeInterval: 1.0 / 30)
            cameThrough = collector.tracked.contains { $0.expression[.jawOpen] == 0.75 }
        }
        XCTAssertTrue(cameThrough, "no expression after the flood: \(source.statistics)")
        let residentAfter = Self.residentBytes()
        let statistics = source.statistics
        let walls = collector.frames.withLock { $0.map(\.wall) }.filter { $0 <= floodEnd }
        let longestPause = zip(walls, walls.dropFirst()).map { $1 - $0 }.max() ?? 0
        print(String(format: "flood: %d datagrams in %.2f s (%@), the source read %d (the kernel dropped the rest): %d expressions, %d tracked and %d lost frames; longest pause between frames %.0f ms; resident memory %+.1f MB",
                     sent, floodSeconds, "\(outcomes)", statistics.datagrams, statistics.expressions, statistics.framesTracked,
                     statistics.framesLost, longestPause * 1000, Double(residentAfter - residentBefore) / 1e6))
        print("dropped by kind: \(statistics.dropped)")
        XCTAssertLessThan(longestPause, 1.0, "the source stalled during the flood")
        XCTAssertGreaterThan(statistics.expressions, 0)
        XCTAssertLessThan(residentAfter - residentBefore, 32_000_000, "memory grew during the flood")
        // One log line per kind, however many came.
        let lines = collector.log.withLock { $0 }
        XCTAssertLessThanOrEqual(lines.count, 1 + garbage.count, "\(lines)")
    }

    /// The process's resident memory (from /proc/self/statm).
    static func residentBytes() -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let fields = text.split(separator: " ")
        return fields.count > 1 ? (Int(fields[1]) ?? 0) * 4_096 : 0
    }
}

