/// Settings of a `PeerConnection`. The defaults suit a voice call with the expression stream.
public struct PeerConfiguration: Sendable, Equatable {
    /// STUN server as `stun://host:port`, or nil for host candidates only (same network, tests).
    public var stunServer: String?
    /// TURN server as `turn(s)://user:password@host:port`, or nil.
    public var turnServer: String?
    /// Receive jitter-buffer depth in milliseconds: the delay added to absorb network jitter.
    public var jitterBufferMillis: UInt32
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

    /// A configuration; every parameter has a default fit for a voice call.
    public init(stunServer: String? = nil, turnServer: String? = nil, jitterBufferMillis: UInt32 = 100,
                opusBitrate: Int32 = 32_000, rtcpIntervalMillis: UInt32 = 1_000,
                maximumBufferedExpressionBytes: UInt64 = 4 * 128, expressionChannelLabel: String = "expressions") {
        self.stunServer = stunServer
        self.turnServer = turnServer
        self.jitterBufferMillis = jitterBufferMillis
        self.opusBitrate = opusBitrate
        self.rtcpIntervalMillis = rtcpIntervalMillis
        self.maximumBufferedExpressionBytes = maximumBufferedExpressionBytes
        self.expressionChannelLabel = expressionChannelLabel
    }
}
