import Foundation
import VeilCairo
import VeilCameraSource
import VeilCore
import VeilVision
import VeilMedia
import VeilRender
import VeilTracking
import VeilConsole

let renderCommand = Command(name: "render", help: """
USAGE: veil render INPUT -o OUTPUT [options]

Tracks the face in INPUT, reduces every frame to an ExpressionFrame (the bytes a call would send),
decodes those bytes as the other side would, and renders the canonical avatar from them alone.

INPUT     a video file (anything GStreamer's decodebin reads), an image, an image sequence
          (frames/%05d.png) or a camera (/dev/video0); or a .jsonl file written by --expressions, to
          draw the avatar again from the expressions alone (what the receiving side does)
OUTPUT    .mp4 (H.264), .webm (VP8), .mkv, a PNG frame pattern (out/%05d.png), or .png for a still

OPTIONS:
  -o, --output OUTPUT        Where the avatar goes
  --style sketch|mask        Avatar style (default mask)
  --background BG            none, black, white, #rrggbb, gradient, gradient:#top,#bottom, or an image file
                             (default: a dark blue gradient)
  --expressions FILE.jsonl   Also write one JSON line per frame: state, wire bytes, pose, gaze, and the
                             52 blendshapes by ARKit name
  --side-by-side             Output input | avatar, with the tracked face rectangle and landmarks drawn on
                             the input (for inspection: this view shows the face, the wire never does)
  --size WxH                 Avatar view size (default: the input's size)
  --max-frames N             Stop after N frames (a camera runs until Ctrl-C otherwise)
\(Arguments.privacyHelp)
                           (render has no voice: at strict the mouth follows the camera)
  --quiet                    No progress bar or summary

The summary reports frames, % tracked, ms per frame for tracking and rendering, and wire bytes per frame.
""", run: runRender)

func runRender(_ argv: [String]) throws {
    let args = try Arguments(argv, valued: ["output", "style", "background", "expressions", "size", "max-frames", "privacy"],
                             booleans: ["side-by-side", "quiet", "full-expression"], aliases: ["o": "output"])
    guard args.positionals.count == 1 else { throw UsageError("render needs exactly one INPUT") }
    guard let output = args.value("output") else { throw UsageError("render needs -o OUTPUT") }
    if args.positionals[0].lowercased().hasSuffix(".jsonl") {
        let frames = try readExpressionLines(args.positionals[0])
        try renderExpressionLines(frames, output: output, size: try args.size("size", default: (640, 480)),
                                  style: try parseStyle(args.value("style")), background: try parseBackground(args.value("background")),
                                  quiet: args.flag("quiet"))
        if !args.flag("quiet") { print("rendered \(frames.count) frames from \(args.positionals[0]) to \(output)") }
        return
    }
    var job = RenderJob(input: args.positionals[0], output: output)
    job.style = try parseStyle(args.value("style"))
    job.background = try parseBackground(args.value("background"))
    job.expressionsPath = args.value("expressions")
    job.sideBySide = args.flag("side-by-side")
    job.privacy = try args.privacyLevel()
    job.size = args.value("size") == nil ? nil : try args.size("size", default: (640, 480))
    job.maxFrames = try args.int("max-frames", default: Int.max, range: 1...Int.max)
    job.quiet = args.flag("quiet")
    let summary = try job.run()
    if !job.quiet { print(summary.table) }
    guard summary.trackedFrames > 0 else {
        throw VeilError.invalidInput("no face found in \(job.input) (\(summary.frames) frames): make sure a face is in view, lit, and not too small")
    }
}

/// The offline pipeline: source → tracker → estimator → wire bytes → decoder → avatar → sink.
struct RenderJob {
    var input: String
    var output: String
    var style: AvatarStyle = .mask
    var background: AvatarBackground = AvatarBackground.default
    var expressionsPath: String?
    var sideBySide = false
    /// The privacy level of the expressions rendered (and written with `--expressions`).
    var privacy = PrivacyLevel.default
    var size: (width: Int, height: Int)?
    var maxFrames = Int.max
    var quiet = false
    /// Called with each frame as the receiver decoded it, the input image and, for local
    /// inspection only, the tracked face's rectangle.
    var onFrame: ((Int, ExpressionFrame, RGBImage, Rect?) -> Void)?

