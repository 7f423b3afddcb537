import XCTest
import VeilCore
import VeilVision
@testable import VeilTracking

/// Measurements of the estimator that must not depend on things other than the movement they
/// measure: gaze on the lids or on an eye too small to resolve a pupil, the mouth's opening on
/// whether the person was talking while the neutral face was learnt. On a real tracked face
/// (takeo, eyes about 33 pixels wide), moved by hand.
final class EstimatorMeasurementTests: XCTestCase {
    /// The face's mesh, and its pupils placed at `offset` half eye widths from each eye's middle.
    struct Face {
        var mesh: [Point3]
        let topology: MeshTopology

        init() throws {
            let base = try EstimatorResponseTests.base.get()
            mesh = base.mesh
            topology = base.topology
        }

        func point(_ i: Int) -> Point2 { Point2(mesh[i].x, mesh[i].y) }

        func landmarks(pupilOffset offset: Point2 = .zero, scale: Float = 1) -> FaceLandmarks {
            func pupil(_ a: Int, _ b: Int) -> Point2 {
                let middle = (point(a) + point(b)) / 2
                let half = abs(point(b).x - point(a).x) / 2
                return (middle + offset * half) * scale
            }
            let scaled = mesh.map { Point3($0.x * scale, $0.y * scale, $0.z * scale) }
            return topology.landmarks(mesh: scaled, leftPupil: pupil(362, 263), rightPupil: pupil(33, 133), confidence: 1)
        }

        /// Moves the upper lids down by `fraction` of each eye's opening.
        mutating func closeLids(_ fraction: Float) {
            for (upper, lower) in [([246, 161, 160, 159, 158, 157, 173], [7, 163, 144, 145, 153, 154, 155]),
                                   ([466, 388, 387, 386, 385, 384, 398], [249, 390, 373, 374, 380, 381, 382])] {
                for (u, l) in zip(upper, lower) { mesh[u].y += (mesh[l].y - mesh[u].y) * fraction }
            }
        }

        /// Parts the lips by `iods` inter-eye distances: the lower lip and the chin drop.
        mutating func openMouth(_ iods: Float) {
            let iod = abs(mesh[263].x + mesh[362].x - mesh[33].x - mesh[133].x) / 2
            let mid = mesh[13].y
            for i in Set(topology.regionIndices[.innerLips] ?? []) where mesh[i].y > mid { mesh[i].y += iods * iod }
            for i in [14, 17, 84, 314, 181, 405, 91, 321, 152, 175, 199, 200] { mesh[i].y += iods * iod }
        }
    }

    func calibrated(on landmarks: FaceLandmarks, frames: Int = 5) -> ExpressionEstimator {
        var estimator = ExpressionEstimator(calibrationFrames: frames, smoothing: false)
        for i in 0..<frames { _ = estimator.update(landmarks, at: Double(i) / 30) }
        return estimator
    }

    func testGazeDoesNotMoveWithTheLids() throws {
        var face = try Face()
        var estimator = calibrated(on: face.landmarks())
        face.closeLids(0.25)
        let e = try XCTUnwrap(estimator.update(face.landmarks(), at: 1))
        let gaze = try XCTUnwrap(e.gaze)
        XCTAssertLessThan(e[.eyeBlinkLeft], 0.5, "the lids are only half closed")
        XCTAssertEqual(gaze.y, 0, accuracy: 0.05, "half-closed lids moved the gaze")
        XCTAssertEqual(gaze.x, 0, accuracy: 0.05, "half-closed lids moved the gaze")
    }

    func testGazeHoldsWhileTheEyesAreClosed() throws {
        var face = try Face()
        var estimator = calibrated(on: face.landmarks())
        let look = Point2(0.3, 0)
        let open = try XCTUnwrap(estimator.update(face.landmarks(pupilOffset: look), at: 1).flatMap(\.gaze))
        XCTAssertGreaterThan(open.x, 0.3, "an open eye's gaze is read")
        // Shut lids: whatever the iris model makes of the pupil then, the gaze stays put.
        face.closeLids(0.9)
        let shut = try XCTUnwrap(estimator.update(face.landmarks(pupilOffset: Point2(-0.5, 0.5)), at: 1.1))
        XCTAssertGreaterThan(shut[.eyeBlinkLeft], 0.5)
        XCTAssertEqual(try XCTUnwrap(shut.gaze).x, open.x, accuracy: 1e-4)
        XCTAssertEqual(try XCTUnwrap(shut.gaze).y, open.y, accuracy: 1e-4)
    }

    func testGazeNeedsEyesWideEnoughToPlaceThePupil() throws {
        let face = try Face()
        let look = Point2(0.4, 0)
        var large = calibrated(on: face.landmarks())
        let near = try XCTUnwrap(large.update(face.landmarks(pupilOffset: look), at: 1).flatMap(\.gaze))
        XCTAssertGreaterThan(near.x, 0.5, "eyes ~33 px wide: the gaze is read")
        // The same face five times further away: eyes ~6.6 px wide.
        var small = calibrated(on: face.landmarks(scale: 0.2))
        let far = try XCTUnwrap(small.update(face.landmarks(pupilOffset: look, scale: 0.2), at: 1))
        XCTAssertEqual(try XCTUnwrap(far.gaze).x, 0, accuracy: 1e-4, "a pupil in an eye ~6.6 px wide is not resolved")
        XCTAssertEqual(far[.eyeLookOutLeft] + far[.eyeLookInLeft], 0, accuracy: 1e-4)
        XCTAssertEqual(FaceMeasurements.pupilResolution(6.6), 0)
        XCTAssertEqual(FaceMeasurements.pupilResolution(33), 1)
    }

    /// The neutral is learnt while the person talks; if the lips were apart through it, small
    /// openings would read as closed for good. Once the mouth has been seen closed for a while,
    /// they read again, and the closed mouth reads as closed.
    func testSmallOpeningsReadAfterCalibratingWhileTalking() throws {
        let face = try Face()
        var talking = face, closed = face, slightly = face
        talking.openMouth(0.06)
        slightly.openMouth(0.04)
        var estimator = calibrated(on: talking.landmarks(), frames: 10)
        let before = try XCTUnwrap(estimator.update(slightly.landmarks(), at: 0.5))
        XCTAssertLessThan(before[.jawOpen], 0.01, "calibrated on an open mouth, a smaller opening reads closed")
        var t = 1.0
        for _ in 0..<45 {
            _ = estimator.update(closed.landmarks(), at: t)
            t += 1.0 / 30
        }
        let rest = try XCTUnwrap(estimator.update(closed.landmarks(), at: t))
        let after = try XCTUnwrap(estimator.update(slightly.landmarks(), at: t + 1.0 / 30))
        XCTAssertLessThan(rest[.jawOpen], 0.02, "the closed mouth is the rest")
        XCTAssertGreaterThan(after[.jawOpen], 0.05, "a small opening reads once the closed mouth has been seen")
        // Never upwards: holding the mouth open for 10 s does not make it the rest.
        for _ in 0..<330 {
            _ = estimator.update(talking.landmarks(), at: t)
            t += 1.0 / 30
        }
        let held = try XCTUnwrap(estimator.update(talking.landmarks(), at: t))
        XCTAssertGreaterThan(held[.jawOpen], 0.1, "a mouth held open became the rest")
    }
}
