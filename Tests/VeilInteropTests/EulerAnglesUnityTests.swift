import Foundation
import VeilCore
import VeilInterop
import XCTest

/// How Veil's head angles become Unity quaternions for VMC, checked on cases derived by hand: each
/// expected quaternion is (axis · sin(θ/2), cos(θ/2)) for the axis and signed angle the mapping
/// gives, and each rotated vector is where Unity's left-handed frame puts it (the avatar faces +z,
/// its own left is −x, up is +y).
final class EulerAnglesUnityTests: XCTestCase {
    private let s45 = Float(sin(Double.pi / 4)), c45 = Float(cos(Double.pi / 4))

    /// Yaw 90°: the face turns to its own left. Unity: −90° about +y, q = (0, −sin 45°, 0, cos 45°);
    /// forward (+z) goes to −x, the avatar's left.
    func testYawOnlyTurnsAboutYTowardsTheFacesOwnLeft() {
        let q = EulerAngles(yaw: .pi / 2).unityQuaternion
        assertEqual(q, SIMD4(0, -s45, 0, c45))
        assertEqual(rotate(SIMD3(0, 0, 1), by: q), SIMD3(-1, 0, 0))
    }

    /// Pitch 30° (chin up). Unity: −30° about +x, q = (−sin 15°, 0, 0, cos 15°) = (−0.258819, 0, 0,
    /// 0.965926); forward goes to (0, sin 30°, cos 30°): up.
    func testPitchOnlyTurnsAboutXWithTheChinUp() {
        let q = EulerAngles(pitch: .pi / 6).unityQuaternion
        assertEqual(q, SIMD4(-0.258819, 0, 0, 0.965926))
        assertEqual(rotate(SIMD3(0, 0, 1), by: q), SIMD3(0, 0.5, 0.866025))
    }

    /// Roll 20°, clockwise as a viewer facing the avatar sees it. Unity: +20° about +z,
    /// q = (0, 0, sin 10°, cos 10°) = (0, 0, 0.173648, 0.984808); up goes to (−sin 20°, cos 20°, 0):
    /// towards −x, the viewer's right.
    func testRollOnlyTurnsAboutZClockwiseAsSeen() {
        let q = EulerAngles(roll: 20 * .pi / 180).unityQuaternion
        assertEqual(q, SIMD4(0, 0, 0.173648, 0.984808))
        assertEqual(rotate(SIMD3(0, 1, 0), by: q), SIMD3(-0.342020, 0.939693, 0))
    }

    /// Yaw 90° and pitch 30° together: pitch first (forward to (0, ½, √3/2)), then yaw (z to −x):
    /// the face looks to its own left and up.
    func testPitchIsAppliedBeforeYaw() {
        let q = EulerAngles(yaw: .pi / 2, pitch: .pi / 6).unityQuaternion
        assertEqual(rotate(SIMD3(0, 0, 1), by: q), SIMD3(-0.866025, 0.5, 0))
    }

    func testQuaternionsGiveTheirAnglesBack() throws {
        var random = SplitMix64(seed: 22)
        for _ in 0..<2_000 {
            let angles = EulerAngles(yaw: .random(in: -3.1...3.1, using: &random), pitch: .random(in: -1.5...1.5, using: &random),
                                     roll: .random(in: -3.1...3.1, using: &random))
            let back = try XCTUnwrap(EulerAngles(unityQuaternion: angles.unityQuaternion))
            XCTAssertEqual(back.yaw, angles.yaw, accuracy: 1e-4, "\(angles)")
            XCTAssertEqual(back.pitch, angles.pitch, accuracy: 1e-4, "\(angles)")
            XCTAssertEqual(back.roll, angles.roll, accuracy: 1e-4, "\(angles)")
        }
        // Scale does not matter; nothing, infinity and NaN are no rotation at all.
        XCTAssertEqual(EulerAngles(unityQuaternion: SIMD4(0, 0, 0, 2)), .zero)
        XCTAssertNil(EulerAngles(unityQuaternion: .zero))
        XCTAssertNil(EulerAngles(unityQuaternion: SIMD4(.nan, 0, 0, 1)))
        XCTAssertNil(EulerAngles(unityQuaternion: SIMD4(.infinity, 0, 0, 1)))
    }

    func testClampingKeepsAnglesInRange() {
        let clamped = EulerAngles(yaw: .infinity, pitch: -4, roll: .nan).clamped
        XCTAssertEqual(clamped, EulerAngles(yaw: .pi, pitch: -.pi / 2, roll: 0))
    }

    /// v' = q v q*, as Unity's `Quaternion * Vector3`.
    private func rotate(_ v: SIMD3<Float>, by q: SIMD4<Float>) -> SIMD3<Float> {
        let u = SIMD3(q.x, q.y, q.z)
        func cross(_ a: SIMD3<Float>, _ b: SIMD3<Float>) -> SIMD3<Float> {
            SIMD3(a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x)
        }
        let t = 2 * cross(u, v)
        return v + q.w * t + cross(u, t)
    }

    private func assertEqual<V: SIMD>(_ a: V, _ b: V, file: StaticString = #filePath, line: UInt = #line) where V.Scalar == Float {
        for i in a.indices {
            XCTAssertEqual(a[i], b[i], accuracy: 1e-5, "component \(i) of \(a) against \(b)", file: file, line: line)
        }
    }
}
