/// How much of a face's own way of moving a participant's expression stream may carry
/// (docs/privacy.md has what each level costs and what the re-identification experiment measures
/// for it). `veil call`, `veil render` and `veil track` take it as `--privacy LEVEL`.
public enum PrivacyLevel: String, CaseIterable, Sendable {
    /// Canonical events: the mouth follows the voice that travels anyway; smiles, frowns, brow
    /// raises, puckers, nods and turns are sent as events with fixed intensity profiles; the
    /// avatar blinks on its own; no gaze (`CanonicalExpressionStage` after
    /// `ExpressionPrivacyFilter`). For people meeting strangers: the default.
    case strict
    /// The canonical vocabulary of `ExpressionPrivacyFilter`: each channel relative to the
    /// person's own range, with the intensity and timing of the face's own movements.
    case standard
    /// The estimator's output as read (`--full-expression`): every coefficient, the face's own
    /// curves. Names a face to an attacker with earlier recordings of it.
    case off

    /// The level `veil call`, `veil render` and `veil track` use unless told otherwise.
    public static let `default`: PrivacyLevel = .strict

    /// The level named `text` (`strict`, `standard`, `off`), or nil.
    public init?(name text: String) { self.init(rawValue: text.lowercased()) }
}

/// The privacy stage of one participant at one level: what runs between `ExpressionEstimator` and
/// the wire. A value type that reads no clock; times are the expressions' capture times (s).
public struct ExpressionPrivacy: Sendable {
    public let level: PrivacyLevel
    private let seed: UInt64
    private var filter = ExpressionPrivacyFilter()
    private var canonical: CanonicalExpressionStage

    /// The stage at `level`; `seed` times the strict level's own blinks (random by default).
    public init(level: PrivacyLevel, seed: UInt64 = UInt64.random(in: 0...UInt64.max)) {
        self.level = level
        self.seed = seed
        canonical = CanonicalExpressionStage(seed: seed)
    }

    /// Forgets everything learnt about the face (a new person, or a recalibration).
    public mutating func reset() {
        filter.reset()
        canonical = CanonicalExpressionStage(seed: seed)
    }

    /// The expression to send for `e`, captured at `timeSeconds`. `voiceMouth`: the jaw opening
    /// the voice sent at about that time makes (`VoiceExpressionGenerator`), which the strict level
    /// moves the mouth with; nil where no voice is at hand (the camera's jaw is used instead).
    public mutating func apply(_ e: Expression, at timeSeconds: Double, voiceMouth: Float? = nil) -> Expression {
        switch level {
        case .off: return e
        case .standard: return filter.apply(e, at: timeSeconds)
        case .strict: return canonical.apply(filter.apply(e, at: timeSeconds), at: timeSeconds, voiceMouth: voiceMouth)
        }
    }
}
