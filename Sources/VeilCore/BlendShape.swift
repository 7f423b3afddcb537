/// One of ARKit's 52 blendshape locations, named exactly as `ARFaceAnchor.BlendShapeLocation`.
///
/// The raw value is the position on the wire and in `Expression.coefficients`; the order is ARKit's
/// documented order (the same as MediaPipe's face blendshapes without `_neutral`). Never reorder.
public enum BlendShape: Int, CaseIterable, Codable, Sendable {
    case eyeBlinkLeft, eyeLookDownLeft, eyeLookInLeft, eyeLookOutLeft, eyeLookUpLeft, eyeSquintLeft, eyeWideLeft
    case eyeBlinkRight, eyeLookDownRight, eyeLookInRight, eyeLookOutRight, eyeLookUpRight, eyeSquintRight, eyeWideRight
    case jawForward, jawLeft, jawRight, jawOpen
    case mouthClose, mouthFunnel, mouthPucker, mouthLeft, mouthRight
    case mouthSmileLeft, mouthSmileRight, mouthFrownLeft, mouthFrownRight
    case mouthDimpleLeft, mouthDimpleRight, mouthStretchLeft, mouthStretchRight
    case mouthRollLower, mouthRollUpper, mouthShrugLower, mouthShrugUpper
    case mouthPressLeft, mouthPressRight, mouthLowerDownLeft, mouthLowerDownRight, mouthUpperUpLeft, mouthUpperUpRight
    case browDownLeft, browDownRight, browInnerUp, browOuterUpLeft, browOuterUpRight
    case cheekPuff, cheekSquintLeft, cheekSquintRight
    case noseSneerLeft, noseSneerRight
    case tongueOut

    /// ARKit's name for this location, e.g. `"jawOpen"`.
    public var name: String { String(describing: self) }

    /// The location with ARKit's name `name`, or nil.
    public init?(name: String) {
        guard let match = BlendShape.allCases.first(where: { $0.name == name }) else { return nil }
        self = match
    }
}
