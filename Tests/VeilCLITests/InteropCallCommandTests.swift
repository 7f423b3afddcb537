import Foundation
import Synchronization
import VeilCall
import VeilCore
import VeilDatagram
import VeilInterop
import VeilTestSupport
import XCTest

/// `veil call --send` and `--face`: a call's own frames to a VMC Marionette (python-osc's server)
/// and a Live Link receiver, and a call whose face is a Live Link stream replayed from a file.
final class InteropCallCommandTests: XCTestCase {
    /// Alice calls bob with a video as her camera and sends her frames to python-osc's VMC server
    /// and to a Live Link receiver: each gets every tracked frame that went out on the call, with
    /// ARKit's 52 blendshapes in range.
    func testACallSendsItsFramesToVMCAndLiveLink() throws {
        let work = try CallWorkspace("veil-call-send")
        defer { work.remove() }
        try work.runToEnd(["synth", try VeilResources.file("photos", "takeo.ppm").path, "-o", "face.mp4", "--quiet"])
        let (server, serverURL) = try work.startServer()
        defer { server.terminate(); server.waitUntilExit() }
        let tokens = try work.tokens(["alice", "bob"], room: "r1")

        let marionette = try TrackCommandTests.PythonMarionette()
        defer { marionette.stop() }
        let liveLink = try DatagramSocket(bindingTo: "127.0.0.1")
        // Read as they come (a socket left unread holds only about a hundred datagrams).
        final class Packets: Sendable { let list = Mutex<[LiveLinkFacePacket]>([]), done = Mutex(false), failures = Mutex<[String]>([]) }
        let packets = Packets()
        let reader = Thread {
            while !packets.done.withLock({ $0 }) {
                guard let datagram = try? liveLink.receive(timeout: 0.1) else { continue }
                do { let packet = try LiveLinkFacePacket(decoding: datagram.bytes); packets.list.withLock { $0.append(packet) } } catch {
                    packets.failures.withLock { $0.append("\(error)") }
                }
            }
        }
        reader.start()
        let alice = try work.process(["call", "--server", serverURL, "--room", "r1", "--user", "alice", "--token", tokens[0],
                                      "--video", "face.mp4", "--audio-in", "tone", "--out", "none", "--duration", "7", "--json",
                                      "--send", "vmc://127.0.0.1:\(marionette.port)", "--send", "livelink://127.0.0.1:\(liveLink.localAddress.port)"])
        let bob = try work.process(["call", "--server", serverURL, "--room", "r1", "--user", "bob", "--token", tokens[1],
                                    "--camera", "none", "--audio-in", "none", "--out", "none", "--duration", "7", "--json"])
        let outputs = try CallWorkspace.run([alice, bob]).map(CallWorkspace.events)
        let report = try XCTUnwrap(outputs[0].last { $0["event"] as? String == "report" }, "no report line")
        let destinations = try XCTUnwrap(report["destinations"] as? [[String: Any]], "\(report)")
        func statistics(_ scheme: String) throws -> [String: Any] {
            let destination = try XCTUnwrap(destinations.first { ($0["url"] as? String)?.hasPrefix(scheme) == true }, "\(destinations)")
            return try XCTUnwrap(destination["statistics"] as? [String: Any])
        }
        let vmc = try statistics("vmc://"), live = try statistics("livelink://")
        let cameraFrames = report["cameraFramesSent"] as? Int ?? 0
        let tracked = report["framesTracked"] as? Int ?? 0
        print("alice: \(cameraFrames) camera frames on the call (\(tracked) tracked); VMC \(vmc); Live Link \(live)")
        XCTAssertGreaterThan(vmc["framesSent"] as? Int ?? 0, 60, "too few frames tracked and sent")
        for destination in [vmc, live] {
            // Every frame that went out on the call went to each destination (a lost one as nothing).
            XCTAssertEqual((destination["framesSent"] as? Int ?? 0) + (destination["framesLost"] as? Int ?? 0), cameraFrames)
            XCTAssertEqual(destination["datagramsDropped"] as? Int, 0)
            XCTAssertEqual(destination["datagramsRefused"] as? Int, 0)
            XCTAssertEqual(destination["datagramsFailed"] as? Int, 0)
        }

        // python-osc saw the frames, each with the 52 blendshapes in 0…1 and the head. (UDP may
        // lose some on a busy machine, where the server is not scheduled for a while: its socket
        // holds only so many.)
        let applies = marionette.finish()
        let vmcSent = vmc["framesSent"] as? Int ?? 0
        XCTAssertLessThanOrEqual(applies.count, vmcSent)
        XCTAssertGreaterThan(applies.count, min(vmcSent / 3, 30), "too few frames reached python-osc")
        let names = Set(BlendShape.allCases.map(\.name))
        for (index, apply) in applies.enumerated() {
            let blend = try XCTUnwrap(apply["blend"] as? [String: Double], "frame \(index)")
            XCTAssertEqual(Set(blend.keys), names, "frame \(index)")
            XCTAssertTrue(blend.values.allSatisfy { (0...1).contains($0) }, "frame \(index): \(blend)")
            XCTAssertEqual((apply["bones"] as? [String: [Double]])?["Head"]?.count, 7, "frame \(index)")
        }
        // The Live Link receiver: packets of 52 coefficients in 0…1, capture times rising.
        Thread.sleep(forTimeInterval: 0.3)
        packets.done.withLock { $0 = true }
        while reader.isExecuting { Thread.sleep(forTimeInterval: 0.05) }
        let received = packets.list.withLock { $0 }
        let liveSent = live["framesSent"] as? Int ?? 0
        print("python-osc read \(applies.count) of \(vmcSent) VMC frames; the Live Link receiver \(received.count) of \(liveSent)")
        XCTAssertEqual(packets.failures.withLock { $0 }, [])
        XCTAssertLessThanOrEqual(received.count, liveSent)
        XCTAssertGreaterThan(received.count, liveSent * 2 / 3, "too few Live Link packets arrived")
        for packet in received {
            XCTAssertEqual(packet.update.coefficients.count, 52)
            XCTAssertTrue(packet.update.coefficients.values.allSatisfy { (0...1).contains($0) })
        }
        let seconds = received.compactMap(\.frameTime.seconds)
        XCTAssertEqual(seconds, seconds.sorted())
    }

