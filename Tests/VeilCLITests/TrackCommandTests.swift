import Foundation
import VeilCore
import VeilDatagram
import VeilInterop
import VeilTestSupport
import XCTest

/// `veil track --send` as a user runs it, against receivers Veil did not write: python-osc's UDP
/// server and dispatcher as the VMC Marionette (Tests/VeilInteropTests/python/osc_peer.py serve),
/// and a plain UDP socket whose packets are decoded as Live Link Face. Both see every tracked frame
/// the command reports, and nothing for the frames it lost.
final class TrackCommandTests: XCTestCase {
    var work: CallWorkspace!

    override func setUpWithError() throws { work = try CallWorkspace("veil-track") }
    override func tearDownWithError() throws { work?.remove() }

    func testSendsEveryTrackedFrameToVMCAndLiveLink() throws {
        // A real moving face: 2 s of a photo animated (jaw, a blink, a smile, a head turn), as a
        // PNG sequence at 30 fps.
        let script = work.directory.appendingPathComponent("script.txt")
        try """
        fps 30
        duration 2
        jawDrop 0:0 0.3:0.08 0.6:0 0.9:0.06 1.2:0
        blink 1.0:0 1.08:1 1.2:0
        smile 0.5:0 1.0:0.8 1.6:0
        headYaw 0:0 1.0:12 2.0:0
        """.write(to: script, atomically: true, encoding: .utf8)
        try run(["synth", try VeilResources.file("photos", "takeo.ppm").path, "-o", "frames/%05d.png", "--script", script.path, "--quiet"])

        let marionette = try PythonMarionette()
        defer { marionette.stop() }
        let liveLink = try DatagramSocket(bindingTo: "127.0.0.1")
        let send = ["--send", "vmc://127.0.0.1:\(marionette.port)", "--send", "livelink://127.0.0.1:\(liveLink.localAddress.port)"]

        // The default privacy level (strict) sends no gaze; off sends the tracker's.
        let strict = try summary(try run(["track", "frames/%05d.png"] + send + ["--json"]))
        let off = try summary(try run(["track", "frames/%05d.png", "--frames", "15", "--privacy", "off", "--subject", "Takeo", "--json"] + send))
        for (run, frames) in [(strict, 60), (off, 15)] {
            XCTAssertEqual(run.frames, frames)
            XCTAssertGreaterThan(run.tracked, frames * 9 / 10, "the face is found in most frames")
            XCTAssertEqual(run.tracked + run.lost, run.frames)
            XCTAssertEqual(run.vmc["framesSent"] as? Int, run.tracked)
            XCTAssertEqual(run.liveLink["framesSent"] as? Int, run.tracked)
            XCTAssertEqual(run.liveLink["datagramsSent"] as? Int, run.tracked)
            for destination in [run.vmc, run.liveLink] {
                XCTAssertEqual(destination["datagramsDropped"] as? Int, 0)
                XCTAssertEqual(destination["datagramsRefused"] as? Int, 0)
                XCTAssertEqual(destination["datagramsFailed"] as? Int, 0)
            }
        }

        // VMC, as python-osc read it: one apply per tracked frame, each with all 52 ARKit
        // blendshapes in 0…1 and the head bone; the tracker's capture times, rising.
        let applies = marionette.finish()
        XCTAssertEqual(applies.count, strict.tracked + off.tracked, "python-osc saw \(applies.count) frames")
        XCTAssertEqual(applies.last?["datagrams"] as? Int,
                       (strict.vmc["datagramsSent"] as? Int ?? 0) + (off.vmc["datagramsSent"] as? Int ?? 0),
                       "every datagram arrived")
        let names = Set(BlendShape.allCases.map(\.name))
        for (index, apply) in applies.enumerated() {
            let blend = try XCTUnwrap(apply["blend"] as? [String: Double], "frame \(index)")
            XCTAssertEqual(Set(blend.keys), names, "frame \(index)")
            XCTAssertTrue(blend.values.allSatisfy { (0...1).contains($0) }, "frame \(index): \(blend)")
            let bones = try XCTUnwrap(apply["bones"] as? [String: [Double]])
            XCTAssertEqual(bones["Head"]?.count, 7, "frame \(index): name, position and quaternion")
            XCTAssertEqual(apply["ok"] as? Int, 1)
            if index < strict.tracked { XCTAssertNil(bones["LeftEye"], "frame \(index): no gaze at the strict level") }
        }
        XCTAssertTrue(applies.suffix(off.tracked).contains { ($0["bones"] as? [String: Any])?["LeftEye"] != nil },
                      "eye bones at --privacy off")
        let times = applies.map { $0["time"] as? Double ?? -1 }
        for run in [times[..<strict.tracked], times[strict.tracked...]] {
            XCTAssertEqual(Array(run), run.sorted(), "capture times rise")
            XCTAssertTrue(run.allSatisfy { (0..<2).contains($0) }, "\(run)")
        }
        XCTAssertGreaterThan(applies.compactMap { ($0["blend"] as? [String: Double])?["jawOpen"] }.max() ?? 0, 0.2, "the jaw moved")

        // Live Link, decoded by Veil's LiveLinkFacePacket from what the socket received.
        var packets: [LiveLinkFacePacket] = []
        while let datagram = try liveLink.receive(timeout: 0.5) { packets.append(try LiveLinkFacePacket(decoding: datagram.bytes)) }
        XCTAssertEqual(packets.count, strict.tracked + off.tracked)
        for (index, packet) in packets.enumerated() {
            let strictRun = index < strict.tracked
            XCTAssertEqual(packet.subjectName, strictRun ? "Veil" : "Takeo")
            XCTAssertEqual(packet.frameTime.rateNumerator, 30)
            XCTAssertEqual(packet.update.coefficients.count, 52)
            let head = try XCTUnwrap(packet.update.head)
            XCTAssertLessThan(abs(head.yaw), 0.8, "packet \(index): the clip turns the head by 12°")
            XCTAssertLessThan(abs(head.pitch), 0.8)
            if strictRun { XCTAssertEqual(packet.update.leftEye, .zero, "no gaze at the strict level") }
        }
        XCTAssertEqual(Set(packets.prefix(strict.tracked).map(\.deviceID)).count, 1, "one device id per run")
        let seconds = packets.prefix(strict.tracked).compactMap(\.frameTime.seconds)
        XCTAssertEqual(seconds, seconds.sorted())
        XCTAssertTrue(seconds.allSatisfy { (0..<2).contains($0) })
        XCTAssertGreaterThan(packets.compactMap { $0.update[.jawOpen] }.max() ?? 0, 0.2, "the jaw moved")
        XCTAssertTrue(packets.suffix(off.tracked).contains { $0.update.leftEye != .zero }, "a gaze at --privacy off")
    }

