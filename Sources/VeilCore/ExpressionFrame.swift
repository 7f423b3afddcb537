/// What one side of a call sends per captured video frame: everything the receiver needs to animate
/// the avatar, and nothing else. See docs/wire-format.md for its bytes.
public struct ExpressionFrame: Equatable, Sendable {
    /// Whether a face was tracked in the captured frame.
    public enum State: Equatable, Sendable {
        case tracked
        /// No face in view (or tracking lost): the frame carries no expression.
        case lost
    }

    /// Increments by one per frame (wrapping); lets the receiver spot loss and reordering.
    public var sequence: UInt32
    /// Capture time in microseconds on the sender's media clock (the same clock as its audio).
    public var captureTimeMicros: UInt64
    public var state: State
    /// The expression when `state == .tracked`; `.neutral` when lost.
    public var expression: Expression
    /// True when the expression was derived from the sender's voice rather than seen by a camera.
    /// Only meaningful for tracked frames: a lost frame carries no expression, so this is false.
    public var isVoiceDriven: Bool

    /// A frame; when `state` is `.lost`, `expression` is replaced by `.neutral` and `isVoiceDriven` by false.
    public init(sequence: UInt32, captureTimeMicros: UInt64, state: State, expression: Expression = .neutral,
                isVoiceDriven: Bool = false) {
        self.sequence = sequence
        self.captureTimeMicros = captureTimeMicros
        self.state = state
        self.expression = state == .tracked ? expression : .neutral
        self.isVoiceDriven = state == .tracked ? isVoiceDriven : false
    }
}
