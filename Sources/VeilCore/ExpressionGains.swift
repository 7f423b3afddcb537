/// How far each face measurement moves (in inter-eye distances, or fractions of the neutral) for an
/// ARKit coefficient of 1: the gains `ExpressionEstimator` (VeilVision) reads a face with. Here,
/// beside `Expression`, because the privacy filter weighs smile against frown with the same gains.
public struct ExpressionGains: Sendable {
    /// Lip gap increase for jawOpen = 1.
    public var jawOpen: Float = 0.5
    /// Fraction of the neutral eye opening lost for eyeBlink = 1 (after a 10 % dead zone). A
    /// shut eye still measures 30–60 % of its open area on MediaPipe's mesh (it never quite
    /// closes the lids), hence less than 0.9.
    public var blink: Float = 0.45
    /// Fraction of the neutral eye opening gained for eyeWide = 1.
    public var wide: Float = 0.35
    /// Corner lift (plus half the corner spread) for mouthSmile = 1.
    public var smile: Float = 0.12
    /// Corner drop for mouthFrown = 1.
    public var frown: Float = 0.07
    /// Sideways mouth shift for mouthLeft / mouthRight = 1.
    public var mouthShift: Float = 0.12
    /// Fraction of the neutral mouth width lost for mouthPucker / mouthFunnel = 1.
    public var narrow: Float = 0.25
    /// Brow raise for browInnerUp / browOuterUp = 1.
    public var browUp: Float = 0.1
    /// Brow lowering for browDown = 1.
    public var browDown: Float = 0.06
    /// Lower-lid rise for eyeSquint = 1.
    public var squint: Float = 0.04
    /// Apparent brow drop at a full blink: MediaPipe's mesh pulls the brows down by about this
    /// much when the lids close, even when the brows stay put; added back so a blink is not
    /// read as a frown.
    public var browDropPerBlink: Float = 0.045
    /// Pupil displacement (in half eye widths) for a full gaze of 1.
    public var gaze: Float = 0.6
    public init() {}
}

/// `x` within `lo…hi`; NaN reads as 0.
@inline(__always) package func clamp(_ x: Float, _ lo: Float, _ hi: Float) -> Float { x.isNaN ? 0 : min(max(x, lo), hi) }