    /// Alice's face is a Live Link Face stream replayed from a file at 30 packets a second, with
    /// `--privacy off` so that what bob (in this process) receives can be compared with what was
    /// replayed: every frame of her face carries the replayed jaw within the wire's quantisation
    /// (0.5/255). When the replay stops, her avatar is handed to her voice.
    func testACallWhoseFaceIsAReplayedLiveLinkStream() throws {
        let work = try CallWorkspace("veil-call-face")
        defer { work.remove() }

        // The recording: 8 s of a jaw opening and closing at changing speeds; each packet's index
        // is in cheekPuff (k/255, which the wire carries exactly), to pair what arrives with it.
        let count = 240
        func jaw(_ i: Int) -> Float {
            let t = Float(i) / 30
            return (0.5 + 0.45 * sin(2 * .pi * t / (0.8 + 0.1 * t))).clamped01
        }
        var recording = WireWriterForTests()
        for i in 0..<count {
            var expression = VeilCore.Expression(headPose: HeadPose(yaw: 10 * sin(Float(i) / 20), pitch: 0, roll: 0))
            expression[.jawOpen] = jaw(i)
            expression[.cheekPuff] = Float(i % 250 + 3) / 255
            let packet = try LiveLinkFacePacket(deviceID: "A1B2C3", subjectName: "iPhone", frameTime: .init(seconds: Double(i) / 30),
                                                update: ExpressionUpdate(expression)).encoded()
            recording.record(atMicros: UInt64(i) * 33_333, packet)
        }
        let file = work.directory.appendingPathComponent("face.livelink")
        try Data(recording.bytes).write(to: file)

        let (server, serverURL) = try work.startServer()
        defer { server.terminate(); server.waitUntilExit() }
        let tokens = try work.tokens(["alice", "bob"], room: "r1")
        let port = try DatagramSocket(bindingTo: "", port: 0).localAddress.port

        // Bob, in this process, keeps every frame he receives.
        final class Received: Sendable { let frames = Mutex<[ExpressionFrame]>([]) }
        let received = Received()
        let bob = CallSession(configuration: .init(server: try XCTUnwrap(URL(string: serverURL)), room: "r1", user: "bob",
                                                   token: tokens[1], audioInput: .silence))
        Task { for await (_, item) in bob.expressionFrames { received.frames.withLock { $0.append(item.frame) } } }
        bob.start()
        defer {
            let left = DispatchSemaphore(value: 0)
            Task { await bob.leave(); left.signal() }
            _ = left.wait(timeout: .now() + 10)
        }
        let alice = try work.process(["call", "--server", serverURL, "--room", "r1", "--user", "alice", "--token", tokens[0],
                                      "--face", "livelink://127.0.0.1:\(port)", "--privacy", "off", "--audio-in", "tone",
                                      "--out", "none", "--duration", "60", "--json"])
        try alice.0.run()
        defer { if alice.0.isRunning { alice.0.terminate() } }
        // Until alice's frames reach bob (lost ones, or her voice: nothing is replayed yet).
        let deadline = Date().addingTimeInterval(30)
        while received.frames.withLock({ $0.isEmpty }), Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        XCTAssertFalse(received.frames.withLock { $0.isEmpty }, "no frame from alice reached bob")

        // The replay, from the file, at the recorded times.
        let replayed = try Self.replay(file, to: port)
        XCTAssertEqual(replayed, count)
        let replayEnded = received.frames.withLock { $0.count }
        // Then nothing: lost frames, and after a second her voice.
        let voiceDeadline = Date().addingTimeInterval(20)
        while received.frames.withLock({ $0.dropFirst(replayEnded).filter(\.isVoiceDriven).count }) < 30, Date() < voiceDeadline {
            Thread.sleep(forTimeInterval: 0.1)
        }
        alice.0.interrupt()
        let output = CallWorkspace.events(CallWorkspace.outputs(of: [alice])[0])

        let frames = received.frames.withLock { $0 }
        let face = frames.filter { $0.state == .tracked && !$0.isVoiceDriven }
        var worst: Float = 0
        var paired = Set<Int>()
        for frame in face {
            let index = Int((frame.expression[.cheekPuff] * 255).rounded()) - 3
            guard (0..<count).contains(index) else { XCTFail("a frame of the face that was not replayed: \(frame.expression.namedCoefficients)"); continue }
            paired.insert(index)
            worst = max(worst, abs(frame.expression[.jawOpen] - jaw(index)))
        }
        let lastFace = frames.lastIndex { $0.state == .tracked && !$0.isVoiceDriven } ?? 0
        let after = frames[(lastFace + 1)...]
        let aliceReport = output.last { $0["event"] as? String == "report" }
        let faceStatistics = aliceReport?["face"] as? [String: Any]
        print("bob received \(frames.count) frames: \(face.count) of alice's replayed face (\(paired.count) distinct of \(count) replayed, jaw within \(worst)), "
              + "then \(after.filter { $0.state == .lost }.count) lost and \(after.filter(\.isVoiceDriven).count) voice-driven; alice's face source: \(faceStatistics ?? [:])")
        XCTAssertGreaterThan(paired.count, count / 2, "too few of the replayed frames arrived at bob")
        XCTAssertLessThanOrEqual(worst, 0.5 / 255 + 1e-4, "the jaw bob received is not the replayed one")
        // The jaw moved at bob as replayed: its range is the recording's.
        let jaws = face.map { $0.expression[.jawOpen] }
        XCTAssertGreaterThan((jaws.max() ?? 0) - (jaws.min() ?? 0), 0.6)
        // After the replay: lost frames, then the voice.
        XCTAssertGreaterThan(after.filter { $0.state == .lost }.count, 3, "no lost frames when the replay stopped")
        XCTAssertGreaterThanOrEqual(after.filter(\.isVoiceDriven).count, 30, "alice's avatar was not handed to her voice")
        if let firstVoice = after.first(where: \.isVoiceDriven), let firstLost = after.first(where: { $0.state == .lost }) {
            // A second after the face was lost (the voice's frames carry its audio's capture time,
            // a little earlier than when they were made).
            XCTAssertGreaterThanOrEqual(firstVoice.captureTimeMicros &- firstLost.captureTimeMicros, 500_000, "the voice took over at once")
        }
        // Alice's report: the packets came from 127.0.0.1, none was dropped.
        XCTAssertEqual(faceStatistics?["source"] as? String, "127.0.0.1")
        XCTAssertEqual(faceStatistics?["expressions"] as? Int, count)
        XCTAssertEqual((faceStatistics?["dropped"] as? [String: Int]) ?? [:], [:])
        XCTAssertTrue(output.contains { $0["event"] as? String == "faceSource" && ($0["message"] as? String)?.contains("127.0.0.1") == true })
    }

