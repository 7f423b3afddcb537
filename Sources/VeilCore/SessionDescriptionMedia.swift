/// The media sections of an SDP session description (RFC 8866), read strictly, so that Veil's
/// privacy rule ("voice and expressions only, never video") is checked on the structure every
/// parser would see, not on one spelling of it.
///
/// SDP parsers differ in what they forgive: some trim whitespace around a line, lower-case its
/// type letter, split on a bare CR or on Unicode line separators. A check that looks for the
/// spelling `m=video` passes ` m=video`, `M=video` or `m= video`, which such a parser reads as a
/// video section. So the grammar here is RFC 8866's, without forgiveness: every line is one
/// lower-case letter, `=`, and a value; lines end in CRLF or LF; no control character other than
/// tab appears anywhere. A description that is not of that form is refused as a whole, and the
/// sections are read from what is left. The room server (before relaying) and the call layer
/// (before sending or applying) both use it.
public struct SessionDescriptionMedia: Equatable, Sendable {
    /// One `m=` section.
    public struct Section: Equatable, Sendable {
        /// The media type as written: `audio`, `application`, `video`, …
        public var kind: String
        /// The transport protocol, e.g. `UDP/TLS/RTP/SAVPF` or `UDP/DTLS/SCTP`.
        public var transport: String
        /// The line it starts on (1-based).
        public var line: Int

        /// Whether it is a WebRTC data channel (`application` over SCTP).
        public var isDataChannel: Bool { kind == "application" && transport.contains("SCTP") }
    }

    /// Why a description is not well-formed SDP.
    public struct Malformed: Error, Equatable, Sendable, CustomStringConvertible {
        /// The line (1-based).
        public let line: Int
        /// What is wrong with it.
        public let reason: String
        public var description: String { "line \(line) of the session description \(reason)" }
    }

    /// The sections, in order.
    public var sections: [Section]

    /// Reads `sdp` strictly (see the type's description).
    /// - Throws: `Malformed` for the first line that is not `<letter>=<value>`, an `m=` line without
    ///   a media type, port and protocol, or a control character.
    public init(parsing sdp: String) throws(Malformed) {
        sections = []
        var lines = sdp.utf8.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false)
        if lines.last?.isEmpty == true { lines.removeLast() } // the final line end
        for (index, rawLine) in lines.enumerated() {
            let number = index + 1
            let line = rawLine.last == UInt8(ascii: "\r") ? rawLine.dropLast() : rawLine[...]
            guard line.count >= 2, let type = line.first, (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(type),
                  line[line.index(after: line.startIndex)] == UInt8(ascii: "=") else {
                throw Malformed(line: number, reason: "is not of the form <lower-case letter>=<value>")
            }
            guard !line.contains(where: { $0 < 0x20 && $0 != UInt8(ascii: "\t") || $0 == 0x7F }) else {
                throw Malformed(line: number, reason: "contains a control character")
            }
            // Unicode line and paragraph separators and NEL, which some parsers split on.
            let text = String(decoding: line, as: UTF8.self)
            guard !text.unicodeScalars.contains(where: { [0x85, 0x2028, 0x2029].contains($0.value) }) else {
                throw Malformed(line: number, reason: "contains a Unicode line separator")
            }
            guard type == UInt8(ascii: "m") else { continue }
            let fields = text.dropFirst(2).split(separator: " ", omittingEmptySubsequences: false)
            guard fields.count >= 3, fields.prefix(3).allSatisfy({ !$0.isEmpty }) else {
                throw Malformed(line: number, reason: "is an m= line without its media type, port and protocol separated by single spaces")
            }
            sections.append(Section(kind: String(fields[0]), transport: String(fields[2]), line: number))
        }
    }

    /// The media types of the sections, in order (e.g. `["audio", "application"]`).
    public var kinds: [String] { sections.map(\.kind) }

    /// The first section that is neither audio nor a WebRTC data channel, or the second of either:
    /// what Veil refuses to send, relay or apply. Nil when the description carries voice and
    /// expressions only.
    public var firstForbiddenSection: Section? {
        var audio = 0, data = 0
        for section in sections {
            if section.kind == "audio" { audio += 1 } else if section.isDataChannel { data += 1 } else { return section }
            if audio > 1 || data > 1 { return section }
        }
        return nil
    }
}
