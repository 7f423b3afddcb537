/// Decides, moment by moment, whether a participant's avatar follows the camera or the voice.
///
/// Without a camera it is always the voice. With one, tracked frames are sent as they come; when
/// the face is lost, the camera's `lost` frames are still sent for a short loss (the receiver
/// eases to neutral), and after `lostFaceDelayMicros` without a face (or without any camera frame,
/// e.g. a camera that stopped) the voice takes over until a tracked frame arrives again.
///
/// A pure value type: times are media times (µs) handed in by the caller.
public struct VoiceFallback: Sendable, Equatable {
    /// What drives the avatar.
    public enum Source: Sendable, Equatable {
        /// Camera frames (tracked, or lost for a short while).
        case camera
        /// Frames made from the voice (`VoiceExpressionGenerator`).
        case voice
    }

    /// Whether a camera (or video) feeds the capture at all.
    public let hasCamera: Bool
    /// How long the face may be out of view before the voice takes over (1 s by default).
    public let lostFaceDelayMicros: UInt64
    /// When the face was last seen lost after being tracked (or since the camera started).
    private var lostSince: UInt64?
    private var lastCameraFrame: UInt64?
    private let createdMicros: UInt64

    /// A fallback created at media time `nowMicros`. Until the first camera frame, the camera counts
    /// as starting up: the voice takes over only when no face shows up within the delay.
    public init(hasCamera: Bool, at nowMicros: UInt64, lostFaceDelayMicros: UInt64 = 1_000_000) {
        self.hasCamera = hasCamera
        self.lostFaceDelayMicros = lostFaceDelayMicros
        createdMicros = nowMicros
        lostSince = nowMicros
    }

    /// Notes a camera frame captured at `timeMicros`; returns whether it should be sent (false once
    /// the voice has taken over and the face is still lost).
    public mutating func cameraFrame(_ state: ExpressionFrame.State, at timeMicros: UInt64) -> Bool {
        lastCameraFrame = max(lastCameraFrame ?? 0, timeMicros)
        switch state {
        case .tracked:
            lostSince = nil
            return true
        case .lost:
            if lostSince == nil { lostSince = timeMicros }
            return source(at: timeMicros) == .camera
        }
    }

    /// What drives the avatar at `nowMicros`.
    public func source(at nowMicros: UInt64) -> Source {
        guard hasCamera else { return .voice }
        let silentSince = lastCameraFrame ?? createdMicros
        if nowMicros > silentSince, nowMicros - silentSince >= lostFaceDelayMicros { return .voice }
        if let lostSince, nowMicros > lostSince, nowMicros - lostSince >= lostFaceDelayMicros { return .voice }
        return .camera
    }
}
