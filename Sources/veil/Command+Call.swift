import Foundation
import VeilCall
import VeilCore
import VeilConsole
import VeilInterop
#if canImport(Glibc)
import Glibc
#endif

let callCommand = Command(name: "call", help: """
USAGE: veil call --server URL --room R --user U --token T [options]

Joins a room on a Veil server: sends your voice (Opus) and your facial expressions (never your
face: the camera picture is tracked here and reduced to ExpressionFrames), and shows everyone
else's avatar, moving in sync with their voice, with yours as a small inset. Without a camera, or
while your face is out of view for more than a second, your avatar follows your voice instead
(mouth from speech energy, blinks, small head motion), and the others see it marked "· voice".

OPTIONS:
  --server URL             The room server's WebSocket URL (e.g. ws://127.0.0.1:7878/ws, or
                           wss://HOST:PORT/ws for a server with TLS: its certificate must be
                           valid, issued for HOST and signed by an authority this machine trusts;
                           otherwise the call ends at once, saying why: unknown authority,
                           expired, wrong host name; exit 1)
  --ca-file FILE           Trust the certificate authorities in FILE (PEM) for a wss:// server,
                           instead of the system's trust store (a private authority's servers)
  --room R --user U        Room and your name in it
  --token T                Your token from the server's operator (`veil token`); or VEIL_TOKEN
  --camera /dev/videoN|none   Track this camera, or none: the avatar follows your voice
                           (the default when neither --camera nor --video is given)
  --video FILE             Track a video file instead (played in real time, looped)
  --face URL               Take your face from another tracker instead of a camera, over UDP on
                           PORT on every local address:
                             livelink://PHONE:PORT   the Live Link Face app (an iPhone's ARKit
                                                     tracking; PORT defaults to 11111)
                             vmc://SENDER:PORT       a VMC Performer (PORT defaults to 39539)
                           Only packets from PHONE/SENDER are read; without a host
                           (livelink://:11111) the first sender is kept and others ignored. Its
                           expressions go through --privacy and out as a camera's would; when it
                           stops sending, the face counts as out of view (after a second the
                           voice drives). Not with --camera or --video
  --send URL               Also send each frame of your face (camera or --face) as it goes out on
                           the call, after --privacy, to an avatar app (repeatable):
                           vmc://HOST[:PORT] (VSeeFace: 39539) or livelink://HOST[:PORT] (Unreal:
                           11111), as `veil track --send` does (docs/interop.md)
  --audio-in pulse|FILE|tone|none   Microphone (PulseAudio), an audio file, a test tone, or nothing
                           (default: pulse when a sound server runs, else none)
  --audio-out pulse|pulse:SINK|FILE.wav|none   Where the others' voices go: the sound server's
                           default sink or the sink SINK (pactl list short sinks), a WAV file, or
                           nowhere (default: pulse when available, else none)
  --out window|FILE.mp4|none        The call view: a window, or a recording of what you saw and heard
                           (default: window when a display is available, else none)
  --style sketch|mask      Avatar style (default mask)
  --duration S             Leave after S seconds
  --stun URL               STUN server, stun://HOST:PORT (default: what the room server hands out)
  --turn URL               TURN server, turn://USER:PASSWORD@HOST:PORT (likewise)
  --relay-only             Send everything through the TURN server: the others see its address,
                           never yours (needs a TURN server)
  --latency auto|MS        How long received voices wait before they play: auto (the default)
                           follows each connection's jitter, about 15 ms on a clean network and
                           more under jitter or when the others' expression frames come late
                           (at most 100 ms for those); MS keeps a fixed delay of MS milliseconds
                           (10–1000). The sound server's own 40 ms come on top of either
\(Arguments.privacyHelp)
  --json                   Print events and statistics (every 2 s: network, traffic, and each
                           received voice's playout delay, concealed and stretched audio) as JSON
                           lines on stdout, and the run's figures as a last line {"event":"report",...}

KEYS (on a terminal): m mute/unmute · s audio output (next sink of the sound server) · b background ·
  p picture-in-picture corner / grid · t compact window, kept on top (--out window) · q leave
""", run: runCall)