    struct Summary: Codable {
        var input: String
        var output: String
        var frames = 0
        var trackedFrames = 0
        var detections = 0
        var trackingMilliseconds: [Double] = []
        var renderMilliseconds: [Double] = []
        var wireBytes: [Int] = []

        var trackedPercent: Double { frames > 0 ? 100 * Double(trackedFrames) / Double(frames) : 0 }

        var table: String {
            func ms(_ v: [Double]) -> String {
                guard !v.isEmpty else { return "-" }
                return String(format: "%.2f ms (median %.2f)", v.reduce(0, +) / Double(v.count), median(v))
            }
            let bytes = wireBytes.isEmpty ? "-" : String(format: "mean %.1f B, max %d B", Double(wireBytes.reduce(0, +)) / Double(wireBytes.count), wireBytes.max() ?? 0)
            return """
            input            \(input)
            output           \(output)
            frames           \(frames)
            tracked          \(trackedFrames) (\(String(format: "%.1f", trackedPercent)) %), face detector ran on \(detections)
            tracking         \(ms(trackingMilliseconds)) per frame
            rendering        \(ms(renderMilliseconds)) per frame
            wire             \(bytes) per frame
            """
        }
    }

    func run() throws -> Summary {
        let capture = try CaptureLoop(path: input, privacy: privacy)
        let options = CaptureLoop.Options(frameLimit: maxFrames)
        let avatarSize = evenSize(size ?? capture.size)
        let outputSize = (width: avatarSize.width * (sideBySide ? 2 : 1), height: avatarSize.height)
        let canvas = try CairoCanvas(width: outputSize.width, height: outputSize.height)
        let renderer = AvatarRenderer()
        let still = output.lowercased().hasSuffix(".png") && !output.contains("%")
        try createParent(of: output)
        let writer = still ? nil : try VideoWriter(url: URL(fileURLWithPath: output), width: outputSize.width,
                                                   height: outputSize.height,
                                                   framesPerSecond: Int(capture.framesPerSecond.rounded()))
        var jsonl: FileHandle?
        if let path = expressionsPath {
            try createParent(of: path)
            guard FileManager.default.createFile(atPath: path, contents: nil), let handle = FileHandle(forWritingAtPath: path) else {
                throw VeilError.io("cannot write \(path)")
            }
            jsonl = handle
        }
        defer { try? jsonl?.close() }

        var summary = Summary(input: input, output: output)
        let progress = ProgressBar(total: capture.expectedFrameCount(options), label: "render", quiet: quiet)
        var out = RGBImage(width: outputSize.width, height: outputSize.height)
        var lastShown = VeilCore.Expression.neutral
        try capture.run(options) { frame in
            let result = frame.output
            let t1 = monotonicMilliseconds()
            // The avatar is drawn only from what a receiver gets: the decoded bytes.
            let bytes = result.frame.encoded()
            let received = try ExpressionFrame(decoding: bytes)
            if received.state == .tracked { lastShown = received.expression }
            let avatarRect = Rect(x: Float(sideBySide ? avatarSize.width : 0), y: 0,
                                  width: Float(avatarSize.width), height: Float(avatarSize.height))
            if sideBySide {
                drawInspection(frame.video.image, tracking: result.tracking,
                               rect: Rect(x: 0, y: 0, width: Float(avatarSize.width), height: Float(avatarSize.height)), on: canvas)
            }
            renderer.render(received.state == .tracked ? received.expression : lastShown, into: canvas, rect: avatarRect,
                            style: style, background: background)
            if received.state == .lost, canvas.supportsText {
                canvas.drawText("no face in view", at: Point2(avatarRect.x + 10, avatarRect.y + 24), size: 16,
                                color: Color(red: 1, green: 0.85, blue: 0.3))
            }
            canvas.copy(into: &out)
            let t2 = monotonicMilliseconds()
            if still { try ImageIO.savePNG(out, to: URL(fileURLWithPath: output)) } else { try writer?.write(out) }
            onFrame?(summary.frames, received, frame.video.image, result.tracking.landmarks?.boundingBox)
            if let jsonl { jsonl.write(Data((expressionLine(received, frame: summary.frames, bytes: bytes.count, confidence: result.tracking.confidence) + "\n").utf8)) }

            summary.frames += 1
            if received.state == .tracked { summary.trackedFrames += 1 }
            if result.tracking.ranDetection { summary.detections += 1 }
            summary.trackingMilliseconds.append(frame.trackingMilliseconds)
            summary.renderMilliseconds.append(t2 - t1)
            summary.wireBytes.append(bytes.count)
            progress.update(summary.frames)
        }
        progress.finish()
        if summary.frames > 0 { try writer?.finish() }
        return summary
    }

