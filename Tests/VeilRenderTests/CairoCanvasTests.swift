import Foundation
import XCTest
import VeilCore
import VeilVision
import VeilRender
import VeilCairo

final class CairoCanvasTests: XCTestCase {
    func testRejectsImpossibleSizes() {
        XCTAssertThrowsError(try CairoCanvas(width: 0, height: 10))
        XCTAssertThrowsError(try CairoCanvas(width: 10, height: -1))
        XCTAssertThrowsError(try CairoCanvas(width: 100_000, height: 10))
    }

    func testWritePNGReportsUnwritablePaths() throws {
        let canvas = try CairoCanvas(width: 8, height: 8)
        XCTAssertThrowsError(try canvas.writePNG(to: "/nonexistent-dir/x.png"))
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("veil-canvas-\(getpid()).png").path
        try canvas.writePNG(to: path)
        XCTAssertTrue(FileManager.default.fileExists(atPath: path))
        try? FileManager.default.removeItem(atPath: path)
    }

    func testPathsFillStrokeClipAndTransform() throws {
        let canvas = try CairoCanvas(width: 100, height: 100)
        canvas.clear(.black)
        canvas.save()
        canvas.clip(to: Rect(x: 0, y: 0, width: 50, height: 100))
        canvas.addRect(Rect(x: 10, y: 10, width: 80, height: 20))
        canvas.fillPath(Color(rgb8: 255, 0, 0))
        canvas.restore()
        canvas.save()
        canvas.translate(x: 50, y: 50)
        canvas.rotate(radians: .pi / 2) // clockwise: +x becomes +y (down)
        canvas.move(to: Point2(0, 0)); canvas.line(to: Point2(40, 0))
        canvas.strokePath(Color(rgb8: 0, 255, 0), style: StrokeStyle(width: 4, cap: .butt))
        canvas.restore()
        canvas.addEllipse(in: Rect(x: 70, y: 70, width: 20, height: 20))
        canvas.fillAndStrokePath(fill: .radial(RadialGradient(center: Point2(80, 80), radius: 10, from: .white, to: .white)),
                                 stroke: .white, style: StrokeStyle(width: 1))
        var image = RGBImage(width: 1, height: 1)
        canvas.copy(into: &image)
        XCTAssertEqual(image.width, 100)
        XCTAssertEqual(image.pixel(20, 20), SIMD3(255, 0, 0))
        XCTAssertEqual(image.pixel(70, 20), SIMD3(0, 0, 0), "clipped away")
        XCTAssertEqual(image.pixel(50, 80), SIMD3(0, 255, 0), "rotated line goes down")
        XCTAssertEqual(image.pixel(80, 80), SIMD3(255, 255, 255))
        XCTAssertTrue(canvas.supportsText)
        XCTAssertGreaterThan(canvas.textWidth("Veil", size: 12) ?? 0, 10)
    }

    func testTransparentPixelsReadAsColourOverBlack() throws {
        let canvas = try CairoCanvas(width: 4, height: 4)
        canvas.clear(Color(red: 1, green: 1, blue: 1, alpha: 0.5))
        let p = canvas.rgbImage().pixel(1, 1)
        XCTAssertTrue((126...129).contains(p.x), "\(p)")
    }
}
