import Foundation
import XCTest
import VeilCore
import VeilVision
import VeilRender
import VeilCairo

/// Named expressions used by the tests and the contact sheet.
enum Sample {
    static func expression(_ values: [BlendShape: Float] = [:], yaw: Float = 0, pitch: Float = 0, roll: Float = 0,
                           gaze: Gaze? = nil) -> VeilCore.Expression {
        var e = VeilCore.Expression(headPose: HeadPose(yaw: yaw, pitch: pitch, roll: roll), gaze: gaze)
        for (k, v) in values { e[k] = v }
        return e
    }

    static let gallery: [(String, VeilCore.Expression)] = [
        ("neutral", expression()),
        ("blink L", expression([.eyeBlinkLeft: 1])),
        ("jaw open", expression([.jawOpen: 1])),
        ("smile", expression([.mouthSmileLeft: 1, .mouthSmileRight: 1, .cheekSquintLeft: 0.5, .cheekSquintRight: 0.5])),
        ("laugh", expression([.mouthSmileLeft: 1, .mouthSmileRight: 1, .jawOpen: 0.5, .eyeSquintLeft: 0.6, .eyeSquintRight: 0.6])),
        ("frown", expression([.mouthFrownLeft: 1, .mouthFrownRight: 1, .browDownLeft: 0.6, .browDownRight: 0.6])),
        ("surprise", expression([.browInnerUp: 1, .browOuterUpLeft: 1, .browOuterUpRight: 1, .eyeWideLeft: 1, .eyeWideRight: 1, .jawOpen: 0.6])),
        ("angry", expression([.browDownLeft: 1, .browDownRight: 1, .eyeSquintLeft: 0.5, .eyeSquintRight: 0.5, .mouthPressLeft: 1, .mouthPressRight: 1])),
        ("sad", expression([.browInnerUp: 1, .mouthFrownLeft: 0.7, .mouthFrownRight: 0.7, .mouthShrugLower: 0.5])),
        ("pucker", expression([.mouthPucker: 1])),
        ("funnel", expression([.mouthFunnel: 1, .jawOpen: 0.3])),
        ("mouth left", expression([.mouthLeft: 1])),
        ("stretch", expression([.mouthStretchLeft: 1, .mouthStretchRight: 1, .jawOpen: 0.2])),
        ("puff", expression([.cheekPuff: 1])),
        ("tongue", expression([.tongueOut: 1, .jawOpen: 0.4])),
        ("wink R smile", expression([.eyeBlinkRight: 1, .mouthSmileRight: 1, .mouthSmileLeft: 0.4])),
        ("yaw +25", expression(yaw: 25)),
        ("yaw -40 smile", expression([.mouthSmileLeft: 0.8, .mouthSmileRight: 0.8], yaw: -40)),
        ("pitch +20", expression(pitch: 20)),
        ("pitch -20", expression(pitch: -20)),
        ("roll +20", expression(roll: 20)),
        ("gaze right", expression(gaze: Gaze(x: 1, y: 0))),
        ("gaze down-left", expression(gaze: Gaze(x: -0.8, y: -0.8))),
        ("yaw 30 pitch 15 talk", expression([.jawOpen: 0.7, .mouthFunnel: 0.3], yaw: 30, pitch: 15, roll: -10)),
    ]
}

/// Pixel helpers over packed RGB images.
extension RGBImage {
    func pixel(_ x: Int, _ y: Int) -> SIMD3<Int> {
        let i = (y * width + x) * 3
        return SIMD3(Int(pixels[i]), Int(pixels[i + 1]), Int(pixels[i + 2]))
    }

    /// Sum of absolute channel differences inside `rect` (clamped to the image), and outside it.
    func difference(from other: RGBImage, inside rect: Rect) -> (inside: Int, outside: Int) {
        var inside = 0, outside = 0
        let x0 = Int(rect.x.rounded(.down)), y0 = Int(rect.y.rounded(.down))
        let x1 = Int((rect.x + rect.width).rounded(.up)), y1 = Int((rect.y + rect.height).rounded(.up))
        for y in 0..<height {
            for x in 0..<width {
                let i = (y * width + x) * 3
                let d = abs(Int(pixels[i]) - Int(other.pixels[i])) + abs(Int(pixels[i + 1]) - Int(other.pixels[i + 1]))
                    + abs(Int(pixels[i + 2]) - Int(other.pixels[i + 2]))
                if x >= x0 && x < x1 && y >= y0 && y < y1 { inside += d } else { outside += d }
            }
        }
        return (inside, outside)
    }

