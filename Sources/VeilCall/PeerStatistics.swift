import VeilCore

/// How an ICE candidate was obtained (RFC 8445).
public enum CandidateType: String, Sendable, Equatable {
    /// An address of one of the device's own interfaces.
    case host
    /// The public address a STUN server saw (server reflexive).
    case srflx
    /// An address learnt from the peer's connectivity checks (peer reflexive).
    case prflx
    /// An address on a TURN relay.
    case relay
    /// Anything GStreamer reports that is none of the above.
    case unknown
}

/// One end of the selected ICE candidate pair.
public struct CandidateEndpoint: Sendable, Equatable, CustomStringConvertible {
    /// IP address as text (IPv4 dotted or IPv6).
    public var address: String
    /// UDP or TCP port.
    public var port: Int
    /// How the candidate was obtained.
    public var type: CandidateType
    /// Transport protocol, `"udp"` or `"tcp"`.
    public var transport: String

    /// An endpoint; see the properties.
    public init(address: String, port: Int, type: CandidateType, transport: String) {
        self.address = address
        self.port = port
        self.type = type
        self.transport = transport
    }

    /// `address:port (type)`, with IPv6 addresses in brackets.
    public var description: String {
        (address.contains(":") ? "[\(address)]:\(port)" : "\(address):\(port)") + " (\(type.rawValue))"
    }
}

/// The ICE candidate pair the connection uses.
public struct CandidatePair: Sendable, Equatable {
    /// This device's end.
    public var local: CandidateEndpoint
    /// The remote peer's end.
    public var remote: CandidateEndpoint

    /// A pair of endpoints.
    public init(local: CandidateEndpoint, remote: CandidateEndpoint) {
        self.local = local
        self.remote = remote
    }
}

/// Traffic on the expression data channel. Totals since the connection was created; rates over
/// the interval since the previous `PeerConnection.statistics()` call.
public struct ExpressionChannelStatistics: Sendable, Equatable {
    /// Frames handed to the data channel.
    public var framesSent = 0
    /// Frames not sent: the channel was congested (buffered amount over the limit) or not open.
    public var framesDropped = 0
    /// Valid frames received.
    public var framesReceived = 0
    /// Payloads received that were not a valid `ExpressionFrame` (dropped).
    public var invalidPayloads = 0
    /// Payload bytes sent.
    public var bytesSent = 0
    /// Payload bytes received (valid frames only).
    public var bytesReceived = 0
    /// The longest payload received, valid or not, in bytes.
    public var largestPayloadReceived = 0
    /// Frames sent per second.
    public var framesSentPerSecond = 0.0
    /// Frames dropped per second.
    public var framesDroppedPerSecond = 0.0
    /// Valid frames received per second.
    public var framesReceivedPerSecond = 0.0
    /// Payload bytes sent per second.
    public var bytesSentPerSecond = 0.0
    /// Payload bytes received per second.
    public var bytesReceivedPerSecond = 0.0

    /// Empty statistics.
    public init() {}
}

