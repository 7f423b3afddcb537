import XCTest
import VeilCore
import VeilVision
import VeilRender
import VeilCairo

final class BackgroundTests: XCTestCase {
    private func corners(_ image: RGBImage) -> [SIMD3<Int>] {
        [image.pixel(2, 2), image.pixel(image.width - 3, 2), image.pixel(2, image.height - 3), image.pixel(image.width - 3, image.height - 3)]
    }

    private func assertClose(_ a: SIMD3<Int>, _ b: SIMD3<Int>, tolerance: Int = 3, file: StaticString = #filePath, line: UInt = #line) {
        let d = a &- b
        XCTAssertLessThanOrEqual(max(abs(d.x), abs(d.y), abs(d.z)), tolerance, "\(a) vs \(b)", file: file, line: line)
    }

    func testNoneIsBlackOnTheOutput() throws {
        let image = try renderImage(.neutral, background: .none)
        for c in corners(image) { XCTAssertEqual(c, SIMD3(0, 0, 0)) }
    }

    func testSolidColourFillsTheView() throws {
        let image = try renderImage(.neutral, background: .solid(Color(rgb8: 200, 30, 60)))
        for c in corners(image) { XCTAssertEqual(c, SIMD3(200, 30, 60)) }
    }

    func testVerticalGradientRunsTopToBottom() throws {
        let image = try renderImage(.neutral, style: .sketch,
                                    background: .verticalGradient(top: Color(rgb8: 250, 250, 0), bottom: Color(rgb8: 0, 0, 250)))
        assertClose(image.pixel(2, 0), SIMD3(250, 250, 0), tolerance: 2)
        assertClose(image.pixel(2, 479), SIMD3(0, 0, 250), tolerance: 2)
        assertClose(image.pixel(2, 240), SIMD3(125, 125, 125), tolerance: 4)
    }

    /// Three vertical stripes (red, green, blue) 3:1 wide into a 4:3 view: scaled to cover (height
    /// fills), centred, so the green middle stripe spans x 80…560 and the outer ones are cropped.
    func testImageCoversTheViewKeepingItsAspect() throws {
        var stripes = RGBImage(width: 300, height: 100)
        for y in 0..<100 {
            for x in 0..<300 {
                let i = (y * 300 + x) * 3
                stripes.pixels[i + x / 100] = 255
            }
        }
        let image = try renderImage(.neutral, style: .sketch, background: .image(CanvasImage(stripes)))
        XCTAssertEqual(image.pixel(2, 2), SIMD3(255, 0, 0))
        XCTAssertEqual(image.pixel(637, 477), SIMD3(0, 0, 255))
        XCTAssertEqual(image.pixel(80 + 3, 5), SIMD3(0, 255, 0))
        XCTAssertEqual(image.pixel(80 - 3, 5), SIMD3(255, 0, 0))
        XCTAssertEqual(image.pixel(560 - 3, 470), SIMD3(0, 255, 0))
        XCTAssertEqual(image.pixel(560 + 3, 470), SIMD3(0, 0, 255))
        let cover = AvatarRenderer.coverRect(imageWidth: 300, imageHeight: 100, in: Rect(x: 0, y: 0, width: 640, height: 480))
        XCTAssertEqual(cover.x, -400, accuracy: 0.01)
        XCTAssertEqual(cover.y, 0, accuracy: 0.01)
        XCTAssertEqual(cover.width, 1440, accuracy: 0.01)
        XCTAssertEqual(cover.height, 480, accuracy: 0.01)
    }

    func testImageBackgroundShowsThroughAroundTheAvatar() throws {
        var photo = RGBImage(width: 64, height: 48)
        for i in stride(from: 0, to: photo.pixels.count, by: 3) { photo.pixels[i] = 10; photo.pixels[i + 1] = 180; photo.pixels[i + 2] = 90 }
        let background = AvatarBackground.image(CanvasImage(photo))
        let canvas = try CairoCanvas(width: 640, height: 480)
        let renderer = AvatarRenderer()
        // Twice: the second frame uses the cached conversion.
        for _ in 0..<2 {
            renderer.render(.neutral, into: canvas, rect: Rect(x: 0, y: 0, width: 640, height: 480), style: .mask, background: background)
            let image = canvas.rgbImage()
            for c in corners(image) { XCTAssertEqual(c, SIMD3(10, 180, 90)) }
            XCTAssertNotEqual(image.pixel(320, 200), SIMD3(10, 180, 90), "the face covers the middle")
        }
    }

    func testDrawImageOfChangingFramesShowsEachFrame() throws {
        let canvas = try CairoCanvas(width: 100, height: 100)
        var frame = RGBImage(width: 10, height: 10)
        for value: UInt8 in [40, 200] {
            for i in 0..<frame.pixels.count { frame.pixels[i] = value }
            canvas.drawImage(frame, in: Rect(x: 0, y: 0, width: 100, height: 100))
            XCTAssertEqual(canvas.rgbImage().pixel(50, 50), SIMD3(Int(value), Int(value), Int(value)))
        }
    }
}