    /// The input frame with what the tracker found: face rectangle and landmark regions.
    private func drawInspection(_ image: RGBImage, tracking: TrackingResult, rect: Rect, on canvas: CairoCanvas) {
        canvas.drawImage(image, in: rect)
        guard let landmarks = tracking.landmarks, image.width > 0 else { return }
        let sx = rect.width / Float(image.width), sy = rect.height / Float(image.height)
        func map(_ p: Point2) -> Point2 { Point2(rect.x + p.x * sx, rect.y + p.y * sy) }
        let box = landmarks.boundingBox
        canvas.beginPath()
        canvas.addRect(Rect(x: rect.x + box.x * sx, y: rect.y + box.y * sy, width: box.width * sx, height: box.height * sy))
        canvas.strokePath(Color(red: 0.3, green: 0.9, blue: 0.4), style: StrokeStyle(width: 2))
        for region in FaceRegion.allCases {
            let points = landmarks[region].map(map)
            guard !points.isEmpty else { continue }
            let closed = [.faceContour, .leftEye, .rightEye, .outerLips, .innerLips, .leftEyebrow, .rightEyebrow].contains(region)
            canvas.beginPath()
            if points.count == 1 {
                canvas.addEllipse(in: Rect(x: points[0].x - 2.5, y: points[0].y - 2.5, width: 5, height: 5))
                canvas.fillPath(Color(red: 1, green: 0.3, blue: 0.3))
            } else {
                canvas.addPolyline(points, closed: closed)
                canvas.strokePath(Color(red: 1, green: 0.85, blue: 0.2, alpha: 0.9), style: StrokeStyle(width: 1.2))
            }
        }
    }
}

/// One JSON object per frame, blendshapes in ARKit order.
func expressionLine(_ frame: ExpressionFrame, frame index: Int, bytes: Int, confidence: Float) -> String {
    func f(_ v: Float) -> String { String(format: "%.4f", v) }
    var s = "{\"frame\":\(index),\"sequence\":\(frame.sequence),\"timeMicros\":\(frame.captureTimeMicros)"
    s += ",\"state\":\"\(frame.state == .tracked ? "tracked" : "lost")\",\"wireBytes\":\(bytes),\"confidence\":\(f(confidence))"
    let p = frame.expression.headPose
    s += ",\"headPose\":{\"yaw\":\(f(p.yaw)),\"pitch\":\(f(p.pitch)),\"roll\":\(f(p.roll))}"
    if let g = frame.expression.gaze { s += ",\"gaze\":{\"x\":\(f(g.x)),\"y\":\(f(g.y))}" }
    s += ",\"blendshapes\":{" + BlendShape.allCases.map { "\"\($0.name)\":\(f(frame.expression[$0]))" }.joined(separator: ",") + "}}"
    return s
}

func evenSize(_ size: (width: Int, height: Int)) -> (width: Int, height: Int) {
    (max(size.width - size.width % 2, 16), max(size.height - size.height % 2, 16))
}

func median(_ values: [Double]) -> Double {
    guard !values.isEmpty else { return 0 }
    let s = values.sorted()
    return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
}