/// A snapshot of one peer connection's network and traffic figures (from webrtcbin's get-stats
/// and Veil's own counters). Rates cover the interval since the previous snapshot.
public struct PeerStatistics: Sendable, Equatable {
    /// The connection state when the snapshot was taken.
    public var state: PeerConnection.State = .new
    /// Seconds covered by the rates (since the previous snapshot, or since the connection was created).
    public var intervalSeconds = 0.0
    /// Milliseconds from creating the connection to its first `connected` state.
    public var connectMillis: Double?
    /// The selected ICE candidate pair, once connected.
    public var candidatePair: CandidatePair?
    /// Round-trip time from RTCP in milliseconds; known after the first report round trip (≈ 1–2 s).
    public var roundTripTimeMillis: Double?
    /// Incoming audio packets lost since the start (RTP sequence gaps after the jitter buffer).
    public var packetsLost = 0
    /// Fraction of incoming audio packets lost during the interval (0…1), when audio arrived.
    public var lossFraction: Double?
    /// Fraction of outgoing audio packets the remote reported lost in its last RTCP report (0…1).
    public var remoteLossFraction: Double?
    /// Interarrival jitter of incoming audio in milliseconds (RFC 3550).
    public var jitterMillis: Double?
    /// Outgoing audio RTP packets since the start.
    public var audioPacketsSent = 0
    /// Incoming audio RTP packets since the start.
    public var audioPacketsReceived = 0
    /// Outgoing audio RTP bytes since the start.
    public var audioBytesSent = 0
    /// Incoming audio RTP bytes since the start.
    public var audioBytesReceived = 0
    /// Outgoing audio in bits per second over the interval (RTP payload and header).
    public var audioBitrateOut = 0.0
    /// Incoming audio in bits per second over the interval.
    public var audioBitrateIn = 0.0
    /// Incoming audio RTP packets per second over the interval (50 for 20 ms Opus frames).
    public var audioPacketsReceivedPerSecond = 0.0
    /// The expression channel's traffic.
    public var expression = ExpressionChannelStatistics()
    /// The media kind of every outbound RTP stream ("audio"; never "video").
    public var outboundStreamKinds: [String] = []
    /// Bytes sent on outbound RTP streams that are not audio (0: no picture leaves).
    public var nonAudioBytesSent = 0
    /// `NetworkQuality.assess` of the round-trip time and the worse of the two loss fractions.
    public var quality: NetworkQuality = .down
    /// What the received voice's playout did since the start: its target and current delay, and
    /// how much audio it made up (concealed) or stretched (`AdaptivePlayout.Statistics`).
    public var playout = AdaptivePlayout.Statistics()

    /// Empty statistics (state `new`, quality `down`).
    public init() {}
}

// MARK: - Building statistics (pure)

/// One entry of webrtcbin's get-stats reply: its type (the structure name, e.g.
/// `"candidate-pair"`), its id, and every field serialised as text.
struct StatsEntry: Sendable, Equatable {
    var type: String
    var fields: [String: String]

    var id: String { fields["id"] ?? "" }
    func string(_ key: String) -> String? { fields[key] }
    func double(_ key: String) -> Double? { fields[key].flatMap { Double($0) } }
    func int(_ key: String) -> Int? { double(key).map { Int($0) } }
}

/// Veil's own counters, kept where the events happen (streaming threads) under one mutex.
struct PeerCounters: Sendable, Equatable {
    var framesSent = 0, framesDropped = 0, framesReceived = 0, invalidPayloads = 0
    var bytesSent = 0, bytesReceived = 0, largestPayloadReceived = 0
    var rtpPacketsReceived = 0, decodedAudioBuffers = 0, decodedAudioSamples = 0
}

/// What one `statistics()` call saw, kept to compute the next call's rates.
struct StatsSample: Sendable, Equatable {
    var timeMicros: UInt64
    var entries: [StatsEntry]
    var counters: PeerCounters
}

