import Foundation
import VeilCairo
import VeilCore
import VeilVision
import VeilMedia
import VeilRender
import VeilSynth
import VeilTracking
import VeilBench
import VeilConsole
#if canImport(Glibc)
import Glibc
#endif

let benchCommand = Command(name: "bench", help: """
USAGE: veil bench [options]

Measures what a call costs on this machine: tracking a 640×480 frame down to its wire bytes (face
detection, face mesh, iris, expression estimation, encoding), drawing the avatar from the decoded
bytes (mask and sketch at 640×480 on the default background, read back as RGB), and the bytes each
frame takes on the wire. The input is the built-in 9 s talking clip, synthesised in memory from two
photos in Veil's cache (astronaut.png and takeo.ppm). Tracking and drawing run on one thread pinned
to CPU 0, after a warm-up that is not counted. Medians are the headline; nothing passes or fails.

Beside Veil, on the same frames and on three annotated photos (speed and landmark error): dlib as
face_recognition runs it and MediaPipe's own Python Face Mesh, each in a child process pinned to
the same core. `bench/peers/setup` (run by `make bench`) installs them once; a peer that is not
installed is reported as such.

Then a real call in this process: an embedded room server on a free port, alice and bob over
WebRTC on this machine, each sending one of the clips tracked in real time at 30 fps with espeak-ng
speech as the voice, and drawing the other at 30 fps. It measures join time (bob joins 5 times,
3 with --quick), capture → remote render latency with its stages (tracking, encoding, network,
jitter buffer, render), expression vs audio bytes per second and the lip-sync offset, over 20 s
of call (5 s with --quick).

Bandwidth (before the call): the same clips sent as ExpressionFrames, as the seed app's landmark
JSON, as VMC blendshape messages over OSC, and as VP8 and H.264 video (500 kbit/s real-time and
constant quality), in bytes per second of payload and on the wire (headers modelled).

Then the room server under load: a real `veil serve` child process on a free loopback port and
N = 100, 500 and 1000 simulated clients (100 and 500 with --quick) joining rooms of 6, holding,
leaving and closing: joins/s, join latency, failures and the server's memory per participant.
Then the same across several nodes: redis-server, three `veil serve --redis` nodes and haproxy with
deploy/haproxy.cfg on loopback, 3000 clients (300 with --quick) through haproxy in rooms of 6
spread over the nodes: join latency and failures, offers and answers between participants on
different nodes timed end to end, each node's memory per participant, and Redis's commands, CPU
and memory. Not run, and reported as such, when redis-server or haproxy is not installed.

Prints a Markdown report on stdout (progress on stderr) and writes it, and the same numbers as JSON
with the date, machine, Swift version and git commit, to DIR/latest.md and DIR/latest.json, and a
chart of the medians and bandwidths to DIR/latest.png.

OPTIONS:
  --out DIR      Where latest.md, latest.json and latest.png go (default bench/results)
  --quick        90 frames per clip instead of all 270: well under a minute
  --frames N     Frames per clip, 20…270 (overrides --quick)
  --no-pin       Let the scheduler move the thread between cores
  --no-video     Skip timing the read-back of the clip from an H.264 MP4
  --no-call      Skip the two-person call
  --no-bandwidth Skip the bandwidth comparison (and its video encodes)
  --no-peers     Skip dlib and MediaPipe (installed by bench/peers/setup, which `make bench` runs)
  --no-server-load  Skip the room server under load
  --no-cluster-load Skip the several nodes behind haproxy
  --cluster-clients N  Clients across the nodes, 6…20000 (default 3000, 300 with --quick)
  --no-latency   Skip mouth-to-ear through the relay (Veil and Chromium side by side)
  --quiet        No progress output (the report is still printed)
  --redraw FILE  Measure nothing: write latest.md and latest.png again from a saved latest.json
                 (after a change to how reports are written)
""", run: runBench)

func runBench(_ argv: [String]) throws {
    let args = try Arguments(argv, valued: ["out", "frames", "redraw", "cluster-clients"],
                             booleans: ["quick", "no-pin", "no-video", "no-call", "no-bandwidth", "no-peers", "no-server-load", "no-cluster-load",
                                        "no-latency", "quiet"])
    guard args.positionals.isEmpty else {
        throw UsageError("bench takes no arguments, only options (got \(args.positionals.joined(separator: " ")))")
    }
    let outputDirectory = URL(fileURLWithPath: args.value("out") ?? "bench/results", isDirectory: true)
    if let saved = args.value("redraw") {
        let report: BenchReport
        do {
            report = try JSONDecoder().decode(BenchReport.self, from: Data(contentsOf: URL(fileURLWithPath: saved)))
        } catch {
            throw VeilError.io("cannot read the saved report \(saved) (\(error)); give a latest.json that veil bench wrote")
        }
        try write(report, withJSON: false, into: outputDirectory, quiet: args.flag("quiet"))
        return
    }
    var bench = Benchmark()
    let allFrames = bench.script.frameCount
    bench.framesPerClip = try args.int("frames", default: args.flag("quick") ? min(90, allFrames) : allFrames,
                                       range: 20...allFrames)
    bench.quick = args.flag("quick")
    bench.pin = !args.flag("no-pin")
    bench.timeVideoRead = !args.flag("no-video")
    bench.measureCall = !args.flag("no-call")
    bench.measureBandwidth = !args.flag("no-bandwidth")
    bench.measurePeers = !args.flag("no-peers")
    bench.measureServerLoad = !args.flag("no-server-load")
    bench.measureClusterLoad = !args.flag("no-cluster-load")
    bench.clusterClients = try args.int("cluster-clients", default: args.flag("quick") ? 300 : 3000, range: 6...20000)
    bench.measureLatency = !args.flag("no-latency")
    bench.quiet = args.flag("quiet")
    try write(try bench.run(), withJSON: true, into: outputDirectory, quiet: bench.quiet)
}

/// Prints the report and writes latest.md, latest.png and (unless redrawing a saved one) latest.json.
private func write(_ report: BenchReport, withJSON: Bool, into outputDirectory: URL, quiet: Bool) throws {
    let markdown = report.markdown
    print(markdown)
    do {
        try FileManager.default.createDirectory(at: outputDirectory, withIntermediateDirectories: true)
        try Data(markdown.utf8).write(to: outputDirectory.appendingPathComponent("latest.md"), options: .atomic)
        if withJSON { try report.json().write(to: outputDirectory.appendingPathComponent("latest.json"), options: .atomic) }
        try report.chart.writePNG(to: outputDirectory.appendingPathComponent("latest.png").path)
    } catch {
        throw VeilError.io("cannot write the results into \(outputDirectory.path) (\(error.localizedDescription)); give a writable --out DIR")
    }
    if !quiet { Terminal.note("wrote \(outputDirectory.path)/latest.md\(withJSON ? ", latest.json" : "") and latest.png") }
}
