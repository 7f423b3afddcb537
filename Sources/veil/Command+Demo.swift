import Foundation
import VeilCairo
import VeilCore
import VeilVision
import VeilMedia
import VeilRender
import VeilSynth
import VeilConsole

let demoCommand = Command(name: "demo", help: """
USAGE: veil demo [--out DIR] [--seconds S]
       veil demo --offline [--out DIR] [--photo PHOTO]

Without --offline (what `make demo` runs): a real call on this machine. An embedded room server
starts on a free local port; two participants, alice and bob, join one room over WebRTC, each fed
by a talking-face clip made from a different photo and by speech from espeak-ng. About 10 s,
including a mute toggle and a background switch. Writes to DIR (default out/):

  alice.mp4, bob.mp4   what each participant saw and heard
  report.json          join time, RTT, loss, expression and audio traffic, lip-sync offsets
  *-camera.mp4         the clips that stood in for the cameras (they never left their sender)

and prints a table of the figures.

With --offline: Veil's offline pipeline end to end on a built-in photo: makes a 9-second talking-face clip from
it (jaw, blinks, smiles, brow raises, a head turn), tracks it, sends every frame through the wire
format, and renders the avatar from the decoded bytes alone. Writes to DIR (default out/):

  input.mp4            the synthetic talking face (what a camera would see)
  input.truth.jsonl    its scripted ground truth
  avatar.mp4           the avatar, mask style (what the other side would see)
  inspection.mp4       input with the tracked landmarks | avatar, side by side
  expressions.jsonl    one line per frame: the decoded ExpressionFrame, ARKit names
  preview.png          key moments: input | sketch | mask
  summary.json         the figures printed at the end

OPTIONS:
  --out DIR       Output folder (default out)
  --photo PHOTO   Another photo with one face to animate instead of the built-in one
""", run: runDemo)

func runDemo(_ argv: [String]) throws {
    let args = try Arguments(argv, valued: ["out", "photo", "seconds"], booleans: ["quiet", "offline"])
    guard args.positionals.isEmpty else { throw UsageError("demo takes no positional arguments") }
    if !args.flag("offline") {
        try runCallDemo(out: URL(fileURLWithPath: args.value("out") ?? "out", isDirectory: true),
                        seconds: TimeInterval(args.value("seconds") ?? "10") ?? 10, quiet: args.flag("quiet"))
        return
    }
    let out = URL(fileURLWithPath: args.value("out") ?? "out", isDirectory: true)
    let photo = try args.value("photo") ?? VeilResources.file("photos", "astronaut.png").path
    let quiet = args.flag("quiet")
    try FileManager.default.createDirectory(at: out, withIntermediateDirectories: true)
    func path(_ name: String) -> String { out.appendingPathComponent(name).path }

    if !quiet { Terminal.note("1/3 synthesising a talking face from \((photo as NSString).lastPathComponent)") }
    let script = ExpressionScript.talking
    try synthesize(photo: photo, output: path("input.mp4"), truthPath: path("input.truth.jsonl"), script: script,
                   size: (640, 480), quiet: quiet)

    if !quiet { Terminal.note("2/3 tracking it and rendering the avatar from the wire bytes") }
    var received: [ExpressionFrame] = []
    var inputs: [Int: (RGBImage, Rect?)] = [:]
    let truth = script.groundTruth
    let moments = keyMoments(truth)
    var job = RenderJob(input: path("input.mp4"), output: path("avatar.mp4"))
    job.expressionsPath = path("expressions.jsonl")
    job.quiet = quiet
    job.onFrame = { index, frame, image, face in
        received.append(frame)
        if moments.contains(where: { $0.frame == index }) { inputs[index] = (image, face) }
    }
    let summary = try job.run()
    var inspection = RenderJob(input: path("input.mp4"), output: path("inspection.mp4"))
    inspection.sideBySide = true
    inspection.quiet = true
    _ = try inspection.run()

    if !quiet { Terminal.note("3/3 writing the preview and summary") }
    try writePreview(moments: moments, inputs: inputs, received: received, to: path("preview.png"))
    let fidelity = Fidelity(truth: truth, received: received)
    let report = DemoReport(summary: summary, fidelity: fidelity, outputs: ["input.mp4", "avatar.mp4", "inspection.mp4", "expressions.jsonl", "preview.png"].map(path))
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    try encoder.encode(report).write(to: URL(fileURLWithPath: path("summary.json")))

    print(summary.table)
    print(fidelity.table)
    let wireTotal = summary.wireBytes.reduce(0, +)
    let inputBytes = (try? FileManager.default.attributesOfItem(atPath: path("input.mp4"))[.size] as? Int) ?? nil
    let seconds = script.duration
    print("""
    on the wire      \(wireTotal) B in \(String(format: "%.1f", seconds)) s = \(String(format: "%.2f", Double(wireTotal) / seconds / 1000)) kB/s of ExpressionFrames; \
    the same clip as H.264 is \(inputBytes.map { String(format: "%.0f kB/s", Double($0) / seconds / 1000) } ?? "?"), and it never leaves the device
    written to       \(out.path)/ (avatar.mp4, inspection.mp4, preview.png, summary.json, …)
    """)
}

