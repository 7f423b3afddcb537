import Foundation
import Synchronization
import VeilCall
import VeilCore
import VeilRender
import VeilServer
import VeilSynth
import VeilConsole
import VeilMedia

/// The call demo: an embedded server and two participants in one process, over real WebRTC.
func runCallDemo(out: URL, seconds: TimeInterval, quiet: Bool) throws {
    try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
    func path(_ name: String) -> String { out.appendingPathComponent(name).path }
    let people = [("alice", "astronaut.png", "en+f3", "Hello! I am alice. You can hear my voice and see my smile, but you never see my face."),
                  ("bob", "takeo.ppm", "en+m3", "Hi alice, this is bob. My camera stays on my computer; only my expressions travel.")]

    if !quiet { Terminal.note("1/3 making talking-face clips and speech for alice and bob") }
    var speech: [String: AudioInput] = [:]
    for (user, photo, voice, line) in people {
        let script = try ExpressionScript(framesPerSecond: 30, duration: seconds + 2, tracks: ExpressionScript.talking.tracks)
        try synthesize(photo: try VeilResources.file("photos", photo).path, output: path("\(user)-camera.mp4"),
                       truthPath: path("\(user)-camera.truth.jsonl"), script: script, size: (640, 480), quiet: true)
        speech[user] = try speak(line, voice: voice, to: path("\(user)-speech.wav")).map { .file(URL(fileURLWithPath: $0)) }
            ?? .testTone(frequency: user == "alice" ? 440 : 660)
    }

    if !quiet { Terminal.note("2/3 starting a room server and calling (\(Int(seconds)) s)") }
    let secret = ServerSecret.random()
    let server = RoomServer(configuration: .init(secret: secret, port: 0))
    let url = try server.start()
    defer { server.stop() }
    let authority = TokenAuthority(secret: secret)
    let reports = Mutex<[String: CallRunner.Report]>([:])
    let failures = Mutex<[String]>([])
    var threads: [Thread] = []
    let done = DispatchGroup()
    for (index, (user, _, _, _)) in people.enumerated() {
        var options = CallRunner.Options(server: url, room: "demo", user: user,
                                         token: try authority.issue(room: "demo", user: user, lifetime: 600))
        options.video = path("\(user)-camera.mp4")
        options.audioIn = speech[user] ?? .silence
        options.output = .file(path("\(user).mp4"))
        options.duration = seconds
        options.quiet = true
        options.style = index == 0 ? .mask : .sketch
        options.schedule = index == 0
            ? [(at: seconds * 0.4, control: .toggleMute), (at: seconds * 0.6, control: .toggleMute)]
            : [(at: seconds * 0.5, control: .cycleBackground)]
        let runner = CallRunner(options: options)
        done.enter()
        let thread = Thread {
            do { let report = try runner.run(); reports.withLock { $0[user] = report } } catch {
                failures.withLock { $0.append("\(user): \(error)") }
            }
            done.leave()
        }
        thread.start()
        threads.append(thread)
        // Bob joins a moment after alice, as people do.
        Thread.sleep(forTimeInterval: 0.5)
    }
    _ = done.wait(timeout: .now() + seconds + 30)
    if let failure = failures.withLock({ $0.first }) { throw VeilError.io("the demo call failed: \(failure)") }

    if !quiet { Terminal.note("3/3 writing the report") }
    let all = reports.withLock { $0 }
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    try encoder.encode(all).write(to: URL(fileURLWithPath: path("report.json")))
    print(callDemoTable(all, people: people.map(\.0)))
    print("written to       \(out.path)/ (alice.mp4, bob.mp4, report.json)")
}

func callDemoTable(_ reports: [String: CallRunner.Report], people: [String]) -> String {
    func f(_ v: Double?, _ format: String) -> String { v.map { String(format: format, $0) } ?? "-" }
    var lines = ["".padding(toLength: 34, withPad: " ", startingAt: 0) + people.map { $0.padding(toLength: 22, withPad: " ", startingAt: 0) }.joined()]
    func row(_ label: String, _ value: (CallRunner.Report) -> String) {
        lines.append(label.padding(toLength: 34, withPad: " ", startingAt: 0)
                     + people.map { (reports[$0].map(value) ?? "-").padding(toLength: 22, withPad: " ", startingAt: 0) }.joined())
    }
    row("join time") { f($0.joinMilliseconds, "%.0f ms") }
    row("round-trip time") { f($0.roundTripMillis, "%.1f ms") }
    row("packet loss") { f($0.lossFraction.map { $0 * 100 }, "%.1f %%") }
    row("network") { $0.quality ?? "-" }
    row("expression frames/s (sent)") { f($0.expressionFramesPerSecondSent, "%.1f") }
    row("expression bytes/s") { f($0.expressionBytesPerSecond, "%.0f B/s") }
    row("audio bytes/s") { f($0.audioBitsPerSecond / 8, "%.0f B/s") }
    row("expression : audio") { $0.audioBitsPerSecond > 0 ? String(format: "1 : %.0f", $0.audioBitsPerSecond / 8 / max($0.expressionBytesPerSecond, 1)) : "-" }
    row("lip-sync: audio lead p50 (p5…p95)") { r in
        let s = r.lipSyncOffsetsMillis.sorted()
        guard !s.isEmpty else { return "-" }
        func q(_ p: Double) -> Double { s[min(Int(Double(s.count - 1) * p), s.count - 1)] }
        return String(format: "%.0f ms (%.0f…%.0f)", q(0.5), q(0.05), q(0.95))
    }
    row("lip-sync inside +45/−125 ms") { r in
        guard !r.lipSyncOffsetsMillis.isEmpty else { return "-" }
        let inside = r.lipSyncOffsetsMillis.filter { $0 <= 45 && $0 >= -125 }.count
        return String(format: "%.1f %%", 100 * Double(inside) / Double(r.lipSyncOffsetsMillis.count))
    }
    row("outbound RTP streams") { $0.outboundStreamKinds.isEmpty ? "-" : $0.outboundStreamKinds.joined(separator: ", ") }
    row("camera pixels sent (non-audio B)") { "\($0.nonAudioBytesSent)" }
    row("largest expression message") { "\($0.largestExpressionPayload) B" }
    row("frames shown / tracked") { "\($0.framesRendered) / \($0.framesTracked)" }
    return lines.joined(separator: "\n")
}