extension PeerStatistics {
    /// Builds statistics from a get-stats reply and Veil's counters; rates from the difference to
    /// `previous`. Works around GStreamer 1.22's swapped candidate entries: the pair's
    /// `local-candidate-id` / `remote-candidate-id` are resolved by id, whatever type the entry says.
    init(current: StatsSample, previous: StatsSample, state: PeerConnection.State, connectMillis: Double?) {
        self.init()
        self.state = state
        self.connectMillis = connectMillis
        let seconds = Double(current.timeMicros &- previous.timeMicros) / 1e6
        intervalSeconds = max(seconds, 0)
        func rate(_ now: Int, _ before: Int) -> Double { seconds > 0 ? Double(max(now - before, 0)) / seconds : 0 }

        let byID = Dictionary(current.entries.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        func endpoint(_ id: String?) -> CandidateEndpoint? {
            guard let id, let entry = byID[id], let address = entry.string("address"), let port = entry.int("port") else { return nil }
            let type = CandidateType(rawValue: entry.string("candidate-type") ?? "") ?? .unknown
            return CandidateEndpoint(address: address, port: port, type: type, transport: entry.string("protocol") ?? "udp")
        }
        if let pair = current.entries.first(where: { $0.type == "candidate-pair" }),
           let local = endpoint(pair.string("local-candidate-id")), let remote = endpoint(pair.string("remote-candidate-id")) {
            candidatePair = CandidatePair(local: local, remote: remote)
        }

        func total(_ entries: [StatsEntry], _ type: String, _ key: String) -> Int {
            entries.filter { $0.type == type }.reduce(0) { $0 + ($1.int(key) ?? 0) }
        }
        // Media kinds of what is sent, from each outbound stream's codec (e.g. "audio/OPUS"):
        // the evidence that no camera picture leaves, taken from the transport's own counters.
        for stream in current.entries where stream.type == "outbound-rtp" {
            let mime = byID[stream.string("codec-id") ?? ""]?.string("mime-type") ?? stream.string("kind") ?? "unknown"
            let kind = String(mime.lowercased().split(separator: "/").first ?? "unknown")
            outboundStreamKinds.append(kind)
            if kind != "audio" { nonAudioBytesSent += stream.int("bytes-sent") ?? 0 }
        }
        audioPacketsSent = total(current.entries, "outbound-rtp", "packets-sent")
        audioBytesSent = total(current.entries, "outbound-rtp", "bytes-sent")
        audioPacketsReceived = total(current.entries, "inbound-rtp", "packets-received")
        audioBytesReceived = total(current.entries, "inbound-rtp", "bytes-received")
        packetsLost = max(total(current.entries, "inbound-rtp", "packets-lost"), 0)
        if seconds > 0 {
            audioBitrateOut = 8 * Double(max(audioBytesSent - total(previous.entries, "outbound-rtp", "bytes-sent"), 0)) / seconds
            audioBitrateIn = 8 * Double(max(audioBytesReceived - total(previous.entries, "inbound-rtp", "bytes-received"), 0)) / seconds
        }
        let receivedDelta = audioPacketsReceived - total(previous.entries, "inbound-rtp", "packets-received")
        let lostDelta = max(packetsLost - max(total(previous.entries, "inbound-rtp", "packets-lost"), 0), 0)
        audioPacketsReceivedPerSecond = seconds > 0 ? Double(max(receivedDelta, 0)) / seconds : 0
        if receivedDelta + lostDelta > 0 {
            lossFraction = Double(lostDelta) / Double(receivedDelta + lostDelta)
        }
        if let inbound = current.entries.first(where: { $0.type == "inbound-rtp" }), let jitter = inbound.double("jitter") {
            jitterMillis = jitter * 1000
        }
        if let report = current.entries.first(where: { $0.type == "remote-inbound-rtp" }) {
            if let rtt = report.double("round-trip-time"), rtt > 0 { roundTripTimeMillis = rtt * 1000 }
            if let fraction = report.double("fraction-lost") {
                // GStreamer reports the RTCP field either as a fraction or as its raw 8-bit value.
                remoteLossFraction = fraction > 1 ? min(fraction / 256, 1) : max(fraction, 0)
            }
        }

        let c = current.counters, p = previous.counters
        expression.framesSent = c.framesSent
        expression.framesDropped = c.framesDropped
        expression.framesReceived = c.framesReceived
        expression.invalidPayloads = c.invalidPayloads
        expression.bytesSent = c.bytesSent
        expression.bytesReceived = c.bytesReceived
        expression.largestPayloadReceived = c.largestPayloadReceived
        expression.framesSentPerSecond = rate(c.framesSent, p.framesSent)
        expression.framesDroppedPerSecond = rate(c.framesDropped, p.framesDropped)
        expression.framesReceivedPerSecond = rate(c.framesReceived, p.framesReceived)
        expression.bytesSentPerSecond = rate(c.bytesSent, p.bytesSent)
        expression.bytesReceivedPerSecond = rate(c.bytesReceived, p.bytesReceived)

        let losses = [lossFraction, remoteLossFraction].compactMap { $0 }
        quality = NetworkQuality.assess(roundTripMillis: roundTripTimeMillis, lossFraction: losses.max(),
                                        isConnected: state == .connected)
    }
}
