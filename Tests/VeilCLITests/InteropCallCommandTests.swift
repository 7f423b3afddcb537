import Foundation
import Synchronization
import VeilCall
import VeilCore
import VeilDatagram
import VeilInterop
import XCTest

/// `veil call --send` and `--face`: a call's own frames to a VMC Marionette (python-osc's server)
/// and a Live Link receiver; what `--face` refuses.
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

    func testFaceAndSendMistakesAreCaught() throws {
        let work = try CallWorkspace("veil-call-face-usage")
        defer { work.remove() }
        let base = ["call", "--server", "ws://127.0.0.1:9/ws", "--room", "r", "--user", "u", "--token", "t", "--out", "none", "--audio-in", "none"]
        func run(_ extra: [String]) throws -> (status: Int32, stderr: String) {
            let (process, _, err) = try work.process(base + extra)
            try process.run()
            let stderr = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            return (process.terminationStatus, stderr)
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
}
