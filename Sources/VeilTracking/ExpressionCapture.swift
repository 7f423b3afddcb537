import VeilCore
import VeilVision

/// The sending side of Veil for one camera: frame → tracker → expression → `ExpressionFrame`.
/// Landmarks stay inside; what comes out is the identity-free frame (and, for local display and
/// diagnostics only, the tracking result).
public final class ExpressionCapture {
    /// One processed frame.
    public struct Output {
        /// What goes on the wire.
        public var frame: ExpressionFrame
        /// The tracker's view of the frame: landmarks for a local debug overlay. Never transmitted.
        public var tracking: TrackingResult
    }

    public let tracker: FaceTracking
    public private(set) var estimator: ExpressionEstimator
    /// The privacy stage applied to every estimated expression before it is framed
    /// (`PrivacyLevel.default` unless told otherwise).
    public private(set) var privacy: ExpressionPrivacy
    private var sequence: UInt32 = 0
    private var lostSince: UInt64?

    /// - Parameters:
    ///   - tracker: the face tracker (MediaPipe's on Linux).
    ///   - estimator: neutral calibration and smoothing settings.
    ///   - privacy: how much of the face's own way of moving the frames may carry: each level
    ///     re-expresses the expression in a canonical vocabulary before framing, so that the stream
    ///     says less about which face produced it, at a cost in expressiveness (`PrivacyLevel`,
    ///     docs/privacy.md); `.off` sends the estimator's output as is (`veil call --privacy off`).
    ///   - seed: times the strict level's own blinks (random unless given: given, two captures
    ///     send the same frames for the same expressions).
    public init(tracker: FaceTracking, estimator: ExpressionEstimator = ExpressionEstimator(),
                privacy: PrivacyLevel = .default, seed: UInt64 = UInt64.random(in: 0...UInt64.max)) {
        self.tracker = tracker
        self.estimator = estimator
        self.privacy = ExpressionPrivacy(level: privacy, seed: seed)
    }

    /// Forgets the person's neutral face; the next seconds calibrate it again.
    public func recalibrate() { estimator.resetCalibration(); privacy.reset() }

    /// Processes a frame captured at `captureTimeMicros` on the media clock. `voiceMouth`: the jaw
    /// opening the voice being sent makes at about that time (`ExpressionSender.voiceMouth`), which
    /// the strict level moves the mouth with; nil uses the camera's.
    public func process(_ image: RGBImage, captureTimeMicros: UInt64, voiceMouth: Float? = nil) throws -> Output {
        let tracking = try tracker.track(image)
        defer { sequence &+= 1 }
        let seconds = Double(captureTimeMicros) / 1e6
        if tracking.state == .tracked, let landmarks = tracking.landmarks,
           var expression = estimator.update(landmarks, at: seconds) {
            // Mutated in place: a copy taken out and put back would copy its peaks every frame.
            expression = privacy.apply(expression, at: seconds, voiceMouth: voiceMouth)
            lostSince = nil
            return Output(frame: ExpressionFrame(sequence: sequence, captureTimeMicros: captureTimeMicros,
                                                 state: .tracked, expression: expression),
                          tracking: tracking)
        }
        // After half a second without a face, start the filters afresh so the avatar does not
        // glide from a stale pose when the face comes back.
        if let since = lostSince {
            if captureTimeMicros &- since > 500_000 { estimator.resetFilters() }
        } else {
            lostSince = captureTimeMicros
        }
        return Output(frame: ExpressionFrame(sequence: sequence, captureTimeMicros: captureTimeMicros, state: .lost),
                      tracking: tracking)
    }
}
