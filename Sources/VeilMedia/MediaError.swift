/// An error from reading or writing video and images, with a message that says what failed and
/// what to do about it. Compare ``kind`` to react to a class of failure; new kinds may be added.
public struct MediaError: Error, CustomStringConvertible, Sendable {
    /// The class of a ``MediaError``. New kinds may be added in later versions.
    public struct Kind: Hashable, Sendable, CustomStringConvertible {
        private enum Code: Hashable, Sendable {
            case gstreamerUnavailable, notFound, cameraUnavailable, unsupportedInput, invalidArgument,
                 notWritable, streamFailed, timedOut, invalidState, displayUnavailable
        }
        private let code: Code
        private init(_ code: Code) { self.code = code }

        /// GStreamer could not be initialised or lacks an element Veil needs.
        public static let gstreamerUnavailable = Kind(.gstreamerUnavailable)
        /// An input file, directory or image sequence does not exist.
        public static let notFound = Kind(.notFound)
        /// A camera device is missing, busy or cannot deliver video.
        public static let cameraUnavailable = Kind(.cameraUnavailable)
        /// The input exists but is not a video or image that can be decoded.
        public static let unsupportedInput = Kind(.unsupportedInput)
        /// An argument is out of range or malformed (size, frame rate, file pattern, frame size on write).
        public static let invalidArgument = Kind(.invalidArgument)
        /// The output cannot be created or written.
        public static let notWritable = Kind(.notWritable)
        /// Decoding or encoding failed while the stream was running.
        public static let streamFailed = Kind(.streamFailed)
        /// GStreamer did not answer within the allotted time.
        public static let timedOut = Kind(.timedOut)
        /// The object was used after it finished or failed (e.g. writing after `finish()`).
        public static let invalidState = Kind(.invalidState)
        /// There is no display to open a window on (no `DISPLAY`/`WAYLAND_DISPLAY`, an unreachable X
        /// server), or the window was closed.
        public static let displayUnavailable = Kind(.displayUnavailable)

        /// A short name of the kind, for logs.
        public var description: String { "\(code)" }
    }

    /// The class of failure.
    public let kind: Kind
    /// What failed and what to do about it.
    public let message: String
    /// GStreamer's debugging detail (element path, source location), when the failure came from it.
    public let debugInfo: String?

    /// Makes an error of `kind`; `message` should say what failed and what to do.
    public init(_ kind: Kind, _ message: String, debugInfo: String? = nil) {
        self.kind = kind; self.message = message; self.debugInfo = debugInfo
    }

    /// The message, as shown to a user.
    public var description: String { message }
}