func runCall(_ argv: [String]) throws {
    let args = try Arguments(argv, valued: ["server", "room", "user", "token", "ca-file", "camera", "video", "audio-in", "audio-out",
                                            "out", "style", "duration", "size", "background", "stun", "turn", "privacy", "latency",
                                            "face", "send"],
                             booleans: ["json", "quiet", "relay-only", "full-expression"])
    guard args.positionals.isEmpty else { throw UsageError("call takes no positional arguments") }
    guard let serverText = args.value("server"), let server = URL(string: serverText), server.scheme == "ws" || server.scheme == "wss" else {
        throw UsageError("call needs --server ws://HOST:PORT/ws (or wss:// for a server with TLS)")
    }
    guard let room = args.value("room"), let user = args.value("user") else { throw UsageError("call needs --room and --user") }
    guard let token = args.value("token") ?? ProcessInfo.processInfo.environment["VEIL_TOKEN"] else {
        throw UsageError("call needs --token (ask the server's operator: veil token --room \(room) --user \(user))")
    }
    let hasPulse = ProcessInfo.processInfo.environment["PULSE_SERVER"] != nil
        || FileManager.default.fileExists(atPath: "/run/user/\(getuid())/pulse/native")
    let hasDisplay = ProcessInfo.processInfo.environment["DISPLAY"] != nil || ProcessInfo.processInfo.environment["WAYLAND_DISPLAY"] != nil

    var options = CallRunner.Options(server: server, room: room, user: user, token: token)
    if let caFile = args.value("ca-file") {
        guard server.scheme == "wss" else { throw UsageError("--ca-file is for a wss:// server; \(serverText) is not encrypted") }
        options.serverTrust = try ServerTrust(certificateAuthorities: URL(fileURLWithPath: caFile))
    }
    if args.value("camera") != nil && args.value("video") != nil { throw UsageError("give --camera or --video, not both") }
    if let face = args.value("face") {
        guard args.value("camera") == nil && args.value("video") == nil else {
            throw UsageError("--face replaces the camera: give --face, --camera or --video, not two of them")
        }
        do {
            options.face = try InteropEndpoint(parsing: face, hostRequired: false)
        } catch let error as InteropURLError {
            throw UsageError("--face \(error)")
        }
    }
    options.sends = try InteropDestinations.endpoints(args.values("send"))
    options.video = args.value("camera") == "none" ? nil : args.value("camera") ?? args.value("video")
    if let video = args.value("video"), !FileManager.default.isReadableFile(atPath: video) {
        throw VeilError.invalidInput("cannot read \(video): no such file, or not readable")
    }
    switch args.value("audio-in") ?? (hasPulse ? "pulse" : "none") {
    case "pulse": options.audioIn = .pulse(device: nil)
    case "tone": options.audioIn = .testTone(frequency: 440)
    case "none": options.audioIn = .silence
    case let path:
        guard FileManager.default.isReadableFile(atPath: path) else { throw VeilError.invalidInput("cannot read --audio-in \(path)") }
        options.audioIn = .file(URL(fileURLWithPath: path))
    }
    switch args.value("audio-out") ?? (hasPulse ? "pulse" : "none") {
    case "pulse": options.audioOut = .pulse(device: nil)
    case let value where value.hasPrefix("pulse:"):
        let sink = String(value.dropFirst("pulse:".count))
        guard !sink.isEmpty else { throw UsageError("--audio-out pulse:SINK needs a sink name (see pactl list short sinks)") }
        let sinks = try PeerConnection.audioOutputDevices()
        guard sinks.contains(where: { $0.name == sink }) else {
            throw VeilError.invalidInput(sinks.isEmpty
                ? "--audio-out \(value): no sound server answers; start PulseAudio (or PipeWire's pulse server) or use --audio-out FILE.wav"
                : "--audio-out \(value): the sound server has no sink '\(sink)'; its sinks are: \(sinks.map(\.name).joined(separator: ", "))")
        }
        options.audioOut = .pulse(device: sink)
    case "none": options.audioOut = .discard
    case let path: options.audioOut = .file(URL(fileURLWithPath: path))
    }
    switch args.value("out") ?? (hasDisplay ? "window" : "none") {
    case "window": options.output = .window
    case "none": options.output = .none
    case let path: options.output = .file(path)
    }
    options.style = try parseStyle(args.value("style"))
    if args.value("background") != nil { options.backgrounds.insert(try parseBackground(args.value("background")), at: 0) }
    options.size = try args.size("size", default: (640, 480))
    if let duration = args.value("duration") {
        guard let seconds = TimeInterval(duration), seconds > 0 else { throw UsageError("--duration must be a number of seconds") }
        options.duration = seconds
    }
    if let stun = args.value("stun") {
        guard stun.hasPrefix("stun://") else { throw UsageError("--stun takes stun://HOST:PORT") }
        options.peer.stunServer = stun
    }
    if let turn = args.value("turn") {
        guard turn.hasPrefix("turn://") || turn.hasPrefix("turns://"), turn.contains("@") else {
            throw UsageError("--turn takes turn://USER:PASSWORD@HOST:PORT")
        }
        options.peer.turnServer = turn
    }
    options.peer.relayOnly = args.flag("relay-only")
    switch args.value("latency") ?? "auto" {
    case "auto": options.peer.playoutDelayMillis = nil
    case let text:
        guard let millis = UInt32(text), (10...1000).contains(millis) else {
            throw UsageError("--latency takes auto or a number of milliseconds from 10 to 1000")
        }
        options.peer.playoutDelayMillis = millis
    }
    options.privacy = try args.privacyLevel()
    options.json = args.flag("json")
    options.quiet = args.flag("quiet")

    // Ctrl-C and SIGTERM leave the call; caught before the call starts any thread.
    let leave = LeaveRequest()
    let signals = catchStopSignals { leave.request() }
    defer { signals.forEach { $0.cancel() } }
    let runner = CallRunner(options: options)
    leave.attach(runner)
    let keys = KeyReader { key in
        switch key {
        case "m": runner.apply(.toggleMute)
        case "s": runner.apply(.cycleAudioOutput)
        case "b": runner.apply(.cycleBackground)
        case "p": runner.apply(.cycleLayout)
        case "t": runner.apply(.toggleCompactWindow)
        case "q": runner.apply(.leave)
        default: break
        }
    }
    defer { keys.stop() }
    let report = try runner.run()
    if options.json, let data = try? JSONEncoder().encode(report),
       var fields = try? JSONSerialization.jsonObject(with: data) as? [String: Any] {
        // The run's figures as a last line (frames sent from camera or voice, received, ...).
        fields["event"] = "report"
        fields["events"] = nil
        if let line = try? JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys]) {
            print(String(decoding: line, as: UTF8.self))
            fflush(stdout)
        }
    }
    if !options.json && !options.quiet {
        Terminal.note("left \(room): \(report.framesRendered) frames shown, join \(report.joinMilliseconds.map { String(format: "%.0f ms", $0) } ?? "-")")
        if let face = report.face {
            let dropped = face.dropped.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }
            Terminal.note("face: \(face.datagrams) datagrams received; from \(face.source ?? "no sender"), \(face.expressions) expressions, "
                          + "\(face.framesTracked) frames tracked and \(face.framesLost) lost; \(face.fromOtherSources) from other senders ignored"
                          + (dropped.isEmpty ? "" : "; dropped: \(dropped.joined(separator: ", "))"))
        }
        for destination in report.destinations { destination.lines.forEach(Terminal.note) }
    }
}

