import Foundation

// VMC carries rotations as Unity quaternions (x, y, z, w) in a bone's local frame. Unity's frame is
// left-handed: +x right, +y up, +z forward, and a humanoid (a VRM avatar with normalised bones)
// faces +z, so its own right is +x. A positive angle turns clockwise looking along the axis (the
// left-hand rule): about +y, forward (+z) goes to +x (the avatar's right); about +x, forward goes
// to −y (down); about +z, up goes to −x (the avatar's left, which a viewer facing it sees on the
// right). The quaternion algebra itself is the usual Hamilton product, as in Unity's `Quaternion`.
//
// Veil's yaw turns the face to its own left, so it is a rotation of −yaw about +y; Veil's pitch
// raises the chin, a rotation of −pitch about +x; Veil's roll is clockwise as the viewer sees it, a
// rotation of +roll about +z. Composed as Unity's `Quaternion.Euler` composes (roll, then pitch,
// then yaw): q = q_y(−yaw) · q_x(−pitch) · q_z(roll).

extension EulerAngles {
    /// The Unity quaternion (x, y, z, w) of this rotation, as VMC's `/VMC/Ext/Bone/Pos` carries it.
    public var unityQuaternion: SIMD4<Float> {
        func axis(_ angle: Double, _ x: Double, _ y: Double, _ z: Double) -> SIMD4<Double> {
            SIMD4(x * sin(angle / 2), y * sin(angle / 2), z * sin(angle / 2), cos(angle / 2))
        }
        let q = Self.multiply(Self.multiply(axis(-Double(yaw), 0, 1, 0), axis(-Double(pitch), 1, 0, 0)), axis(Double(roll), 0, 0, 1))
        return SIMD4<Float>(Float(q.x), Float(q.y), Float(q.z), Float(q.w))
    }

    /// The angles of a Unity quaternion (x, y, z, w), normalised first; nil for a zero, infinite or
    /// NaN quaternion. Pitch comes back within ±π/2, yaw and roll within ±π.
    public init?(unityQuaternion q: SIMD4<Float>) {
        var d = SIMD4<Double>(Double(q.x), Double(q.y), Double(q.z), Double(q.w))
        let norm = (d * d).sum().squareRoot()
        guard norm.isFinite, norm > 1e-12 else { return nil }
        d /= norm
        let (x, y, z, w) = (d.x, d.y, d.z, d.w)
        // The rotation matrix R = R_y(a) R_x(b) R_z(c) has R12 = −sin b, R02 / R22 = tan a, R10 / R11 = tan c.
        let r12 = 2 * (y * z - w * x), r02 = 2 * (x * z + w * y), r22 = 1 - 2 * (x * x + y * y)
        let r10 = 2 * (x * y + w * z), r11 = 1 - 2 * (x * x + z * z)
        let b = asin(min(max(-r12, -1), 1)), a = atan2(r02, r22), c = atan2(r10, r11)
        self = EulerAngles(yaw: Float(-a), pitch: Float(-b), roll: Float(c)).clamped
    }

    private static func multiply(_ a: SIMD4<Double>, _ b: SIMD4<Double>) -> SIMD4<Double> {
        SIMD4(a.w * b.x + a.x * b.w + a.y * b.z - a.z * b.y,
              a.w * b.y - a.x * b.z + a.y * b.w + a.z * b.x,
              a.w * b.z + a.x * b.y - a.y * b.x + a.z * b.w,
              a.w * b.w - a.x * b.x - a.y * b.y - a.z * b.z)
    }
}
