import VeilCore

/// What an avatar protocol carries for one frame of a face, decoded or about to be encoded: the
/// ARKit coefficients it named, the head and eye rotations it gave, and the sender's time. Fields
/// a packet did not carry stay empty (nil, or absent from `coefficients`).
public struct ExpressionUpdate: Equatable, Sendable {
    /// Coefficients keyed by ARKit name (`BlendShape.name`, e.g. `"jawOpen"`), each in 0…1.
    public private(set) var coefficients: [String: Float]
    /// The head's rotation, when the packet had one.
    public var head: EulerAngles?
    /// The left eye's rotation relative to the head (the face's own left eye).
    public var leftEye: EulerAngles?
    /// The right eye's rotation relative to the head.
    public var rightEye: EulerAngles?
    /// The sender's time in seconds (VMC's `/VMC/Ext/T`, Live Link's frame time), when it sent one.
    public var time: Double?

    /// An update carrying only what is given.
    public init(head: EulerAngles? = nil, leftEye: EulerAngles? = nil, rightEye: EulerAngles? = nil, time: Double? = nil) {
        coefficients = [:]
        self.head = head; self.leftEye = leftEye; self.rightEye = rightEye; self.time = time
    }

    /// The coefficient of `shape`, if the update carries it; setting clamps to 0…1 (NaN becomes 0,
    /// nil removes it).
    public subscript(shape: BlendShape) -> Float? {
        get { coefficients[shape.name] }
        set { coefficients[shape.name] = newValue.map(Self.clampedCoefficient) }
    }

    /// A coefficient in 0…1: NaN is 0, ±∞ the nearer end.
    public static func clampedCoefficient(_ value: Float) -> Float { value.isNaN ? 0 : min(max(value, 0), 1) }

    // MARK: Veil's expression

    /// The eye rotation a gaze of ±1 stands for (30°): `Gaze` is −1…1 on each axis, the protocols
    /// carry angles.
    public static let gazeRange: Float = 30 * .pi / 180

    /// Everything `expression` holds: all 52 coefficients, the head pose in radians and, when it
    /// has a gaze, both eyes turned by it (yaw from `gaze.x`, pitch from `gaze.y`, no roll).
    public init(_ expression: VeilCore.Expression, time: Double? = nil) {
        self.init(time: time)
        for shape in BlendShape.allCases { self[shape] = expression[shape] }
        let pose = expression.headPose
        head = EulerAngles(yaw: pose.yaw * .pi / 180, pitch: pose.pitch * .pi / 180, roll: pose.roll * .pi / 180).clamped
        if let gaze = expression.gaze {
            let eye = EulerAngles(yaw: gaze.x * Self.gazeRange, pitch: gaze.y * Self.gazeRange).clamped
            leftEye = eye
            rightEye = eye
        }
    }

    /// Veil's expression from this update: coefficients it lacks are 0, a missing head is frontal,
    /// the gaze is the mean of the eyes given (over `gazeRange`, clamped to −1…1), none without eyes.
    public var expression: VeilCore.Expression {
        var expression = VeilCore.Expression()
        for shape in BlendShape.allCases { expression[shape] = self[shape] ?? 0 }
        if let head = head?.clamped {
            expression.headPose = HeadPose(yaw: head.yaw * 180 / .pi, pitch: head.pitch * 180 / .pi, roll: head.roll * 180 / .pi)
        }
        let eyes = [leftEye, rightEye].compactMap { $0?.clamped }
        if !eyes.isEmpty {
            func gaze(_ angle: Float) -> Float { min(max(angle / Float(eyes.count) / Self.gazeRange, -1), 1) }
            expression.gaze = Gaze(x: gaze(eyes.reduce(0) { $0 + $1.yaw }), y: gaze(eyes.reduce(0) { $0 + $1.pitch }))
        }
        return expression
    }
}