    /// Centroid of pixels whose difference from `other` exceeds `threshold`.
    func changedCentroid(from other: RGBImage, threshold: Int = 30) -> Point2? {
        var sx = 0.0, sy = 0.0, n = 0.0
        for y in 0..<height {
            for x in 0..<width {
                let i = (y * width + x) * 3
                let d = abs(Int(pixels[i]) - Int(other.pixels[i])) + abs(Int(pixels[i + 1]) - Int(other.pixels[i + 1]))
                    + abs(Int(pixels[i + 2]) - Int(other.pixels[i + 2]))
                if d > threshold { sx += Double(x); sy += Double(y); n += 1 }
            }
        }
        return n > 0 ? Point2(Float(sx / n), Float(sy / n)) : nil
    }
}

extension Rect {
    func expanded(by margin: Float) -> Rect {
        Rect(x: x - margin, y: y - margin, width: width + 2 * margin, height: height + 2 * margin)
    }
}

/// Renders one expression into a fresh canvas and returns the pixels.
func renderImage(_ expression: VeilCore.Expression, width: Int = 640, height: Int = 480, style: AvatarStyle = .mask,
                 background: AvatarBackground = .solid(Color(rgb8: 0x20, 0x28, 0x38))) throws -> RGBImage {
    let canvas = try CairoCanvas(width: width, height: height)
    let renderer = AvatarRenderer()
    renderer.render(expression, into: canvas, rect: Rect(x: 0, y: 0, width: Float(width), height: Float(height)),
                    style: style, background: background)
    return canvas.rgbImage()
}

/// The projected pose of `expression` in a 640×480 view.
func pose(_ expression: VeilCore.Expression, width: Float = 640, height: Float = 480) -> AvatarPose {
    AvatarRig.canonical.pose(for: expression, in: Rect(x: 0, y: 0, width: width, height: height))
}

/// Draws every gallery expression in both styles (and as thumbnails) onto one sheet.
func writeContactSheet(to path: String) throws {
    let cellW = 240, cellH = 180, thumbW = 160, thumbH = 120
    let columns = 8
    let items = Sample.gallery
    let rowsPerStyle = (items.count + columns - 1) / columns
    let sheetW = columns * cellW
    let sheetH = rowsPerStyle * (2 * cellH + thumbH)
    let canvas = try CairoCanvas(width: sheetW, height: sheetH)
    canvas.clear(Color(white: 0.1))
    let renderer = AvatarRenderer()
    let maskBackground = AvatarBackground.verticalGradient(top: Color(rgb8: 0xBF, 0xDC, 0xE8), bottom: Color(rgb8: 0x7F, 0xA8, 0xC4))
    let sketchBackground = AvatarBackground.verticalGradient(top: Color(rgb8: 0x2B, 0x36, 0x52), bottom: Color(rgb8: 0x12, 0x17, 0x24))
    for (i, item) in items.enumerated() {
        let col = i % columns, row = i / columns
        let y0 = Float(row * (2 * cellH + thumbH))
        let x0 = Float(col * cellW)
        let maskRect = Rect(x: x0, y: y0, width: Float(cellW), height: Float(cellH))
        let sketchRect = Rect(x: x0, y: y0 + Float(cellH), width: Float(cellW), height: Float(cellH))
        let thumbRect = Rect(x: x0, y: y0 + Float(2 * cellH), width: Float(thumbW), height: Float(thumbH))
        renderer.render(item.1, into: canvas, rect: maskRect, style: .mask, background: maskBackground)
        renderer.render(item.1, into: canvas, rect: sketchRect, style: .sketch, background: sketchBackground)
        renderer.render(item.1, into: canvas, rect: thumbRect, style: .mask, background: maskBackground)
        canvas.drawText(item.0, at: Point2(x0 + 6, y0 + 16), size: 13, color: Color(white: 0.1))
        for r in [maskRect, sketchRect, thumbRect] {
            canvas.addRect(Rect(x: r.x + 0.5, y: r.y + 0.5, width: r.width - 1, height: r.height - 1))
            canvas.strokePath(Color(white: 0, alpha: 0.5), style: StrokeStyle(width: 1))
        }
    }
    try canvas.writePNG(to: path)
}
