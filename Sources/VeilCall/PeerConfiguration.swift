import Foundation
import VeilCore

/// Settings of a `PeerConnection`. The defaults suit a voice call with the expression stream.
public struct PeerConfiguration: Sendable, Equatable {
    /// STUN server as `stun://host:port`, or nil for host candidates only (same network, tests).
    public var stunServer: String?
    /// TURN server as `turn(s)://user:password@host:port`, or nil.
    public var turnServer: String?
    /// Sends everything through `turnServer`: only relay candidates are gathered and offered, so
    /// the other side learns the TURN server's address, never this machine's. Costs a relay hop.
    public var relayOnly: Bool
    /// How long the RTP jitter buffer waits at first for a missing or reordered packet
    /// (milliseconds). It passes packets on as soon as they are in order; the playout retunes this
    /// wait from its own target delay once the call runs.
    public var jitterBufferMillis: UInt32
    /// The received voice's delay from the jitter buffer to the loudspeaker, in milliseconds, kept
    /// fixed; nil (the default) adapts it to the jitter each connection shows, as libwebrtc's NetEq
    /// does (`AdaptivePlayout`). `veil call --latency`.
    public var playoutDelayMillis: UInt32?
    /// Opus target bit rate in bits per second (speech: 16 000–40 000).
    public var opusBitrate: Int32
    /// Interval between RTCP reports in milliseconds. Reports carry RTT, loss and the sender-time
    /// mapping lip-sync needs; shorter intervals make those known sooner (RTCP stays < 1 kbit/s).
    public var rtcpIntervalMillis: UInt32
    /// The most unsent bytes the expression channel may hold: `send(_:)` drops a frame that would
    /// exceed it instead of queueing it (stale expressions are worthless). Default: four
    /// maximum-size frames.
    public var maximumBufferedExpressionBytes: UInt64
    /// Label of the expression data channel; a channel the remote opens with another label is closed.
    public var expressionChannelLabel: String
    /// Whether the Opus decoder recovers a lost packet from the in-band FEC copy the next packet
    /// carries (the encoder always sends it). Off: packet-loss concealment alone; see
    /// docs/reliability.md ("Loss") for what each costs.
    var decodesInbandFEC = false

    /// A configuration; every parameter has a default fit for a voice call.
    public init(stunServer: String? = nil, turnServer: String? = nil, relayOnly: Bool = false, jitterBufferMillis: UInt32 = 40,
                playoutDelayMillis: UInt32? = nil,
                opusBitrate: Int32 = 32_000, rtcpIntervalMillis: UInt32 = 1_000,
                maximumBufferedExpressionBytes: UInt64 = 4 * 128, expressionChannelLabel: String = "expressions") {
        self.stunServer = stunServer
        self.turnServer = turnServer
        self.relayOnly = relayOnly
        self.jitterBufferMillis = jitterBufferMillis
        self.playoutDelayMillis = playoutDelayMillis
        self.opusBitrate = opusBitrate
        self.rtcpIntervalMillis = rtcpIntervalMillis
        self.maximumBufferedExpressionBytes = maximumBufferedExpressionBytes
        self.expressionChannelLabel = expressionChannelLabel
    }
}

extension PeerConfiguration {
    /// Fills `stunServer` and `turnServer`, where not set already, from servers in WebRTC's
    /// `RTCIceServer` form (what the room server hands out in `joined`): the first `stun:` URL and
    /// the first `turn:`/`turns:` URL with its user name and credential. Malformed URLs are skipped.
    public mutating func adopt(_ servers: [ICEServer]) {
        for server in servers {
            for url in server.urls {
                guard let colon = url.firstIndex(of: ":") else { continue }
                let scheme = url[..<colon].lowercased()
                // host:port, without a `?transport=` query or a `//` some configurations carry.
                var address = String(url[url.index(after: colon)...])
                if address.hasPrefix("//") { address.removeFirst(2) }
                if let query = address.firstIndex(of: "?") { address = String(address[..<query]) }
                guard !address.isEmpty, !address.contains("@"), !address.contains("/"),
                      !address.unicodeScalars.contains(where: { $0.value <= 0x20 }) else { continue }
                switch scheme {
                case "stun" where stunServer == nil:
                    stunServer = "stun://\(address)"
                case "turn" where turnServer == nil, "turns" where turnServer == nil:
                    guard let user = server.username, let credential = server.credential else { continue }
                    turnServer = "\(scheme)://\(Self.userInfoEscaped(user)):\(Self.userInfoEscaped(credential))@\(address)"
                default:
                    continue
                }
            }
        }
    }

    private static func userInfoEscaped(_ text: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
    }
}
