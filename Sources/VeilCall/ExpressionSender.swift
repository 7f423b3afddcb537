import Foundation
import Synchronization
import VeilCore

/// What one participant sends as expressions in a `CallSession`: the camera's frames while a face
/// is tracked, and frames made from the voice (`VoiceExpressionGenerator`, `isVoiceDriven` set)
/// when there is no camera or the face has been out of view for longer than a second
/// (`VoiceFallback`). A short loss still sends the camera's `lost` frames.
///
/// Voice-driven frames are made per remote participant from the level of the very audio sent to
/// them (`CallSession.outgoingAudioLevels`) and stamped with that audio's capture time, so mouth
/// and voice line up at the receiver as a camera's frames do. Every frame is renumbered per
/// participant, so that camera and voice frames form one sequence for each receiver.
///
/// It is the only reader of `session.outgoingAudioLevels`. `@unchecked Sendable`: mutable state
/// sits behind one `Mutex`; the session is thread-safe.
public final class ExpressionSender: @unchecked Sendable {
    /// Counters since the sender started.
    public struct Statistics: Sendable, Equatable {
        /// Camera frames sent (to each participant they count once).
        public var cameraFrames = 0
        /// Camera frames held back because the voice had taken over.
        public var cameraFramesHeldBack = 0
        /// Voice-driven frames sent, over all participants.
        public var voiceFrames = 0
    }

    private struct State {
        var fallback: VoiceFallback
        var generators: [String: VoiceExpressionGenerator] = [:]
        var nextFrameMicros: [String: UInt64] = [:]
        var sequences: [String: UInt32] = [:]
        /// Drives this participant's own view: the levels sent to one participant (`ownUser`, kept
        /// while their audio flows), or silence when none comes.
        var own: VoiceExpressionGenerator
        var ownUser: String?
        var lastLevelMicros: UInt64?
        /// The own generator's latest jaw opening.
        var ownMouth: Float?
        var latest: (expression: VeilCore.Expression, isVoiceDriven: Bool)?
        var statistics = Statistics()
        var started = false
        var stopped = false
        /// Reads the session's levels from `start()` until `stop()`.
        var reader: Task<Void, Never>?
    }

    /// The call the frames go out on.
    public let session: CallSession
    /// Voice-driven frames per second and per participant.
    public let framesPerSecond: Double
    private let seed: UInt64
    private let state: Mutex<State>

    /// A sender for `session`. `hasCamera` false: voice-driven from the start. `seed` picks the
    /// blinks and head motion (`VoiceExpressionGenerator.seed(for:)` makes one from a name).
    public init(session: CallSession, hasCamera: Bool, seed: UInt64, framesPerSecond: Double = 30,
                lostFaceDelayMicros: UInt64 = 1_000_000) {
        self.session = session
        self.seed = seed
        self.framesPerSecond = min(max(framesPerSecond, 1), 120)
        state = Mutex(State(fallback: VoiceFallback(hasCamera: hasCamera, at: session.mediaTimeMicros,
                                                    lostFaceDelayMicros: lostFaceDelayMicros),
                            own: VoiceExpressionGenerator(seed: seed)))
    }

    /// Starts making voice-driven frames from the session's outgoing audio; they are sent while the
    /// voice drives. Ends when the session ends, `stop()` is called or the sender is released; calls
    /// after the first, and calls after `stop()`, do nothing (the level stream has one reader).
    public func start() {
        let levels = session.outgoingAudioLevels
        state.withLock { s in
            guard !s.started, !s.stopped else { return }
            s.started = true
            // Holds neither the sender nor the session: a stopped or released sender lets both go
            // (a session that ends finishes the stream), instead of waiting for a level that may never come.
            s.reader = Task { [weak self] in
                for await (user, level) in levels {
                    guard let self, !self.state.withLock({ $0.stopped }) else { return }
                    self.heard(level, sentTo: user)
                }
            }
        }
    }

    /// Stops sending voice-driven frames, and reading the session's levels.
    public func stop() {
        state.withLock { s in
            s.stopped = true
            return s.reader.take()
        }?.cancel()
    }

    deinit { state.withLock { $0.reader.take() }?.cancel() }

    /// What drives the avatar now.
    public var source: VoiceFallback.Source {
        let now = session.mediaTimeMicros
        return state.withLock { $0.fallback.source(at: now) }
    }