/// Frames worth showing: a rest, the widest mouth, a blink, the biggest smile, a brow raise, the turn.
func keyMoments(_ truth: [GroundTruthFrame]) -> [(frame: Int, label: String)] {
    func best(_ key: (GroundTruthFrame) -> Double) -> Int { truth.max { key($0) < key($1) }?.frame ?? 0 }
    var result: [(Int, String)] = [(min(10, truth.count - 1), "rest"), (best { $0.jawDrop }, "jaw open"),
                                   (best { min($0.blinkLeft, $0.blinkRight) }, "blink"), (best { $0.smile }, "smile"),
                                   (best { $0.browRaise }, "brows up"), (best { $0.headYaw }, "head turn")]
    result = result.filter { $0.0 >= 0 }
    return result.map { (frame: $0.0, label: $0.1) }
}

/// A contact sheet: one row per moment, input | sketch | mask.
func writePreview(moments: [(frame: Int, label: String)], inputs: [Int: (RGBImage, Rect?)], received: [ExpressionFrame], to path: String) throws {
    let cell = (w: 320, h: 240)
    let canvas = try CairoCanvas(width: cell.w * 3, height: cell.h * moments.count)
    canvas.clear(Color(white: 0.08))
    let renderer = AvatarRenderer()
    for (row, moment) in moments.enumerated() {
        let y = Float(row * cell.h)
        let cellRect = Rect(x: 0, y: y, width: Float(cell.w), height: Float(cell.h))
        if let (image, face) = inputs[moment.frame] {
            // Zoom the input onto the face so the expression can be compared with the avatar's.
            var crop = Rect(x: 0, y: 0, width: Float(image.width), height: Float(image.height))
            if let face {
                let h = max(face.height, face.width * 0.75) * 1.8
                crop = Rect(x: face.center.x - h * 2 / 3, y: face.center.y - h / 2, width: h * 4 / 3, height: h)
            }
            let scale = cellRect.width / crop.width
            canvas.save()
            canvas.clip(to: cellRect)
            canvas.drawImage(image, in: Rect(x: cellRect.x - crop.x * scale, y: cellRect.y - crop.y * scale,
                                             width: Float(image.width) * scale, height: Float(image.height) * scale))
            canvas.restore()
        }
        let expression = moment.frame < received.count ? received[moment.frame].expression : .neutral
        renderer.render(expression, into: canvas, rect: Rect(x: Float(cell.w), y: y, width: Float(cell.w), height: Float(cell.h)),
                        style: .sketch, background: AvatarBackground.default)
        renderer.render(expression, into: canvas, rect: Rect(x: Float(2 * cell.w), y: y, width: Float(cell.w), height: Float(cell.h)),
                        style: .mask, background: AvatarBackground.default)
        if canvas.supportsText {
            canvas.drawText("\(moment.label) (frame \(moment.frame))", at: Point2(8, y + 20), size: 15, color: Color(white: 1))
        }
    }
    try canvas.writePNG(to: path)
}

/// How well the decoded expressions follow the script the clip was made from.
struct Fidelity: Codable {
    var blinksScripted = 0
    var blinksFound = 0
    var smileCorrelation = 0.0
    var browCorrelation = 0.0
    var yawCorrelation = 0.0
    var jawCorrelation = 0.0

    init(truth: [GroundTruthFrame], received: [ExpressionFrame]) {
        let pairs = zip(truth, received).filter { $0.1.state == .tracked }
        let corr = pearsonCorrelation
        let t = pairs.map(\.0), e = pairs.map { $0.1.expression }
        smileCorrelation = corr(t.map(\.smile), e.map { Double($0[.mouthSmileLeft] + $0[.mouthSmileRight]) / 2 })
        browCorrelation = corr(t.map(\.browRaise), e.map { Double($0[.browInnerUp]) })
        yawCorrelation = corr(t.map(\.headYaw), e.map { Double($0.headPose.yaw) })
        jawCorrelation = corr(t.map(\.jawDrop), e.map { Double($0[.jawOpen]) })
        func events(_ on: [Bool]) -> Int { zip(on, [false] + on).filter { $0 && !$1 }.count }
        blinksScripted = events(truth.map { min($0.blinkLeft, $0.blinkRight) > 0.5 })
        blinksFound = events(received.map { $0.state == .tracked && ($0.expression[.eyeBlinkLeft] + $0.expression[.eyeBlinkRight]) / 2 > 0.5 })
    }

    var table: String {
        String(format: """
        fidelity         blinks %d scripted, %d found; correlation with the script: jaw %.2f, smile %.2f, brows %.2f, head turn %.2f
        """, blinksScripted, blinksFound, jawCorrelation, smileCorrelation, browCorrelation, yawCorrelation)
    }
}

struct DemoReport: Codable {
    var summary: RenderJob.Summary
    var fidelity: Fidelity
    var outputs: [String]
}
