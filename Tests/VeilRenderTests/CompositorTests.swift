import XCTest
import VeilCore
import VeilVision
import VeilRender
import VeilCairo

final class CompositorTests: XCTestCase {
    func testGridTilesTheCanvasWithoutOverlapForOneToNine() {
        let compositor = Compositor(layout: .grid)
        for (w, h) in [(640, 480), (1280, 720), (641, 479)] {
            for n in 1...9 {
                let rects = compositor.viewRects(width: w, height: h, count: n)
                XCTAssertEqual(rects.count, n)
                var total: Float = 0
                for (i, a) in rects.enumerated() {
                    XCTAssertGreaterThan(a.area, 0)
                    XCTAssertGreaterThanOrEqual(a.x, 0); XCTAssertGreaterThanOrEqual(a.y, 0)
                    XCTAssertLessThanOrEqual(a.x + a.width, Float(w)); XCTAssertLessThanOrEqual(a.y + a.height, Float(h))
                    total += a.area
                    for b in rects[(i + 1)...] { XCTAssertEqual(overlap(a, b), 0, "n=\(n): \(a) overlaps \(b)") }
                }
                XCTAssertEqual(total, Float(w * h), "n=\(n) covers \(w)×\(h)")
            }
        }
        let two = compositor.viewRects(width: 640, height: 480, count: 2)
        XCTAssertEqual(two[0], Rect(x: 0, y: 0, width: 320, height: 480))
        XCTAssertEqual(two[1], Rect(x: 320, y: 0, width: 320, height: 480))
        XCTAssertTrue(Compositor.gridShape(count: 3) == (2, 2) && Compositor.gridShape(count: 4) == (2, 2))
        XCTAssertTrue(Compositor.gridShape(count: 9) == (3, 3) && Compositor.gridShape(count: 7) == (3, 3))
        XCTAssertEqual(compositor.viewRects(width: 640, height: 480, count: 0), [])
    }

    func testGridSpacingLeavesGaps() {
        let rects = Compositor(layout: .grid(spacing: 8)).viewRects(width: 640, height: 480, count: 4)
        XCTAssertEqual(rects[0], Rect(x: 4, y: 4, width: 312, height: 232))
        XCTAssertEqual(overlap(rects[0], rects[1]), 0)
    }

    func testPictureInPictureInsetSitsInTheConfiguredCorner() throws {
        let canvas = try CairoCanvas(width: 640, height: 480)
        for corner in Corner.allCases {
            let compositor = Compositor(layout: .pictureInPicture(corner: corner, insetFraction: 0.25, margin: 10), borderColor: nil)
            compositor.draw(into: canvas, bounds: Rect(x: 0, y: 0, width: 640, height: 480), count: 2) { index, _ in
                canvas.clear(index == 0 ? Color(rgb8: 255, 0, 0) : Color(rgb8: 0, 255, 0))
            }
            let image = canvas.rgbImage()
            let probes: [Corner: (Int, Int)] = [.topLeft: (20, 20), .topRight: (620, 20), .bottomLeft: (20, 460), .bottomRight: (620, 460)]
            for (probe, (x, y)) in probes {
                XCTAssertEqual(image.pixel(x, y), probe == corner ? SIMD3(0, 255, 0) : SIMD3(255, 0, 0), "\(corner) probed at \(probe)")
            }
            XCTAssertEqual(image.pixel(320, 240), SIMD3(255, 0, 0))
            let rects = compositor.viewRects(width: 640, height: 480, count: 2)
            XCTAssertEqual(rects[1].width, 160)
            XCTAssertEqual(rects[1].height, 120)
        }
        let stacked = Compositor(layout: .pictureInPicture).viewRects(width: 640, height: 480, count: 4)
        XCTAssertEqual(stacked.count, 4)
        for i in 1..<4 { for j in (i + 1)..<4 { XCTAssertEqual(overlap(stacked[i], stacked[j]), 0) } }
    }

    func testRenderComposesAvatarsWithBordersAndLabels() throws {
        let canvas = try CairoCanvas(width: 640, height: 480)
        let renderer = AvatarRenderer()
        let views = [CompositorView(expression: .neutral, label: "Ada", background: .solid(Color(rgb8: 0, 0, 90))),
                     CompositorView(expression: Sample.expression([.jawOpen: 1]), label: "Me", style: .sketch, background: .solid(Color(rgb8: 90, 0, 0)))]
        let compositor = Compositor(layout: .pictureInPicture, borderColor: .white, borderWidth: 2)
        compositor.render(views, with: renderer, into: canvas)
        let labelled = canvas.rgbImage()
        let inset = compositor.viewRects(width: 640, height: 480, count: 2)[1]
        // Border: white on the inset's edge; inside it, the inset's own background.
        XCTAssertEqual(labelled.pixel(Int(inset.x) + 1, Int(inset.y) + 30), SIMD3(255, 255, 255))
        XCTAssertEqual(labelled.pixel(Int(inset.x) + 5, Int(inset.y) + 5), SIMD3(90, 0, 0))
        XCTAssertEqual(labelled.pixel(5, 5), SIMD3(0, 0, 90))
        // Labels are drawn: the same views without labels differ in the main view's bottom left.
        let unlabelled = views.map { CompositorView(expression: $0.expression, style: $0.style, background: $0.background) }
        compositor.render(unlabelled, with: renderer, into: canvas)
        let plain = canvas.rgbImage()
        XCTAssertGreaterThan(labelled.difference(from: plain, inside: Rect(x: 0, y: 440, width: 80, height: 40)).inside, 10_000)
    }

    private func overlap(_ a: Rect, _ b: Rect) -> Float {
        let w = min(a.x + a.width, b.x + b.width) - max(a.x, b.x)
        let h = min(a.y + a.height, b.y + b.height) - max(a.y, b.y)
        return max(w, 0) * max(h, 0)
    }
}