    /// No receiver runs: the command still tracks every frame, completes, and says nothing listened.
    func testNothingListeningStillCompletes() throws {
        let photos = work.directory.appendingPathComponent("photos")
        try FileManager.default.createDirectory(at: photos, withIntermediateDirectories: true)
        for i in 0..<20 {
            try FileManager.default.copyItem(at: try VeilResources.file("photos", "takeo.ppm"), to: photos.appendingPathComponent("\(i).ppm"))
        }
        let closed = try DatagramSocket(bindingTo: "127.0.0.1").localAddress.port
        let result = try run(["track", "photos", "--send", "vmc://127.0.0.1:\(closed)", "--send", "livelink://127.0.0.1:\(closed)"])
        XCTAssertTrue(result.stdout.contains("frames           20"), result.stdout)
        XCTAssertTrue(result.stdout.contains("tracked          20"), result.stdout)
        XCTAssertTrue(result.stdout.contains("refused"), result.stdout)
        XCTAssertTrue(result.stdout.contains("nothing listened at 127.0.0.1:\(closed)"), result.stdout)
    }

    /// A frame that cannot be read ends the run with exit status 1 and the input's error, which
    /// names the file; `--frames` ends it after that many frames, each sent with the input's time.
    func testAnUnreadableFrameFailsTheRunAndAFrameLimitEndsIt() throws {
        let photos = work.directory.appendingPathComponent("photos")
        try FileManager.default.createDirectory(at: photos, withIntermediateDirectories: true)
        for i in 0..<6 {
            try FileManager.default.copyItem(at: try VeilResources.file("photos", "takeo.ppm"), to: photos.appendingPathComponent("\(i).ppm"))
        }
        let liveLink = try DatagramSocket(bindingTo: "127.0.0.1")
        let send = ["--send", "livelink://127.0.0.1:\(liveLink.localAddress.port)"]
        let limited = try run(["track", "photos", "--frames", "4", "--privacy", "off", "--json"] + send)
        let json = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(limited.stdout.utf8)) as? [String: Any], limited.stdout)
        XCTAssertEqual(json["frames"] as? Int, 4)
        XCTAssertEqual(json["tracked"] as? Int, 4)
        var seconds: [Double] = []
        while let datagram = try liveLink.receive(timeout: 0.5) {
            seconds.append(try XCTUnwrap(try LiveLinkFacePacket(decoding: datagram.bytes).frameTime.seconds))
        }
        XCTAssertEqual(seconds.count, 4)
        for (index, time) in seconds.enumerated() { XCTAssertEqual(time, Double(index) / 30, accuracy: 0.002, "\(seconds)") }

        try "P6 this is not a picture".write(to: photos.appendingPathComponent("3.ppm"), atomically: true, encoding: .utf8)
        let failed = try run(["track", "photos"] + send, expecting: 1)
        XCTAssertTrue(failed.stderr.contains("veil: error:"), failed.stderr)
        XCTAssertTrue(failed.stderr.contains("3.ppm"), failed.stderr)
        XCTAssertEqual(failed.stdout, "", "no summary for a run that failed")
    }

    func testBadDestinationsAreUsageErrors() throws {
        let cases: [([String], String)] = [
            (["track", "x.mp4", "--send", "osc://127.0.0.1:9000"], "Veil speaks vmc:// and livelink://"),
            (["track", "x.mp4", "--send", "vmc://127.0.0.1:70000"], "port must be a number from 1 to 65535"),
            (["track", "x.mp4", "--send", "livelink://"], "names no host"),
            (["track", "x.mp4", "--send", "vmc://127.0.0.1:39539", "--send", "127.0.0.1"], "is not a URL"),
            (["track", "x.mp4"], "at least one --send URL"),
            (["track", "--send", "vmc://127.0.0.1"], "exactly one INPUT"),
        ]
        for (args, words) in cases {
            let result = try run(args, expecting: 2)
            XCTAssertTrue(result.stderr.contains(words), "\(args): \(result.stderr)")
            XCTAssertTrue(result.stderr.contains("veil help track"), result.stderr)
        }
        let unresolved = try run(["track", try VeilResources.file("photos", "takeo.ppm").path, "--send", "vmc://no-such-host.invalid"], expecting: 1)
        XCTAssertTrue(unresolved.stderr.contains("cannot resolve no-such-host.invalid"), unresolved.stderr)
        let missing = try run(["track", "nothing-here.mp4", "--send", "vmc://127.0.0.1"], expecting: 1)
        XCTAssertTrue(missing.stderr.contains("cannot read nothing-here.mp4"), missing.stderr)
    }

    func testHelp() throws {
        let help = try run(["track", "--help"])
        for words in ["--send URL", "vmc://HOST[:PORT]", "livelink://HOST[:PORT]", "39539", "11111", "--privacy", "--frames"] {
            XCTAssertTrue(help.stdout.contains(words), words)
        }
        XCTAssertEqual(try run(["help", "track"]).stdout, help.stdout)
        XCTAssertTrue(try run(["--help"]).stdout.contains("track INPUT --send URL"))
    }

    // MARK: Helpers

    struct Result { var stdout: String; var stderr: String }

    /// Runs `veil args` in the workspace to its end; its exit status must be `status`.
    @discardableResult
    func run(_ args: [String], expecting status: Int32 = 0, file: StaticString = #filePath, line: UInt = #line) throws -> Result {
        let run = try work.run(args)
        XCTAssertEqual(run.status, status, "veil \(args.joined(separator: " ")): \(run.stderr)", file: file, line: line)
        return Result(stdout: run.stdout, stderr: run.stderr)
    }

    /// The `--json` summary of one run: frames, and each destination's statistics.
    struct Summary { var frames: Int; var tracked: Int; var lost: Int; var vmc: [String: Any]; var liveLink: [String: Any] }

    func summary(_ result: Result) throws -> Summary {
        let json = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any], result.stdout)
        let destinations = try XCTUnwrap(json["destinations"] as? [[String: Any]])
        func statistics(_ scheme: String) throws -> [String: Any] {
            let destination = try XCTUnwrap(destinations.first { ($0["url"] as? String)?.hasPrefix(scheme) == true })
            return try XCTUnwrap(destination["statistics"] as? [String: Any])
        }
        return Summary(frames: json["frames"] as? Int ?? -1, tracked: json["tracked"] as? Int ?? -1, lost: json["lost"] as? Int ?? -1,
                       vmc: try statistics("vmc://"), liveLink: try statistics("livelink://"))
    }

    /// python-osc's UDP server as a VMC Marionette (osc_peer.py serve), on a free port.
    final class PythonMarionette {
        let process = Process()
        let port: UInt16
        private let input = Pipe(), output = Pipe(), errors = Pipe()
        private var buffered = Data()

        init() throws {
            process.executableURL = try PythonOSCPeer.interpreter()
            process.arguments = [PythonOSCPeer.script.path, "serve"]
            process.standardInput = input
            process.standardOutput = output
            process.standardError = errors
            try process.run()
            // The first line says which port the server took.
            while !buffered.contains(UInt8(ascii: "\n")) {
                let chunk = output.fileHandleForReading.availableData
                guard !chunk.isEmpty else { break }
                buffered += chunk
            }
            guard let newline = buffered.firstIndex(of: UInt8(ascii: "\n")),
                  let first = try JSONSerialization.jsonObject(with: buffered[..<newline]) as? [String: Any],
                  let port = first["listening"] as? Int, let port16 = UInt16(exactly: port) else {
                let errorText = String(decoding: errors.fileHandleForReading.availableData, as: UTF8.self)
                throw PythonMarionetteFailure("osc_peer.py serve did not start: \(String(decoding: buffered, as: UTF8.self)) \(errorText)")
            }
            self.port = port16
            buffered = Data(buffered[(newline + 1)...])
        }

        /// Ends the server (it drains what has arrived first) and returns a JSON object per apply.
        func finish() -> [[String: Any]] {
            try? input.fileHandleForWriting.close()
            buffered += output.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            return buffered.split(separator: UInt8(ascii: "\n")).compactMap { try? JSONSerialization.jsonObject(with: Data($0)) as? [String: Any] }
        }

        func stop() { if process.isRunning { process.terminate(); process.waitUntilExit() } }
    }

    struct PythonMarionetteFailure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }
}
