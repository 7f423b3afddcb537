import Foundation
import VeilConsole
import VeilCore
import VeilMedia
import VeilTracking
import VeilVision

/// The capture loop every camera and video input runs through: read a frame, wait until it is due,
/// track it and reduce it to an `ExpressionFrame` at the chosen privacy level, hand it on. `veil
/// call` runs it through `CameraExpressionSource` (`Options.call`), `veil track` and `veil render`
/// directly, each with its own `Options`.
///
/// A loop reads the input it was opened on, with one face tracker whose state (the face it locked
/// on, the neutral it calibrated) carries from frame to frame: `run` it once, on one thread.
public final class CaptureLoop {
    /// How a run reads, paces, stamps and ends.
    public struct Options: Sendable {
        /// What a run does when a file ends (a camera does not).
        public enum AtEnd: Sendable {
            /// `run` returns.
            case stop
            /// The file is opened again and played from its start, its times going on from where
            /// the pass before ended (one frame interval after its last frame).
            case startOver
        }

        /// When a file's frames are tracked (a camera's come when the camera sends them).
        public enum Pacing: Sendable {
            /// No earlier than their times after the first frame, on the loop's clock, as a camera
            /// would deliver them: what is sent from them moves at the speed it was recorded.
            case realTime
            /// Each as soon as the one before is done.
            case asFastAsPossible
        }

        /// The capture time each `ExpressionFrame` is stamped with.
        public enum CaptureTime: Sendable {
            /// The frame's time on the input's timeline (`Frame.timeMicros`).
            case input
            /// The loop's clock when the frame is tracked (a call's media clock).
            case clock
        }

        /// What a frame the tracker fails on does.
        public enum TrackingFailure: Sendable {
            /// `run` throws the tracker's error.
            case stop
            /// The frame is skipped (not handed on, not counted) and the run goes on.
            case skipFrame
        }

        public var atEnd: AtEnd
        public var pacing: Pacing
        /// Frames to hand on at most; nil: until the input ends (or the run is stopped).
        public var frameLimit: Int?
        public var captureTime: CaptureTime
        public var trackingFailures: TrackingFailure

        /// By default a run reads the input once, as fast as it can, stamps frames with the input's
        /// times and throws what the tracker throws.
        public init(atEnd: AtEnd = .stop, pacing: Pacing = .asFastAsPossible, frameLimit: Int? = nil,
                    captureTime: CaptureTime = .input, trackingFailures: TrackingFailure = .stop) {
            self.atEnd = atEnd
            self.pacing = pacing
            self.frameLimit = frameLimit
            self.captureTime = captureTime
            self.trackingFailures = trackingFailures
        }

        /// What a call sends from: a file in real time, started over when it ends, frames stamped
        /// on the call's clock, a frame the tracker fails on skipped.
        public static let call = Options(atEnd: .startOver, pacing: .realTime, captureTime: .clock, trackingFailures: .skipFrame)
    }

    /// One frame as read and tracked.
    public struct Frame {
        /// 0 for the first frame handed on, then counting every frame handed on (over every pass).
        public var index: Int
        /// The picture and its timestamp as the input gave it (each pass of a started-over file
        /// from its own start).
        public var video: VideoFrame
        /// The frame's time on the run's timeline: the input's timestamp, plus the passes before it
        /// when a file starts over.
        public var timeMicros: UInt64
        /// The expression frame (after the privacy stage) and the tracker's view of the picture,
        /// for a local overlay only.
        public var output: ExpressionCapture.Output
        /// How long tracking and estimating this frame took.
        public var trackingMilliseconds: Double
    }

    /// The input, as `VideoSource.open` takes it: a camera (`/dev/videoN`), a video file, an image,
    /// a directory of images or an image sequence (`frames/%05d.png`).
    public let path: String
    private var source: VideoSource
    private let capture: ExpressionCapture
    private let clock: @Sendable () -> UInt64

