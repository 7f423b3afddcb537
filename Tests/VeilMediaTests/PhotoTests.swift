import Foundation
import VeilCore
import XCTest
@testable import VeilMedia

/// The real photos scripts/bootstrap installs.
final class PhotoTests: XCTestCase {
    func testAstronautIsOneFrame() throws {
        let url = try VeilResources.file("photos", "astronaut.png")
        let source = try VideoSource(image: url)
        XCTAssertEqual(source.size.width, 512); XCTAssertEqual(source.size.height, 512)
        XCTAssertNil(source.framesPerSecond)
        XCTAssertEqual(source.estimatedFrameCount, 1)
        let frames = try readAll(source)
        XCTAssertEqual(frames.count, 1)
        XCTAssertEqual(frames.first?.image.width, 512)
        XCTAssertEqual(frames.first?.timestampMicros, 0)
        // A real photo: far from a constant image.
        let pixels = frames.first?.image.pixels ?? []
        XCTAssertGreaterThan(Set(pixels).count, 200)
        XCTAssertEqual(try readAll(VideoSource.open(url.path)).count, 1)
    }

    func testPhotosLoad() throws {
        let png = try ImageIO.load(VeilResources.file("photos", "astronaut.png"))
        XCTAssertEqual(png.width, 512); XCTAssertEqual(png.height, 512)

        let jpeg = try ImageIO.load(VeilResources.file("photos", "breakingbad.jpg"))
        XCTAssertGreaterThan(jpeg.width, 100); XCTAssertGreaterThan(jpeg.height, 100)
        XCTAssertEqual(jpeg.pixels.count, jpeg.width * jpeg.height * 3)

        let ppmURL = try VeilResources.file("photos", "takeo.ppm")
        let ppm = try ImageIO.load(ppmURL)
        XCTAssertEqual(ppm.width, 150); XCTAssertEqual(ppm.height, 225)
        // The decoder must agree byte for byte with the file's raster (P6, maxval 255, header then data).
        let raw = [UInt8](try Data(contentsOf: ppmURL))
        XCTAssertEqual(Array(raw.suffix(150 * 225 * 3)), ppm.pixels)
        XCTAssertEqual(try readAll(VideoSource(image: ppmURL)).count, 1)
    }

    func testPhotoRoundTripsThroughPNG() throws {
        let photo = try ImageIO.load(VeilResources.file("photos", "breakingbad.jpg"))
        let url = try makeTemporaryDirectory().appendingPathComponent("copy.png")
        try ImageIO.savePNG(photo, to: url)
        XCTAssertEqual(try ImageIO.load(url).pixels, photo.pixels)
    }
}
