import Foundation
import VeilCore
import VeilVision
import VeilMedia
import VeilSynth
import VeilTracking
import VeilConsole

let synthCommand = Command(name: "synth", help: """
USAGE: veil synth PHOTO -o CLIP [options]

Animates a real photo into a talking-face clip with a scripted expression timeline (jaw, blinks,
smiles, brow raises, a head turn) by piecewise-affine warping of the face mesh Veil finds on it,
and writes the ground truth next to it. Used by the tests, the demo and the benchmarks.

OPTIONS:
  -o, --output CLIP      Output video: .mp4 (H.264), .webm (VP8), .mkv, or a frame pattern like frames/%05d.png
  --script FILE          Timeline as JSON or compact text (see docs/synthetic-clips.md); default: built-in 9 s talk
  --truth FILE           Ground truth JSON lines (default: CLIP with .truth.jsonl)
  --size WxH             Frame size; the photo is letterboxed into it (default 640x480)
  --quiet                No progress output
""", run: runSynth)

func runSynth(_ argv: [String]) throws {
    let args = try Arguments(argv, valued: ["output", "script", "truth", "size"], booleans: ["quiet"], aliases: ["o": "output"])
    guard args.positionals.count == 1 else { throw UsageError("synth needs exactly one PHOTO") }
    guard let output = args.value("output") else { throw UsageError("synth needs -o CLIP") }
    let size = try args.size("size", default: (640, 480))
    let script = try args.value("script").map { try ExpressionScript(contentsOf: URL(fileURLWithPath: $0)) } ?? .talking
    let truthPath = args.value("truth") ?? defaultTruthPath(for: output)
    let result = try synthesize(photo: args.positionals[0], output: output, truthPath: truthPath, script: script,
                                size: size, quiet: args.flag("quiet"))
    if !args.flag("quiet") {
        Terminal.note("wrote \(output) (\(result.frames) frames, \(String(format: "%.1f", script.duration)) s) and \(truthPath)")
    }
}

func defaultTruthPath(for output: String) -> String {
    let url = URL(fileURLWithPath: output.replacingOccurrences(of: "%", with: ""))
    return url.deletingPathExtension().path + ".truth.jsonl"
}

/// Synthesises `script` on the face in `photo` and writes the clip and its ground truth.
@discardableResult
func synthesize(photo: String, output: String, truthPath: String, script: ExpressionScript,
                size: (width: Int, height: Int), quiet: Bool) throws -> (frames: Int, photoFace: Rect) {
    let url = URL(fileURLWithPath: photo)
    guard FileManager.default.isReadableFile(atPath: url.path) else {
        throw VeilError.invalidInput("cannot read \(photo): no such file, or not readable")
    }
    let (image, _, _) = try ImageIO.load(url).letterboxed(width: size.width, height: size.height)
    let tracker = try MediaPipeFaceTracker()
    guard let landmarks = try tracker.landmarks(inStill: image), let mesh = landmarks.mesh else {
        throw VeilError.invalidInput("no face found in \(photo): use a photo with one face, looking roughly at the camera")
    }
    let synth = try TalkingFaceSynthesizer(photo: image, mesh: mesh, topology: tracker.topology)
    try createParent(of: output)
    let writer = try VideoWriter(url: URL(fileURLWithPath: output), width: size.width, height: size.height,
                                 framesPerSecond: Int(script.framesPerSecond.rounded()))
    let progress = ProgressBar(total: script.frameCount, label: "synth", quiet: quiet)
    var frame = RGBImage(width: size.width, height: size.height)
    for index in 0..<script.frameCount {
        synth.frame(at: script.state(ofFrame: index), into: &frame)
        try writer.write(frame)
        progress.update(index + 1)
    }
    try writer.finish()
    progress.finish()
    try createParent(of: truthPath)
    try script.groundTruthJSONLines().write(toFile: truthPath, atomically: true, encoding: .utf8)
    return (script.frameCount, landmarks.boundingBox)
}

func createParent(of path: String) throws {
    let dir = URL(fileURLWithPath: path).deletingLastPathComponent()
    do { try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true) } catch {
        throw VeilError.io("cannot create \(dir.path): \(error.localizedDescription)")
    }
}
