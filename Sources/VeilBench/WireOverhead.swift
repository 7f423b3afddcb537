/// What a message costs on the network beyond its payload, from the headers of the protocols that
/// carry it. A model, not a capture: `veil bench` applies it to measured payload sizes.
///
/// - **WebRTC data channel** (Veil's ExpressionFrames): IP, UDP (8), a DTLS 1.2 record (13-byte
///   header: type, version, epoch, 48-bit sequence, length) encrypted with AES-GCM (8-byte explicit
///   nonce + 16-byte tag, RFC 5288), then SCTP: the common header (12: ports, verification tag,
///   CRC32c) and one DATA chunk (16: type, flags, length, TSN, stream, sequence, PPID) whose data is
///   padded to 4 bytes. An unordered, unreliable message of a few dozen bytes sent every 33 ms is
///   one chunk in one packet (no bundling: nothing else is waiting); larger messages are split
///   into chunks that fit `sctpPacketLimit`. The receiver acknowledges with SACK chunks (16 bytes,
///   no gap blocks) in packets of their own, at least every second DATA packet (RFC 4960 §6.2); in a
///   call where both sides send, SACKs ride along with the other side's DATA instead.
/// - **RTP video** (SRTP, as WebRTC sends media): the payloader's packets (12-byte RTP header +
///   payload descriptor + payload, measured) plus the 10-byte HMAC-SHA1-80 authentication tag of
///   SRTP's default profile, UDP and IP. Header extensions (transport-wide sequence, MID, ~8–20 bytes)
///   and RTCP feedback come on top and are left out.
/// - **Plain UDP** (VMC/OSC): UDP and IP; a datagram larger than the path MTU is split into IP
///   fragments, each with its own IP header.
struct WireOverhead: Equatable {
    /// The IP version of the path.
    enum IPVersion: String, Codable, Equatable {
        case v4 = "IPv4", v6 = "IPv6"
        /// Bytes of the fixed IP header.
        var headerBytes: Int { self == .v4 ? 20 : 40 }
    }

    var ip = IPVersion.v4
    /// The largest IP packet the path carries (Ethernet: 1500).
    var pathMTU = 1500
    /// The largest SCTP packet a WebRTC stack sends: they stay near 1200 bytes so that DTLS, UDP,
    /// IPv6 and a TURN relay still fit any path.
    var sctpPacketLimit = 1200

    static let udpHeader = 8
    static let dtlsRecordHeader = 13
    /// AES-GCM's explicit nonce (8) and authentication tag (16) in every DTLS record.
    static let dtlsAEADExpansion = 24
    static let sctpCommonHeader = 12
    static let sctpDataChunkHeader = 16
    /// A SACK chunk without gap-ack or duplicate-TSN blocks.
    static let sctpSACKChunk = 16
    /// SRTP_AES128_CM_HMAC_SHA1_80's authentication tag.
    static let srtpAuthenticationTag = 10

    /// IP, UDP and DTLS bytes around every SCTP packet.
    var perDTLSPacket: Int { ip.headerBytes + Self.udpHeader + Self.dtlsRecordHeader + Self.dtlsAEADExpansion }

    /// Bytes of DATA a single chunk can carry within `sctpPacketLimit`, a multiple of 4.
    var maximumChunkData: Int {
        max((sctpPacketLimit - Self.sctpCommonHeader - Self.sctpDataChunkHeader) / 4 * 4, 4)
    }

    /// One data-channel message of `payload` bytes: the packets it takes and their bytes on the wire.
    func dataChannelMessage(payload: Int) -> (packets: Int, bytes: Int) {
        let payload = max(payload, 0)
        let chunks = max((payload + maximumChunkData - 1) / maximumChunkData, 1)
        // Every chunk but the last is full (a multiple of 4), so only the last one is padded.
        let padded = (payload + 3) / 4 * 4
        return (chunks, chunks * (perDTLSPacket + Self.sctpCommonHeader + Self.sctpDataChunkHeader) + padded)
    }

    /// One SACK packet from the receiver.
    var sackPacketBytes: Int { perDTLSPacket + Self.sctpCommonHeader + Self.sctpSACKChunk }

    /// SACK packets per DATA packet: one for every second packet.
    static let sacksPerDataPacket = 0.5

    /// One SRTP packet carrying an RTP packet of `rtpBytes` (header included).
    func srtpPacketBytes(rtpBytes: Int) -> Int {
        max(rtpBytes, 0) + Self.srtpAuthenticationTag + Self.udpHeader + ip.headerBytes
    }

    /// One UDP datagram of `payload` bytes: the IP packets (fragments) it takes and their bytes.
    func udpDatagram(payload: Int) -> (packets: Int, bytes: Int) {
        let datagram = max(payload, 0) + Self.udpHeader
        // Every fragment but the last carries a multiple of 8 bytes (IPv6's fragment header adds 8).
        let fragmentHeader = ip == .v4 ? 0 : 8
        let perFragment = max((pathMTU - ip.headerBytes - fragmentHeader) / 8 * 8, 8)
        if datagram + ip.headerBytes <= pathMTU { return (1, datagram + ip.headerBytes) }
        let fragments = (datagram + perFragment - 1) / perFragment
        return (fragments, datagram + fragments * (ip.headerBytes + fragmentHeader))
    }
}