    func testFaceAndSendMistakesAreCaught() throws {
        let work = try CallWorkspace("veil-call-face-usage")
        defer { work.remove() }
        let base = ["call", "--server", "ws://127.0.0.1:9/ws", "--room", "r", "--user", "u", "--token", "t", "--out", "none", "--audio-in", "none"]
        func run(_ extra: [String]) throws -> (status: Int32, stderr: String) {
            let run = try work.run(base + extra)
            return (run.status, run.stderr)
        }
        let cases: [([String], String)] = [
            (["--send", "osc://127.0.0.1:9000"], "Veil speaks vmc:// and livelink://"),
            (["--send", "vmc://127.0.0.1:0"], "port must be a number from 1 to 65535"),
            (["--send", "livelink://"], "names no host"),
            (["--face", "osc://:9000"], "Veil speaks vmc:// and livelink://"),
            (["--face", "livelink://:11111", "--video", "face.mp4"], "--face replaces the camera"),
            (["--face", "vmc://:0"], "port must be a number from 1 to 65535"),
        ]
        for (extra, words) in cases {
            let (status, stderr) = try run(extra)
            XCTAssertEqual(status, 2, "\(extra): \(stderr)")
            XCTAssertTrue(stderr.contains(words), "\(extra): \(stderr)")
        }
        // Said at once, before joining: a host that does not resolve, a port another program holds.
        let unresolved = try run(["--send", "vmc://no-such-host.invalid"])
        XCTAssertEqual(unresolved.status, 1, unresolved.stderr)
        XCTAssertTrue(unresolved.stderr.contains("cannot resolve no-such-host.invalid"), unresolved.stderr)
        let holder = try DatagramSocket(bindingTo: "", port: 0)
        let taken = try run(["--face", "livelink://:\(holder.localAddress.port)"])
        XCTAssertEqual(taken.status, 1, taken.stderr)
        XCTAssertTrue(taken.stderr.contains("--face livelink://:\(holder.localAddress.port)") && taken.stderr.contains("in use"), taken.stderr)
    }

