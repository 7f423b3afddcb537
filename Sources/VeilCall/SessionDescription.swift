import VeilCore

/// An SDP offer or answer, as text, for the signaling channel to carry.
public struct SessionDescription: Hashable, Sendable {
    /// Offer or answer (JSEP). Provisional answers and rollbacks are not used by Veil.
    public enum Kind: String, Hashable, Sendable {
        case offer
        case answer
    }

    /// Whether this is an offer or an answer.
    public var type: Kind
    /// The SDP text (RFC 8866), lines separated by CRLF.
    public var sdp: String

    /// A description of `type` with the SDP text `sdp`.
    public init(type: Kind, sdp: String) {
        self.type = type
        self.sdp = sdp
    }
}

/// One trickled ICE candidate, as the signaling channel carries it.
public struct ICECandidate: Hashable, Sendable {
    /// Index of the media section (m-line) the candidate belongs to. Veil bundles everything on
    /// one transport, so local candidates always carry 0.
    public var mline: UInt32
    /// The `candidate:` attribute value, e.g. `candidate:1 1 UDP 2015363327 192.0.2.2 45545 typ host`.
    public var candidate: String

    /// A candidate for m-line `mline`.
    public init(mline: UInt32, candidate: String) {
        self.mline = mline
        self.candidate = candidate
    }
}

extension ICECandidate {
    /// Whether `candidate` (a `candidate:` attribute value) gives its address as an mDNS name
    /// (`….local`, RFC 8445 plus draft-ietf-mmusic-mdns-ice-candidates), as browsers do.
    public static func hasMulticastDNSAddress(_ candidate: String) -> Bool {
        let fields = candidate.split(separator: " ", omittingEmptySubsequences: true)
        guard fields.count > 4 else { return false }
        return fields[4].lowercased().hasSuffix(".local")
    }
}

/// What a `PeerConnection` asks the signaling channel to deliver to the remote peer, in order.
public enum PeerSignal: Hashable, Sendable {
    /// The local offer or answer.
    case description(SessionDescription)
    /// A local ICE candidate (trickle ICE).
    case candidate(ICECandidate)
}

/// The privacy rule every session description must pass before Veil sends or applies it: only
/// one audio section and one WebRTC data-channel section, never video or anything else.
///
/// `PeerConnection` checks each local description before it leaves the device (and refuses to send
/// one that fails), and each remote description before it is applied (an offer with `m=video`
/// would otherwise make the answer carry an `m=video` line too, even if rejected).
public enum SessionDescriptionPolicy {
    /// Remote descriptions longer than this are refused unread (a real one is 1–3 KB).
    public static let maximumLength = 64 * 1024

    /// The media kinds of the description's sections, in order (e.g. `["audio", "application"]`);
    /// empty for a description that is not well-formed SDP.
    public static func mediaKinds(in sdp: String) -> [String] {
        (try? SessionDescriptionMedia(parsing: sdp))?.kinds ?? []
    }

    /// Throws `PeerError.Code.privacyViolation` unless `sdp` is well-formed SDP (read strictly, see
    /// `SessionDescriptionMedia`) with at most one `m=audio` and at most one `m=application` section
    /// (a WebRTC data channel over DTLS/SCTP) and no other `m=` line.
    /// `requireBoth` additionally demands both sections (true for everything Veil produces itself).
    public static func validate(_ sdp: String, requireBoth: Bool = false) throws {
        guard sdp.utf8.count <= maximumLength else {
            throw PeerError(.invalidDescription, "session description of \(sdp.utf8.count) bytes exceeds \(maximumLength); refused")
        }
        let media: SessionDescriptionMedia
        do {
            media = try SessionDescriptionMedia(parsing: sdp)
        } catch {
            throw PeerError(.privacyViolation, "\(error): another parser might read a media section into it; refused")
        }
        if let section = media.firstForbiddenSection {
            let what = section.kind == "application" && !section.isDataChannel ? "an application section that is not a WebRTC data channel"
                     : ["audio", "application"].contains(section.kind) ? "a second \(section.kind) section" : "an m=\(section.kind.prefix(20)) section"
            throw PeerError(.privacyViolation, "session description has \(what) (line \(section.line)): Veil carries only one audio section and one data channel, never video or other media; refused")
        }
        let audio = media.kinds.filter { $0 == "audio" }.count, application = media.sections.filter(\.isDataChannel).count
        if requireBoth, audio != 1 || application != 1 {
            throw PeerError(.privacyViolation, "session description lacks its \(audio == 0 ? "audio" : "data-channel") section")
        }
    }
}
