/// A rotation as yaw, pitch and roll in radians, in Veil's conventions (those of `HeadPose`, which
/// holds degrees): positive yaw turns the face (or eye) to its own left, positive pitch tilts the
/// chin (or the gaze) up, positive roll tilts the head clockwise as a viewer facing it sees it.
/// Applied roll first, then pitch, then yaw, as a head turns on its neck.
public struct EulerAngles: Equatable, Sendable {
    public var yaw: Float
    public var pitch: Float
    public var roll: Float

    /// Angles in radians.
    public init(yaw: Float = 0, pitch: Float = 0, roll: Float = 0) {
        self.yaw = yaw; self.pitch = pitch; self.roll = roll
    }

    /// No rotation.
    public static let zero = EulerAngles()

    /// Yaw and roll are kept within ±π, pitch within ±π/2 (a pitch beyond it is the same
    /// orientation as a smaller one with yaw and roll turned by π, and decoders cannot tell them apart).
    public static let yawRollLimit = Float.pi
    /// See `yawRollLimit`.
    public static let pitchLimit = Float.pi / 2

    /// These angles with NaN made 0 and each angle clamped to its limit (±∞ to the limit's sign).
    public var clamped: EulerAngles {
        func clamp(_ value: Float, _ limit: Float) -> Float { value.isNaN ? 0 : min(max(value, -limit), limit) }
        return EulerAngles(yaw: clamp(yaw, Self.yawRollLimit), pitch: clamp(pitch, Self.pitchLimit), roll: clamp(roll, Self.yawRollLimit))
    }
}
