import Foundation
import VeilCairo
import VeilCore
import VeilVision
import VeilMedia
import VeilRender
import VeilConsole

/// Reads the JSON lines `veil render --expressions` writes back into ExpressionFrames: what a
/// receiver would have got, so the avatar can be drawn again without the video it came from.
func readExpressionLines(_ path: String) throws -> [ExpressionFrame] {
    guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
        throw VeilError.invalidInput("cannot read \(path): no such file, or not UTF-8 text")
    }
    var frames: [ExpressionFrame] = []
    for (lineIndex, line) in text.split(separator: "\n", omittingEmptySubsequences: true).enumerated() {
        guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
            throw VeilError.invalidInput("\(path):\(lineIndex + 1): not a JSON object")
        }
        func number(_ value: Any?) -> Float? { (value as? NSNumber)?.floatValue }
        let state: ExpressionFrame.State = (object["state"] as? String) == "lost" ? .lost : .tracked
        var expression = VeilCore.Expression()
        if let shapes = object["blendshapes"] as? [String: Any] {
            for (name, value) in shapes {
                guard let shape = BlendShape(name: name) else {
                    throw VeilError.invalidInput("\(path):\(lineIndex + 1): unknown blendshape \(name)")
                }
                expression[shape] = number(value) ?? 0
            }
        }
        if let pose = object["headPose"] as? [String: Any] {
            expression.headPose = HeadPose(yaw: number(pose["yaw"]) ?? 0, pitch: number(pose["pitch"]) ?? 0, roll: number(pose["roll"]) ?? 0)
        }
        if let gaze = object["gaze"] as? [String: Any], let x = number(gaze["x"]), let y = number(gaze["y"]) {
            expression.gaze = Gaze(x: x, y: y)
        }
        let time = (object["timeMicros"] as? NSNumber)?.uint64Value ?? UInt64(frames.count) * 33_333
        frames.append(ExpressionFrame(sequence: UInt32(truncatingIfNeeded: frames.count), captureTimeMicros: time,
                                      state: state, expression: expression))
    }
    guard !frames.isEmpty else { throw VeilError.invalidInput("\(path) holds no expression lines") }
    return frames
}

/// Draws the avatar for every line of an expressions file (the receiving side alone).
func renderExpressionLines(_ frames: [ExpressionFrame], output: String, size: (width: Int, height: Int),
                           style: AvatarStyle, background: AvatarBackground, quiet: Bool) throws {
    let canvas = try CairoCanvas(width: size.width, height: size.height)
    let renderer = AvatarRenderer()
    try createParent(of: output)
    let writer = try VideoWriter(url: URL(fileURLWithPath: output), width: size.width, height: size.height, framesPerSecond: 30)
    let progress = ProgressBar(total: frames.count, label: "render", quiet: quiet)
    var image = RGBImage(width: size.width, height: size.height)
    var shown = VeilCore.Expression.neutral
    for (index, frame) in frames.enumerated() {
        if frame.state == .tracked { shown = frame.expression }
        renderer.render(shown, into: canvas, rect: Rect(x: 0, y: 0, width: Float(size.width), height: Float(size.height)),
                        style: style, background: background)
        canvas.copy(into: &image)
        try writer.write(image)
        progress.update(index + 1)
    }
    try writer.finish()
    progress.finish()
}
