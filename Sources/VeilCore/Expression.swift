/// Head orientation in degrees, in the viewer's frame: positive yaw turns the face to its own left
/// (towards the viewer's right), positive pitch tilts the chin up, positive roll tilts the head
/// clockwise as the viewer sees it.
public struct HeadPose: Equatable, Codable, Sendable {
    public var yaw: Float
    public var pitch: Float
    public var roll: Float
    public init(yaw: Float = 0, pitch: Float = 0, roll: Float = 0) {
        self.yaw = yaw; self.pitch = pitch; self.roll = roll
    }
    /// Looking straight at the camera.
    public static let frontal = HeadPose()
}

/// Where the eyes look, relative to the head: -1…1 on each axis (positive x: towards the face's own
/// left, i.e. the viewer's right; positive y: up). (0, 0) is straight ahead.
public struct Gaze: Equatable, Codable, Sendable {
    public var x: Float
    public var y: Float
    public init(x: Float, y: Float) { self.x = x; self.y = y }
}

/// An identity-free facial expression: the 52 ARKit blendshape coefficients (0…1), head pose and,
/// when the pupils are known, gaze. Nothing in it describes the shape of anyone's face.
public struct Expression: Equatable, Codable, Sendable {
    /// One coefficient per `BlendShape`, indexed by its raw value; each in 0…1.
    public private(set) var coefficients: [Float]
    public var headPose: HeadPose
    public var gaze: Gaze?

    /// A resting face looking ahead.
    public static let neutral = Expression()

    public init(headPose: HeadPose = .frontal, gaze: Gaze? = nil) {
        coefficients = [Float](repeating: 0, count: BlendShape.allCases.count)
        self.headPose = headPose
        self.gaze = gaze
    }

    /// The coefficient of `shape`; setting clamps to 0…1 (NaN becomes 0).
    public subscript(shape: BlendShape) -> Float {
        get { coefficients[shape.rawValue] }
        set { coefficients[shape.rawValue] = newValue.isNaN ? 0 : min(max(newValue, 0), 1) }
    }

    /// Coefficients keyed by ARKit name, for JSON output.
    public var namedCoefficients: [String: Float] {
        Dictionary(uniqueKeysWithValues: BlendShape.allCases.map { ($0.name, coefficients[$0.rawValue]) })
    }
}
