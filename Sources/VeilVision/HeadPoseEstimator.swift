import Foundation
import VeilCore

/// Head pose from landmarks. With a 3-D mesh: the rotation of the face's own axes (eye line,
/// forehead-to-chin line and their normal) relative to the camera. Without one: roll from the eye
/// line and yaw / pitch from where the nose tip sits between the eyes and the mouth.
struct HeadPoseEstimator: Sendable {
    /// The forehead-to-chin line of MediaPipe's mesh leans back by this much on a frontal face
    /// (measured on frontal photos); subtracted so that facing the camera reads pitch 0.
    static let meshPitchOffset: Float = -8

    func pose(_ landmarks: FaceLandmarks) -> HeadPose {
        if let mesh = landmarks.mesh, mesh.count >= MeshTopology.pointCount {
            return pose(mesh: mesh)
        }
        return pose2D(landmarks)
    }

    func pose(mesh: [Point3]) -> HeadPose {
        let a = MeshTopology.PoseAnchors.self
        func m(_ i: [Int]) -> SIMD3<Float> { i.reduce(SIMD3<Float>.zero) { $0 + mesh[$1] } / Float(i.count) }
        var x = m(a.leftSide) - m(a.rightSide)
        var y = m(a.bottom) - m(a.top)
        x = x / max(length(x), 1e-6)
        y = y - x * dot(x, y)
        y = y / max(length(y), 1e-6)
        let z = SIMD3(x.y * y.z - x.z * y.y, x.z * y.x - x.x * y.z, x.x * y.y - x.y * y.x)
        // z points away from the camera on a frontal face; the face looks along -z.
        let forward = -z
        let yaw = atan2f(forward.x, -forward.z) * 180 / .pi
        let pitch = atan2f(-forward.y, (forward.x * forward.x + forward.z * forward.z).squareRoot()) * 180 / .pi
        let roll = atan2f(x.y, x.x) * 180 / .pi
        return HeadPose(yaw: finite(yaw), pitch: finite(pitch - Self.meshPitchOffset), roll: finite(roll))
    }

    func pose2D(_ landmarks: FaceLandmarks) -> HeadPose {
        guard let frame = FaceFrame(landmarks: landmarks) else { return .frontal }
        let nose = frame.local(landmarks[.noseCrest]).last ?? .zero
        let mouth = mean(frame.local(landmarks[.outerLips]))
        // On a frontal face the nose tip sits midway in x and ~55 % of the way to the mouth.
        let yaw = asinf(clamp(nose.x / 0.5, -1, 1)) * 180 / .pi
        let pitch = mouth.y > 1e-3 ? asinf(clamp((0.55 - nose.y / mouth.y) / 0.5, -1, 1)) * 180 / .pi : 0
        return HeadPose(yaw: finite(yaw), pitch: finite(pitch), roll: finite(frame.rollDegrees))
    }

    private func length(_ v: SIMD3<Float>) -> Float { (v * v).sum().squareRoot() }
    private func dot(_ a: SIMD3<Float>, _ b: SIMD3<Float>) -> Float { (a * b).sum() }
    private func finite(_ v: Float) -> Float { v.isFinite ? v : 0 }
}
