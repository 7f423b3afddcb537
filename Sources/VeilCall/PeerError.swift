/// Why a `PeerConnection` could not do what was asked, or what went wrong during a call.
///
/// Compare `code` with the static members of `Code`; `description` says what failed and what to do
/// about it, in words fit for a log.
public struct PeerError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kind of failure. New kinds may be added; match with `==`, not exhaustively.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case gstreamerUnavailable, invalidArgument, invalidDescription, privacyViolation
            case wrongState, negotiationFailed, mediaFailed, closed
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The kind's name, e.g. `"privacyViolation"`.
        public var description: String { base.rawValue }

        /// GStreamer or one of its WebRTC plugins (webrtcbin, nice, dtls, srtp, sctp, opus) is missing.
        public static let gstreamerUnavailable = Code(.gstreamerUnavailable)
        /// An argument is unusable (missing file, oversized candidate, …).
        public static let invalidArgument = Code(.invalidArgument)
        /// A session description or ICE candidate from the remote side could not be parsed.
        public static let invalidDescription = Code(.invalidDescription)
        /// A session description would carry something other than audio and the expression channel
        /// (for example `m=video`); it was neither sent nor applied.
        public static let privacyViolation = Code(.privacyViolation)
        /// The request does not fit the connection's role or negotiation state (an offer to an
        /// offerer, an answer before an offer, …).
        public static let wrongState = Code(.wrongState)
        /// webrtcbin refused a description or could not create one.
        public static let negotiationFailed = Code(.negotiationFailed)
        /// The media pipeline reported an error (device, file, codec, network transport).
        public static let mediaFailed = Code(.mediaFailed)
        /// The connection is closed.
        public static let closed = Code(.closed)
    }

    /// What kind of failure this is.
    public let code: Code
    /// What failed, and what to do about it.
    public let description: String

    init(_ code: Code, _ description: String) {
        self.code = code
        self.description = description
    }
}
