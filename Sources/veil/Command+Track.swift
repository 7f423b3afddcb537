import Foundation
import Synchronization
import VeilCameraSource
import VeilConsole
import VeilCore
import VeilInterop
import VeilInteropNetwork

let trackCommand = Command(name: "track", help: """
USAGE: veil track INPUT --send URL [--send URL]... [options]

Tracks the face in INPUT and sends each frame's expression, after the privacy level you chose, to
avatar apps over UDP: a VMC Marionette (VSeeFace, VMagicMirror, VNyan, Warudo) or Unreal Engine's
Live Link (a MetaHuman). No call, no avatar drawn here. What goes out is what a call would send:
ARKit's 52 blendshapes, the head's rotation as the Head bone, the gaze as the eye bones (only
when the privacy level sends a gaze), timed by the tracker's capture times, at its frame rate.
Neither protocol adds a privacy filter of its own (docs/interop.md).

INPUT     a camera (/dev/video0, until Ctrl-C), a video file, an image or an image sequence
          (frames/%05d.png), as `veil render` takes; files play in real time

OPTIONS:
  --send URL               Where to send (repeatable, at least one):
                             vmc://HOST[:PORT]       the VMC protocol (OSC); VSeeFace and other
                                                     Marionettes listen on 39539 (the default)
                             livelink://HOST[:PORT]  Live Link Face packets; Unreal's Live Link Face
                                                     source listens on 11111 (the default)
                           HOST is a name, an IPv4 address, or an IPv6 address in brackets ([::1])
  --subject NAME           Live Link subject name the face appears under in Unreal (default Veil)
  --frames N               Stop after N frames (a camera runs until Ctrl-C otherwise)
\(Arguments.privacyHelp)
  --json                   Print the summary as one JSON object instead of a table
  --quiet                  No progress and no table (errors only; --json still prints)

While the face is lost nothing is sent: VSeeFace and Unreal hold the last pose they received. A
datagram the network cannot take at once is dropped, never waited for; the summary counts, per
destination, the frames and datagrams sent, dropped and refused ("port unreachable": nothing
listens there).
""", run: runTrack)

func runTrack(_ argv: [String]) throws {
    let args = try Arguments(argv, valued: ["send", "subject", "frames", "privacy"],
                             booleans: ["json", "quiet", "full-expression"], aliases: ["max-frames": "frames"])
    guard args.positionals.count == 1 else { throw UsageError("track needs exactly one INPUT") }
    let urls = args.values("send")
    guard !urls.isEmpty else {
        throw UsageError("track needs at least one --send URL: vmc://HOST:PORT (VSeeFace: 39539) or livelink://HOST:PORT (Unreal: 11111)")
    }
    let endpoints = try InteropDestinations.endpoints(urls)
    let maxFrames = try args.int("frames", default: Int.max, range: 1...Int.max)
    let subject = args.value("subject") ?? InteropFrameEncoder.defaultSubjectName
    guard !subject.isEmpty, subject.utf8.count <= LiveLinkFacePacket.maximumNameBytes else {
        throw UsageError("--subject must be 1 to \(LiveLinkFacePacket.maximumNameBytes) bytes of text")
    }
    let json = args.flag("json"), quiet = args.flag("quiet")

    // Ctrl-C and SIGTERM end the run with its summary; caught before anything starts a thread.
    let stop = StopRequest()
    let signals = catchStopSignals { stop.request() }
    defer { signals.forEach { $0.cancel() } }

    // Files play in real time, so that what is sent moves at the speed it was recorded.
    let input = try CaptureLoop(path: args.positionals[0], privacy: try args.privacyLevel())
    let options = CaptureLoop.Options(pacing: .realTime, frameLimit: maxFrames)
    let framesPerSecond = Int32(input.framesPerSecond.rounded())
    let senders = try InteropDestinations.open(endpoints, framesPerSecond: framesPerSecond, subject: subject)
    if !quiet && !json {
        Terminal.note("sending \(input.path) to \(InteropDestinations.targets(senders))\(input.isLive ? "; Ctrl-C to stop" : "")")
    }

    var summary = TrackSummary(input: input.path, framesPerSecond: input.framesPerSecond)
    let progress = ProgressBar(total: input.expectedFrameCount(options), label: "track", quiet: quiet || json)
    try input.run(options, while: { !stop.isRequested }) { frame in
        for sender in senders { sender.send(frame.output.frame) }
        summary.count(frame)
        progress.update(summary.frames)
    }
    progress.finish()
    summary.destinations = senders.map(InteropDestinations.Summary.init)
    if json {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        print(String(decoding: try encoder.encode(summary), as: UTF8.self))
    } else if !quiet {
        print(summary.table)
    }
    guard summary.tracked > 0 else {
        throw VeilError.invalidInput("no face found in \(input.path) (\(summary.frames) frames), so nothing was sent: make sure a face is in view, lit, and not too small")
    }
}

/// What `veil track` did: frames read and tracked, and what each destination was sent.
struct TrackSummary: Codable {
    var input: String
    var framesPerSecond: Double
    var frames = 0
    var tracked = 0
    var lost = 0
    /// Summed over the frames (the table shows the mean).
    var trackingMillisecondsTotal = 0.0
    var destinations: [InteropDestinations.Summary] = []

    init(input: String, framesPerSecond: Double) { self.input = input; self.framesPerSecond = framesPerSecond }

    mutating func count(_ frame: CaptureLoop.Frame) {
        frames += 1
        if frame.output.frame.state == .tracked { tracked += 1 } else { lost += 1 }
        trackingMillisecondsTotal += frame.trackingMilliseconds
    }

    var table: String {
        var lines = [
            "input            \(input)",
            "frames           \(frames) at \(String(format: "%.3g", framesPerSecond)) fps",
            "tracked          \(tracked) (\(String(format: "%.1f", frames > 0 ? 100 * Double(tracked) / Double(frames) : 0)) %), lost \(lost)",
            "tracking         \(frames > 0 ? String(format: "%.2f ms", trackingMillisecondsTotal / Double(frames)) : "-") per frame",
        ]
        for destination in destinations { lines += destination.lines }
        return lines.joined(separator: "\n")
    }
}

/// A stop signal's way into the capture loop, which checks it before every frame.
private final class StopRequest: Sendable {
    private let requested = Mutex(false)
    func request() { requested.withLock { $0 = true } }
    var isRequested: Bool { requested.withLock { $0 } }
}
