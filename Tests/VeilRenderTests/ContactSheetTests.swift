import Foundation
import XCTest
import VeilCore
import VeilVision
import VeilRender
import VeilCairo

final class ContactSheetTests: XCTestCase {
    /// Writes the contact sheet (every gallery expression × mask, sketch, 160×120 mask) to a temp
    /// directory and to /tmp/veil-contact-sheet.png, for a person to look at.
    func testWritesContactSheet() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("veil-render-\(getpid())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let path = dir.appendingPathComponent("contact-sheet.png").path
        try writeContactSheet(to: path)
        let size = try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int ?? 0
        XCTAssertGreaterThan(size, 10_000)
        // Full-size frames of each expression, to look at details.
        let canvas = try CairoCanvas(width: 640, height: 480)
        let renderer = AvatarRenderer()
        for (name, expression) in Sample.gallery {
            let file = name.replacingOccurrences(of: " ", with: "_")
            for (styleName, style) in [("mask", AvatarStyle.mask), ("sketch", .sketch)] {
                renderer.render(expression, into: canvas, rect: Rect(x: 0, y: 0, width: 640, height: 480), style: style,
                                background: .verticalGradient(top: Color(rgb8: 0x9F, 0xC4, 0xD8), bottom: Color(rgb8: 0x2F, 0x48, 0x64)))
                try canvas.writePNG(to: dir.appendingPathComponent("\(file)-\(styleName).png").path)
            }
        }
        // Thumbnails at their real size (160×120), both styles.
        let thumbs = try CairoCanvas(width: 8 * 160, height: 6 * 120)
        for (i, (_, expression)) in Sample.gallery.prefix(24).enumerated() {
            let x = Float(i % 8 * 160), y = Float(i / 8 * 240)
            renderer.render(expression, into: thumbs, rect: Rect(x: x, y: y, width: 160, height: 120), style: .mask,
                            background: .verticalGradient(top: Color(rgb8: 0xBF, 0xDC, 0xE8), bottom: Color(rgb8: 0x7F, 0xA8, 0xC4)))
            renderer.render(expression, into: thumbs, rect: Rect(x: x, y: y + 120, width: 160, height: 120), style: .sketch,
                            background: .solid(Color(rgb8: 0x1B, 0x22, 0x33)))
        }
        try thumbs.writePNG(to: dir.appendingPathComponent("thumbnails.png").path)
        // A call: picture-in-picture and a grid of nine, with labels.
        let call = try CairoCanvas(width: 640, height: 480)
        let people = Sample.gallery.prefix(9).enumerated().map { i, item in
            CompositorView(expression: item.1, label: "Person \(i + 1)", style: i % 3 == 2 ? .sketch : .mask)
        }
        Compositor(layout: .pictureInPicture).render(Array(people.prefix(2)), with: renderer, into: call)
        try call.writePNG(to: dir.appendingPathComponent("pip.png").path)
        Compositor(layout: .grid(spacing: 2)).render(people, with: renderer, into: call)
        try call.writePNG(to: dir.appendingPathComponent("grid9.png").path)
        print("contact sheet and frames in \(dir.path)")
        _ = try? FileManager.default.removeItem(atPath: "/tmp/veil-contact-sheet.png")
        try FileManager.default.copyItem(atPath: path, toPath: "/tmp/veil-contact-sheet.png")
    }
}