/// Single keys from a terminal in raw mode, on a thread of its own; restores the terminal on stop.
final class KeyReader: @unchecked Sendable {
    private var saved = termios()
    private let active: Bool
    private var thread: Thread?

    init(_ handler: @escaping @Sendable (Character) -> Void) {
        active = isatty(STDIN_FILENO) != 0
        guard active else { return }
        tcgetattr(STDIN_FILENO, &saved)
        var raw = saved
        raw.c_lflag &= ~tcflag_t(ICANON | ECHO)
        tcsetattr(STDIN_FILENO, TCSANOW, &raw)
        let thread = Thread {
            var byte: UInt8 = 0
            while read(STDIN_FILENO, &byte, 1) == 1 {
                handler(Character(UnicodeScalar(byte)))
                if byte == UInt8(ascii: "q") { break }
            }
        }
        thread.name = "veil-keys"
        thread.start()
        self.thread = thread
    }

    func stop() {
        if active { tcsetattr(STDIN_FILENO, TCSANOW, &saved) }
    }
}

/// A stop signal's way to the call: it may come before the call's runner exists, and is then
/// applied as soon as it does.
private final class LeaveRequest: @unchecked Sendable {
    private let lock = NSLock()
    private var runner: CallRunner?
    private var requested = false

    func request() {
        lock.lock()
        let target = runner
        requested = true
        lock.unlock()
        target?.apply(.leave)
    }

    func attach(_ runner: CallRunner) {
        lock.lock()
        self.runner = runner
        let already = requested
        lock.unlock()
        if already { runner.apply(.leave) }
    }
}
