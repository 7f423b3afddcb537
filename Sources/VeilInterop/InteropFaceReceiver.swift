import VeilCore

/// The pure half of taking a face from a VMC Performer or the Live Link Face app (`veil call
/// --face`): datagrams in, in arrival order, with who sent them and when; the face's frames out,
/// tracked or lost, as a camera tracker would give them. No socket and no clock: the caller
/// (`InteropFaceSource` in VeilInteropNetwork) hands in the times, so the timing is tested without
/// sleeping.
///
/// - **One sender.** With `Configuration.expectedSources`, only datagrams from those sources
///   (one host's addresses) are read; without any, the first source whose datagram decodes is taken and kept. Datagrams from
///   any other source are counted (`Statistics.fromOtherSources`) and dropped unread.
/// - **Bad input.** A datagram that does not decode (`InteropError`: malformed, truncated,
///   oversized, unknown version, wrong count…) is dropped and counted by kind; for VMC, so are
///   messages Veil does not read (unknown addresses, other bones, other blendshape names,
///   malformed arguments). The first of each kind comes back as a `Note` to log, the others are
///   only counted: a flood of one kind of garbage is one log line.
/// - **Expressions.** A Live Link packet is one expression; VMC's is complete at each
///   `/VMC/Ext/Blend/Apply` (`VMCReceiver`). Values are clamped to their ranges (`ExpressionUpdate`).
///   At most one tracked frame per `minimumFrameIntervalMicros` comes out (the newest expression
///   waits for its turn), so a sender at 60 frames/s passes and a flood of valid packets does not
///   reach the call as a flood; a frame's time is its expression's arrival.
/// - **A sender that stops.** After `lostAfterMicros` without an expression (also before the
///   first one), lost frames come out every `lostFrameIntervalMicros`, as from a camera that sees
///   no face; tracked frames resume with the next expression.
///
/// Memory is bounded whatever arrives: the decoders' state, one pending expression and a counter
/// per kind of bad input.
public struct InteropFaceReceiver<Source: Hashable & Sendable & CustomStringConvertible>: Sendable {
    /// What to read and how to time it.
    public struct Configuration: Sendable {
        /// The protocol the datagrams speak.
        public var kind: InteropEndpoint.Kind
        /// The only sources accepted (the addresses of the host `--face` names); empty: the first
        /// whose datagram decodes.
        public var expectedSources: Set<Source>
        /// How long without an expression before frames are lost (100 ms).
        public var lostAfterMicros: UInt64 = 100_000
        /// Lost frames' spacing (30 a second).
        public var lostFrameIntervalMicros: UInt64 = 33_333
        /// The least time between two tracked frames (16 ms: at most about 60 a second).
        public var minimumFrameIntervalMicros: UInt64 = 16_000

        /// A configuration for `kind`, accepting `expectedSources` only when any are given.
        public init(kind: InteropEndpoint.Kind, expectedSources: Set<Source> = []) {
            self.kind = kind; self.expectedSources = expectedSources
        }
    }

    /// What was received, read and dropped so far.
    public struct Statistics: Equatable, Sendable, Codable {
        /// Datagrams handed in, from any source.
        public var datagrams = 0
        /// Datagrams from sources other than the accepted one, dropped unread.
        public var fromOtherSources = 0
        /// Complete expressions read from the accepted source.
        public var expressions = 0
        /// Tracked frames given out (fewer than `expressions` when they came faster than
        /// `Configuration.minimumFrameIntervalMicros`).
        public var framesTracked = 0
        /// Lost frames given out.
        public var framesLost = 0
        /// Datagrams that did not decode, by `InteropError.kind` (`malformed`, `truncated`,
        /// `oversized`, `unknownVersion`, `wrongCount`…), and VMC messages Veil does not read
        /// (`unknownAddress`, `otherBone`, `unknownBlendShape`, `malformedMessage`).
        public var dropped: [String: Int] = [:]
        /// The source (or, named, sources) expressions are taken from, once known.
        public var source: String?

        /// Nothing received yet.
        public init() {}
    }

    /// Something worth one log line: the first of its kind.
    public struct Note: Equatable, Sendable, CustomStringConvertible {
        /// `source` (the accepted one, the first other one, or `dropped:KIND`).
        public var kind: String
        /// The line to log.
        public var description: String
    }

    /// One frame of the face.
    public enum Frame: Equatable, Sendable {
        /// An expression, and when it arrived.
        case tracked(ExpressionUpdate, atMicros: UInt64)
        /// No expression for a while (`Configuration.lostAfterMicros`): what a camera sends when
        /// the face is out of view.
        case lost(atMicros: UInt64)
    }

    public let configuration: Configuration
    public private(set) var statistics = Statistics()
    /// The sources whose datagrams are read: those expected, or the first sender; empty until known.
    public private(set) var acceptedSources: Set<Source>
    private var vmc = VMCReceiver()
    private var noted: Set<String> = []
    private let startMicros: UInt64
    private var lastExpressionMicros: UInt64?
    private var pending: (update: ExpressionUpdate, atMicros: UInt64)?
    private var lastTrackedMicros: UInt64?
    private var nextLostMicros: UInt64?

    /// A receiver started at `startMicros` (lost frames begin `lostAfterMicros` after it unless an
    /// expression comes first).
    public init(_ configuration: Configuration, at startMicros: UInt64) {
        self.configuration = configuration
        self.startMicros = startMicros
        acceptedSources = configuration.expectedSources
        if !acceptedSources.isEmpty { statistics.source = Self.describe(acceptedSources) }
    }