    /// Opens `path` and loads the face tracker. `clock` gives the time (µs) a real-time run paces
    /// file frames by, and stamps them with for `CaptureTime.clock` (by default the machine's
    /// monotonic clock). A file that cannot be read is an `invalidInput` error that names it; what
    /// opening the input or loading the tracker throws is thrown as it is.
    public init(path: String, privacy: PrivacyLevel,
                clock: @escaping @Sendable () -> UInt64 = { UInt64(monotonicMilliseconds() * 1000) }) throws {
        if !path.hasPrefix("/dev/video") && !path.contains("%") && !FileManager.default.isReadableFile(atPath: path) {
            throw VeilError.invalidInput("cannot read \(path): no such file, or not readable")
        }
        self.path = path
        self.clock = clock
        source = try VideoSource.open(path)
        capture = ExpressionCapture(tracker: try MediaPipeFaceTracker(), privacy: privacy)
    }

    /// A camera: frames come when it sends them, until the run is stopped.
    public var isLive: Bool { source.isLive }
    /// The input's picture size.
    public var size: (width: Int, height: Int) { source.size }
    /// The input's frame rate (30 where the input does not say, as for a still).
    public var framesPerSecond: Double { source.framesPerSecond.flatMap { $0 > 0 ? $0 : nil } ?? 30 }

    /// Frames a run with `options` hands on if the tracker never fails: nil for a camera, and when
    /// unknown or when only stopping ends it (a file started over without a frame limit).
    public func expectedFrameCount(_ options: Options) -> Int? {
        guard !source.isLive else { return nil }
        guard options.atEnd == .stop else { return options.frameLimit }
        return source.estimatedFrameCount.map { min($0, options.frameLimit ?? .max) }
    }

    /// Reads, paces and tracks frames, handing each to `body` in the order read, until the input
    /// ends (unless it starts over), `options.frameLimit` frames have been handed on, or
    /// `keepGoing` (asked before each read) says no. `voiceMouth` gives the jaw opening of the voice
    /// being sent at about now, which the strict privacy level moves the mouth with; nil: the
    /// face's own. Throws what reading the input (or opening it again) throws, what `body`
    /// throws and, unless `options` skips them, what the tracker throws; the frames handed on
    /// before stay handed on.
    public func run(_ options: Options, voiceMouth: () -> Float? = { nil }, while keepGoing: () -> Bool = { true },
                    _ body: (Frame) throws -> Void) throws {
        var video = VideoFrame(image: RGBImage(width: 0, height: 0), timestampMicros: 0)
        var index = 0
        // The first frame's time on the run's timeline and on the clock: a real-time run tracks
        // every later frame no earlier than its distance from the first.
        var origin: (time: UInt64, clock: UInt64)?
        // Where the current pass starts on the run's timeline, and where the next one would.
        var passStart: UInt64 = 0, passEnd: UInt64 = 0
        var readThisPass = 0
        let frameInterval = UInt64((1e6 / framesPerSecond).rounded())
        while index < options.frameLimit ?? .max, keepGoing() {
            guard try source.read(into: &video) else {
                // An input with no frame at all would start over for ever.
                guard options.atEnd == .startOver, !source.isLive, readThisPass > 0 else { return }
                source = try VideoSource.open(path)
                passStart = passEnd
                readThisPass = 0
                continue
            }
            readThisPass += 1
            // Wrapping: a broken file's timestamp must not trap.
            let time = passStart &+ video.timestampMicros
            passEnd = max(passEnd, time &+ frameInterval)
            if options.pacing == .realTime, !source.isLive {
                let first = origin ?? (time, clock())
                origin = first
                let due = first.clock &+ (time > first.time ? time - first.time : 0)
                let now = clock()
                if due > now { Thread.sleep(forTimeInterval: Double(due - now) / 1e6) }
            }
            let started = monotonicMilliseconds()
            let output: ExpressionCapture.Output
            do {
                output = try capture.process(video.image, captureTimeMicros: options.captureTime == .clock ? clock() : time,
                                             voiceMouth: voiceMouth())
            } catch where options.trackingFailures == .skipFrame {
                continue
            }
            try body(Frame(index: index, video: video, timeMicros: time, output: output,
                           trackingMilliseconds: monotonicMilliseconds() - started))
            index += 1
        }
    }
}