    func testHelpNamesFaceAndSend() throws {
        let work = try CallWorkspace("veil-call-help")
        defer { work.remove() }
        let help = try work.runToEnd(["call", "--help"])
        for words in ["--face URL", "livelink://PHONE:PORT", "vmc://SENDER:PORT", "11111", "39539", "--send URL"] {
            XCTAssertTrue(help.contains(words), words)
        }
    }

    // MARK: Replay

    /// Sends the packets of a recording made by `WireWriterForTests` to 127.0.0.1:`port` at their
    /// recorded times; how many were sent.
    static func replay(_ file: URL, to port: UInt16) throws -> Int {
        let bytes = [UInt8](try Data(contentsOf: file))
        let socket = try DatagramSocket(connectingTo: "127.0.0.1", port: port)
        let start = DispatchTime.now().uptimeNanoseconds / 1_000
        var offset = 0, sent = 0
        while offset + 10 <= bytes.count {
            let at = bytes[offset..<(offset + 8)].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            let length = Int(bytes[offset + 8]) << 8 | Int(bytes[offset + 9])
            offset += 10
            guard offset + length <= bytes.count else { break }
            let now = DispatchTime.now().uptimeNanoseconds / 1_000
            if start + at > now { Thread.sleep(forTimeInterval: Double(start + at - now) / 1e6) }
            if try socket.send(Array(bytes[offset..<(offset + length)])) == .sent { sent += 1 }
            offset += length
        }
        return sent
    }
}

/// A recording of datagrams: per datagram, its time (UInt64 µs, big-endian), its length (UInt16)
/// and its bytes.
struct WireWriterForTests {
    private(set) var bytes: [UInt8] = []

    mutating func record(atMicros time: UInt64, _ datagram: [UInt8]) {
        for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: time >> UInt64(shift))) }
        bytes.append(UInt8(datagram.count >> 8))
        bytes.append(UInt8(datagram.count & 0xff))
        bytes += datagram
    }
}

private extension Float {
    var clamped01: Float { Swift.min(Swift.max(self, 0), 1) }
}