    /// Reads one datagram from `source`, which arrived at `nowMicros` (`truncated`: the socket cut
    /// it, so it is dropped as oversized). Returns the lines to log: at most one per kind of event
    /// over the receiver's life. The datagram is read where it lies (the socket's receive buffer),
    /// not copied.
    public mutating func receive(_ datagram: ArraySlice<UInt8>, truncated: Bool = false, from source: Source, at nowMicros: UInt64) -> [Note] {
        statistics.datagrams += 1
        var notes: [Note] = []
        if !acceptedSources.isEmpty, !acceptedSources.contains(source) {
            statistics.fromOtherSources += 1
            if firstTime("otherSource") {
                notes.append(Note(kind: "otherSource", description: "\(name): ignoring datagrams from \(source): expressions come from "
                                  + "\(Self.describe(acceptedSources)) only; further ones are counted, not logged"))
            }
            return notes
        }
        let before = vmc.statistics
        let update: ExpressionUpdate?
        do {
            if truncated {
                throw InteropError.oversized.detailed("a datagram larger than the receive buffer")
            }
            switch configuration.kind {
            case .vmc: update = try vmc.receive(datagram)
            case .liveLink: update = try LiveLinkFacePacket(decoding: datagram).update
            }
        } catch {
            let kind = (error as? InteropError)?.kind ?? "malformed"
            statistics.dropped[kind, default: 0] += 1
            if firstTime("dropped:\(kind)") {
                notes.append(Note(kind: "dropped:\(kind)", description: "\(name): dropped a datagram from \(source) (\(error)); "
                                  + "further ones of this kind are counted, not logged"))
            }
            return notes
        }
        if acceptedSources.isEmpty {
            acceptedSources = [source]
            statistics.source = source.description
            if firstTime("source") {
                notes.append(Note(kind: "source", description: "\(name): taking expressions from \(source), the first sender; "
                                  + "datagrams from other addresses are ignored"))
            }
        } else {
            if firstTime("source") { notes.append(Note(kind: "source", description: "\(name): receiving from \(source)")) }
        }
        if configuration.kind == .vmc { countIgnoredMessages(since: before, from: source, into: &notes) }
        if let update {
            statistics.expressions += 1
            lastExpressionMicros = nowMicros
            pending = (update, nowMicros)
        }
        return notes
    }

    /// Reads one datagram, as `receive(_:truncated:from:at:)` does a slice.
    public mutating func receive(_ datagram: [UInt8], truncated: Bool = false, from source: Source, at nowMicros: UInt64) -> [Note] {
        receive(datagram[...], truncated: truncated, from: source, at: nowMicros)
    }

    /// The frame due at `nowMicros`, if any: the newest expression once its turn has come, else a
    /// lost frame when one is due. Call it again until it returns nil.
    public mutating func frame(at nowMicros: UInt64) -> Frame? {
        if let waiting = pending {
            guard lastTrackedMicros.map({ nowMicros >= $0 + configuration.minimumFrameIntervalMicros }) ?? true else { return nil }
            pending = nil
            lastTrackedMicros = nowMicros
            nextLostMicros = nil
            statistics.framesTracked += 1
            return .tracked(waiting.update, atMicros: waiting.atMicros)
        }
        let due = nextLostMicros ?? (lastExpressionMicros ?? startMicros) + configuration.lostAfterMicros
        guard nowMicros >= due else { return nil }
        // After a stall (a busy machine), one lost frame now rather than a burst of late ones.
        let next = due + configuration.lostFrameIntervalMicros
        nextLostMicros = next > nowMicros ? next : nowMicros + configuration.lostFrameIntervalMicros
        statistics.framesLost += 1
        return .lost(atMicros: nowMicros)
    }

    /// When `frame(at:)` will next have something, without any new datagram.
    public var nextFrameMicros: UInt64 {
        if pending != nil { return lastTrackedMicros.map { $0 + configuration.minimumFrameIntervalMicros } ?? 0 }
        return nextLostMicros ?? (lastExpressionMicros ?? startMicros) + configuration.lostAfterMicros
    }

    private static func describe(_ sources: Set<Source>) -> String { sources.map(\.description).sorted().joined(separator: " or ") }

    private var name: String { configuration.kind.displayName }

    /// Counts (and notes the first of) each kind of VMC message read in the last datagram and ignored.
    private mutating func countIgnoredMessages(since before: VMCReceiver.Statistics, from source: Source, into notes: inout [Note]) {
        let after = vmc.statistics
        let kinds: [(String, Int, String)] = [
            ("unknownAddress", after.unknownAddresses - before.unknownAddresses, "messages to addresses Veil does not read"),
            ("otherBone", after.otherBones - before.otherBones, "bones other than Head, LeftEye and RightEye"),
            ("unknownBlendShape", after.unknownBlendShapes - before.unknownBlendShapes, "blendshapes that are not ARKit's 52"),
            ("malformedMessage", after.malformedMessages - before.malformedMessages, "messages with missing or mistyped arguments"),
        ]
        for (kind, count, what) in kinds where count > 0 {
            statistics.dropped[kind, default: 0] += count
            if firstTime("dropped:\(kind)") {
                notes.append(Note(kind: "dropped:\(kind)", description: "\(name): ignoring \(what) (first from \(source)); "
                                  + "further ones are counted, not logged"))
            }
        }
    }

    /// True the first time `kind` is seen: its note is made then, and only then (a flood of one
    /// kind costs no text).
    private mutating func firstTime(_ kind: String) -> Bool { noted.insert(kind).inserted }
}
