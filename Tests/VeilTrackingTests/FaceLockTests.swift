import XCTest
import VeilCore
import VeilVision
@testable import VeilTracking

/// With two people in view the tracker keeps to the one it started with.
final class FaceLockTests: XCTestCase {
    /// A 640×480 frame with `a` scaled to `sizeA` px tall at the left and `b` to `sizeB` at the right.
    func twoFaces(_ a: RGBImage, _ sizeA: Int, _ b: RGBImage, _ sizeB: Int) -> RGBImage {
        var frame = RGBImage(width: 640, height: 480)
        for i in frame.pixels.indices { frame.pixels[i] = 120 }
        func paste(_ photo: RGBImage, height: Int, centerX: Int) {
            let width = height * photo.width / photo.height
            let (scaled, _, _) = photo.letterboxed(width: width - width % 2, height: height)
            let x0 = centerX - scaled.width / 2, y0 = (480 - height) / 2
            for y in 0..<scaled.height {
                for x in 0..<scaled.width where x0 + x >= 0 && x0 + x < 640 {
                    let s = (y * scaled.width + x) * 3, d = ((y0 + y) * 640 + x0 + x) * 3
                    frame.pixels[d] = scaled.pixels[s]; frame.pixels[d + 1] = scaled.pixels[s + 1]; frame.pixels[d + 2] = scaled.pixels[s + 2]
                }
            }
        }
        paste(a, height: sizeA, centerX: 170)
        paste(b, height: sizeB, centerX: 470)
        return frame
    }

    func testStaysOnTheFirstFaceWhenTheOtherGrows() throws {
        let takeo = try Photos.image("takeo.ppm"), lenna = try Photos.image("lenna.png")
        let tracker = try MediaPipeFaceTracker()
        // Start: takeo (left) is the larger face and gets locked on.
        var sides: [Bool] = []
        for step in 0..<24 {
            // takeo shrinks from 420 to 260 px tall while lenna grows from 200 to 440.
            let t = Float(step) / 23
            let frame = twoFaces(takeo, Int(420 - 160 * t) & ~1, lenna, Int(200 + 240 * t) & ~1)
            let result = try tracker.track(frame)
            let box = try XCTUnwrap(result.landmarks?.boundingBox, "lost the face at step \(step)")
            sides.append(box.center.x < 320)
        }
        XCTAssertEqual(sides.first, true, "starts on the larger face (left)")
        XCTAssertTrue(sides.allSatisfy { $0 }, "jumped to the other face: \(sides)")

        // A fresh tracker on the last frame picks the now-larger face: the lock, not size, kept it left.
        let fresh = try MediaPipeFaceTracker()
        let last = try XCTUnwrap(fresh.track(twoFaces(takeo, 260, lenna, 440)).landmarks?.boundingBox)
        XCTAssertGreaterThan(last.center.x, 320)
    }

    func testBreakingBadTracksTheAnnotatedPerson() throws {
        let (frame, scale, offset) = try Photos.image("breakingbad.jpg").letterboxed(width: 640, height: 480)
        let nose = try Photos.annotation("breakingbad.pts")[30] * scale + offset
        let box = try XCTUnwrap(try MediaPipeFaceTracker().landmarks(inStill: frame)?.boundingBox)
        XCTAssertTrue(nose.x > box.x && nose.x < box.x + box.width && nose.y > box.y && nose.y < box.y + box.height,
                      "the tracked face \(box) does not contain the annotated nose tip \(nose)")
    }
}