    /// The jaw opening the voice being sent makes now (`VoiceExpressionGenerator`), for the strict
    /// privacy level's mouth (`ExpressionCapture.process(_:captureTimeMicros:voiceMouth:)`); nil
    /// while no audio has been sent for 200 ms (nobody else in the room).
    public var voiceMouth: Float? {
        let now = session.mediaTimeMicros
        return state.withLock { s in s.lastLevelMicros.map { now <= $0 + 200_000 } ?? false ? s.ownMouth : nil }
    }

    /// Counters since the start.
    public var statistics: Statistics { state.withLock { $0.statistics } }

    /// Hands over a frame from the camera's capture (tracked or lost), stamped with its capture
    /// time; it is sent to everyone unless the voice has taken over. Returns whether it was sent.
    @discardableResult
    public func send(cameraFrame frame: ExpressionFrame) -> Bool {
        let users = session.participants
        let outgoing = state.withLock { s -> [(String, ExpressionFrame)]? in
            guard !s.stopped, s.fallback.cameraFrame(frame.state, at: frame.captureTimeMicros) else {
                s.statistics.cameraFramesHeldBack += 1
                return nil
            }
            s.statistics.cameraFrames += 1
            if frame.state == .tracked { s.latest = (frame.expression, frame.isVoiceDriven) }
            return users.map { user in
                var numbered = frame
                numbered.sequence = s.sequences[user, default: 0]
                s.sequences[user] = numbered.sequence &+ 1
                return (user, numbered)
            }
        }
        guard let outgoing else { return false }
        for (user, numbered) in outgoing { session.send(numbered, to: user) }
        return true
    }

    /// The expression to show as this participant's own view at `nowMicros`, and whether the voice
    /// made it; while the voice drives and no audio is being sent (nobody else in the room), the
    /// face still blinks and moves.
    public func ownExpression(at nowMicros: UInt64) -> (expression: VeilCore.Expression, isVoiceDriven: Bool) {
        let muted = session.isMuted
        return state.withLock { s in
            if s.fallback.source(at: nowMicros) == .voice {
                if s.lastLevelMicros.map({ nowMicros > $0 + 200_000 }) ?? true {
                    s.latest = (s.own.update(level: 0, at: Double(nowMicros) / 1e6, muted: muted), true)
                }
            }
            return s.latest ?? (.neutral, false)
        }
    }

    /// One level of the audio sent to `user`: feeds that participant's generator, and sends a
    /// frame when one is due and the voice drives.
    private func heard(_ level: AudioLevel, sentTo user: String) {
        let now = session.mediaTimeMicros
        let period = UInt64(1_000_000 / framesPerSecond)
        let time = Double(level.timeMicros) / 1e6
        let frame = state.withLock { s -> ExpressionFrame? in
            var generator = s.generators[user] ?? VoiceExpressionGenerator(seed: seed)
            let expression = generator.update(level: level.rms, at: time, muted: level.muted)
            s.generators[user] = generator
            let voiceDrives = s.fallback.source(at: now) == .voice
            // The own view follows one connection's audio (each plays an input file from its own start).
            if s.ownUser == nil || s.ownUser == user || s.lastLevelMicros.map({ now > $0 + 200_000 }) ?? true {
                s.ownUser = user
                s.lastLevelMicros = now
                let own = s.own.update(level: level.rms, at: time, muted: level.muted)
                s.ownMouth = own[.jawOpen]
                if voiceDrives { s.latest = (own, true) }
            }
            guard voiceDrives else {
                s.nextFrameMicros[user] = nil
                return nil
            }
            if let next = s.nextFrameMicros[user], level.timeMicros < next, next - level.timeMicros <= period { return nil }
            let next = s.nextFrameMicros[user].map { $0 + period } ?? level.timeMicros + period
            s.nextFrameMicros[user] = next > level.timeMicros ? next : level.timeMicros + period
            let sequence = s.sequences[user, default: 0]
            s.sequences[user] = sequence &+ 1
            s.statistics.voiceFrames += 1
            return ExpressionFrame(sequence: sequence, captureTimeMicros: level.timeMicros, state: .tracked,
                                   expression: expression, isVoiceDriven: true)
        }
        if let frame { session.send(frame, to: user) }
    }
}
