import Foundation
import VeilCore
import VeilVision
import VeilMedia
import VeilTracking
import VeilConsole

/// `veil bench`'s bandwidth comparison: what sending the same talking clips would cost as Veil's
/// ExpressionFrames, as the landmarks the seed app sent, as VMC and Live Link Face (sent by Veil's
/// own senders and received over loopback), and as real-time video, in bytes per second of payload
/// and on the wire.
///
/// Every clip is tracked once from its first frame (a fresh `ExpressionCapture`, as a new call
/// would) and each frame is serialised each way; then each clip is encoded once per video setting.
/// Payloads are measured; the packet headers on top come from `WireOverhead`.
struct BandwidthBenchmark {
    var framesPerSecond = 30.0
    /// The video settings a call would use: a bitrate target, keyframes at most this far apart.
    var videoBitrate = 500_000
    var keyframeIntervalSeconds = 3.0
    /// Constant-quality settings: libvpx's `cq-level` and x264's CRF (its default, 23).
    var vp8Quality = 20
    var h264Quality = 23
    var overhead = WireOverhead()
    var quiet = false

    /// The four video settings, each encoded from the original clips.
    var encodings: [VideoEncoding] {
        let interval = max(Int((keyframeIntervalSeconds * framesPerSecond).rounded()), 1)
        return [VideoEncoding(codec: .vp8, rateControl: .bitrate(videoBitrate), keyframeInterval: interval),
                VideoEncoding(codec: .h264, rateControl: .bitrate(videoBitrate), keyframeInterval: interval),
                VideoEncoding(codec: .vp8, rateControl: .quality(vp8Quality), keyframeInterval: interval),
                VideoEncoding(codec: .h264, rateControl: .quality(h264Quality), keyframeInterval: interval)]
    }

    /// The sizes of one frame serialised each way; 0 where nothing would be sent.
    struct FrameSizes {
        var veil: Int
        var landmarksJSON: Int
        var landmarkPoints: Int
        /// The datagrams Veil's VMC and Live Link senders sent for the frame (`InteropWire`).
        var interop: InteropWire.Datagrams
    }

    /// Tracks and serialises every clip, then encodes each as video. A video encoder that cannot
    /// run (a missing plugin) leaves the video rows out and says why; anything else throws.
    func run(clips: [Benchmark.Clip], tracker: FaceTracking) throws -> BenchReport.Bandwidth {
        let started = monotonicMilliseconds()
        let frameCount = clips.reduce(0) { $0 + $1.frames.count }
        guard frameCount > 0 else {
            throw VeilError.invalidInput("the bandwidth comparison needs at least one frame")
        }
        let seconds = Double(frameCount) / framesPerSecond
        var sizes: [FrameSizes] = []
        sizes.reserveCapacity(frameCount)
        let progress = ProgressBar(total: frameCount, label: "serialise", quiet: quiet)
        let wire = try InteropWire()
        for clip in clips {
            tracker.reset()
            let capture = ExpressionCapture(tracker: tracker)
            for (index, image) in clip.frames.enumerated() {
                let time = Double(index) / framesPerSecond
                let output = try capture.process(image, captureTimeMicros: UInt64((time * 1e6).rounded()))
                sizes.append(try serialise(output, time: time, imageWidth: image.width, imageHeight: image.height, wire: wire))
                progress.update(sizes.count)
            }
        }
        tracker.reset()
        progress.finish()

        var report = BenchReport.Bandwidth(frames: frameCount, seconds: BenchReport.rounded(seconds), framesPerSecond: framesPerSecond,
                                           overhead: .init(overhead))
        let veil = sizes.map(\.veil)
        report.streams.append(dataChannelStream(
            "Veil ExpressionFrame", isVeil: true, payloads: veil, seconds: seconds,
            detail: "52 blendshapes + head pose + gaze, Veil's codec (docs/wire-format.md), one data-channel message per frame"))
        report.sackBytesPerSecond = BenchReport.rounded(Double(veil.count) * WireOverhead.sacksPerDataPacket
                                                        * Double(overhead.sackPacketBytes) / seconds)
        report.streams.append(udpStream(
            "VMC over OSC", datagrams: sizes.map(\.interop.vmc), seconds: seconds,
            detail: "veil track/call --send vmc://: per tracked frame /VMC/Ext/OK, /VMC/Ext/T, /VMC/Ext/Root/Pos, /VMC/Ext/Bone/Pos for "
                    + "Head and both eyes, 52 × /VMC/Ext/Blend/Val and /VMC/Ext/Blend/Apply, in OSC bundles of at most 1 400 B"))
        report.streams.append(udpStream(
            "Live Link Face", datagrams: sizes.map(\.interop.liveLink), seconds: seconds,
            detail: "veil track/call --send livelink://: per tracked frame one packet of 61 big-endian floats "
                    + "(52 blendshapes, head and eyes), with device id, subject name and frame time"))
        let landmarkFrames = sizes.filter { $0.landmarksJSON > 0 }
        report.landmarkPointsPerFrame = BenchReport.rounded(
            landmarkFrames.isEmpty ? 0 : Double(landmarkFrames.reduce(0) { $0 + $1.landmarkPoints }) / Double(landmarkFrames.count))
        report.streams.append(dataChannelStream(
            "Landmarks as JSON (the seed app)", isVeil: false, payloads: landmarkFrames.map(\.landmarksJSON), seconds: seconds,
            detail: "Vision-named regions, \(String(format: "%.0f", report.landmarkPointsPerFrame)) points of [x, y] normalised to the face box, "
                    + "JSONEncoder, one data-channel message per tracked frame"))

        let total = frameCount * encodings.count
        let videoProgress = ProgressBar(total: total, label: "encode video", quiet: quiet)
        var encoded = 0
        do {
            for encoding in encodings {
                var results: [EncodedVideo] = []
                for clip in clips {
                    guard let first = clip.frames.first else { continue }
                    let meter = try VideoBitrateMeter(width: first.width, height: first.height,
                                                      framesPerSecond: Int(framesPerSecond.rounded()), encoding: encoding)
                    for frame in clip.frames {
                        try meter.write(frame)
                        encoded += 1
                        videoProgress.update(encoded)
                    }
                    results.append(try meter.finish())
                }
                report.streams.append(videoStream(encoding, results, seconds: seconds))
            }
        } catch let error as MediaError where error.kind == .gstreamerUnavailable {
            report.videoSkipped = error.message
            Terminal.error("bench: video not measured: \(error.message)")
        }
        videoProgress.finish()
        report.wallSeconds = BenchReport.rounded((monotonicMilliseconds() - started) / 1000)
        return report
    }

    /// One frame's ExpressionFrame, seed-app landmark message, and VMC and Live Link datagrams.
    private func serialise(_ output: ExpressionCapture.Output, time: Double, imageWidth: Int, imageHeight: Int,
                           wire: InteropWire) throws -> FrameSizes {
        let veil = output.frame.encoded().count
        let interop = try wire.send(output.frame)
        guard output.frame.state == .tracked, let landmarks = output.tracking.landmarks else {
            return FrameSizes(veil: veil, landmarksJSON: 0, landmarkPoints: 0, interop: interop)
        }
        let message = SeedLandmarksMessage(landmarks, imageWidth: imageWidth, imageHeight: imageHeight, timeSeconds: time)
        let json = try JSONEncoder().encode(message)
        return FrameSizes(veil: veil, landmarksJSON: json.count, landmarkPoints: message.pointCount, interop: interop)
    }

    private func dataChannelStream(_ name: String, isVeil: Bool, payloads: [Int], seconds: Double, detail: String) -> BenchReport.Bandwidth.Stream {
        let wire = payloads.map { overhead.dataChannelMessage(payload: $0) }
        return BenchReport.Bandwidth.Stream(
            name: name, detail: detail, isVeil: isVeil, messages: payloads.count, seconds: seconds, payloads: payloads,
            transport: "WebRTC data channel: SCTP/DTLS/UDP/\(overhead.ip.rawValue)",
            packets: wire.reduce(0) { $0 + $1.packets }, wireBytes: wire.reduce(0) { $0 + $1.bytes })
    }

    /// A stream of UDP datagrams, one frame's per element (frames that sent nothing left out): a
    /// message is a frame, its payload the sum of its datagrams.
    private func udpStream(_ name: String, datagrams: [[Int]], seconds: Double, detail: String) -> BenchReport.Bandwidth.Stream {
        let frames = datagrams.filter { !$0.isEmpty }
        let wire = frames.joined().map { overhead.udpDatagram(payload: $0) }
        return BenchReport.Bandwidth.Stream(
            name: name, detail: detail, isVeil: false, messages: frames.count, seconds: seconds,
            payloads: frames.map { $0.reduce(0, +) }, transport: "UDP/\(overhead.ip.rawValue), IP-fragmented above \(overhead.pathMTU) B",
            packets: wire.reduce(0) { $0 + $1.packets }, wireBytes: wire.reduce(0) { $0 + $1.bytes })
    }

    private func videoStream(_ encoding: VideoEncoding, _ results: [EncodedVideo], seconds: Double) -> BenchReport.Bandwidth.Stream {
        let frames = results.flatMap(\.frameBytes)
        let packets = results.flatMap(\.rtpPacketBytes)
        let keyframes = results.reduce(0) { $0 + $1.keyframes }
        let setting: String
        switch encoding.rateControl {
        case .bitrate: setting = "real-time, \(String(format: "%g", keyframeIntervalSeconds)) s keyframe interval"
        case .quality: setting = "constant quality, real-time, \(String(format: "%g", keyframeIntervalSeconds)) s keyframe interval"
        }
        let encoder = encoding.codec == .vp8 ? "vp8enc" : "x264enc"
        return BenchReport.Bandwidth.Stream(
            name: encoding.description, detail: "\(encoder) from the original 640×480 RGB clips, \(setting); \(keyframes) keyframes, "
                + "\(packets.count) RTP packets ≤ 1200 B", isVeil: false, messages: frames.count, seconds: seconds, payloads: frames,
            transport: "RTP/SRTP/UDP/\(overhead.ip.rawValue)",
            packets: packets.count, wireBytes: packets.reduce(0) { $0 + overhead.srtpPacketBytes(rtpBytes: $1) })
    }
}

/// The message Veil's seed app sent per frame: Apple Vision's landmarks as JSON. Regions keep
/// Vision's names (`VNFaceLandmarks2D`), points are `[x, y]` normalised to the face's bounding box
/// (as `VNFaceLandmarkRegion2D.normalizedPoints`), the box normalised to the image (as
/// `VNFaceObservation.boundingBox`), all as Doubles (CGFloat on Apple platforms).
struct SeedLandmarksMessage: Encodable {
    var timestamp: Double
    /// x, y, width, height.
    var boundingBox: [Double]
    var confidence: Double
    var landmarks: [String: [[Double]]]

    init(_ face: FaceLandmarks, imageWidth: Int, imageHeight: Int, timeSeconds: Double) {
        let box = face.boundingBox
        let width = Double(max(imageWidth, 1)), height = Double(max(imageHeight, 1))
        timestamp = timeSeconds
        boundingBox = [Double(box.x) / width, Double(box.y) / height, Double(box.width) / width, Double(box.height) / height]
        confidence = Double(face.confidence)
        let boxWidth = Double(box.width), boxHeight = Double(box.height)
        var regions: [String: [[Double]]] = [:]
        for region in FaceRegion.allCases {
            let points = face[region]
            guard !points.isEmpty else { continue }
            regions[region.rawValue] = points.map { point in
                [boxWidth > 0 ? (Double(point.x) - Double(box.x)) / boxWidth : 0,
                 boxHeight > 0 ? (Double(point.y) - Double(box.y)) / boxHeight : 0]
            }
        }
        landmarks = regions
    }

    /// Points in all regions.
    var pointCount: Int { landmarks.values.reduce(0) { $0 + $1.count } }
}

extension BenchReport {
    /// What each way of sending the clips' faces costs: measured payloads, modelled headers.
    struct Bandwidth: Codable {
        /// One way of sending, measured over the clips.
        struct Stream: Codable {
            var name: String
            var detail: String
            var isVeil: Bool
            /// Messages (video: encoded frames) per second.
            var messagesPerSecond: Double
            /// Payload bytes per message.
            var payloadBytes: Stats
            var payloadBytesPerSecond: Double
            /// How it travels, for the header model.
            var transport: String
            var packetsPerSecond: Double
            /// Payload plus the headers of `transport` (`WireOverhead`).
            var wireBytesPerSecond: Double

            init(name: String, detail: String, isVeil: Bool, messages: Int, seconds: Double, payloads: [Int],
                 transport: String, packets: Int, wireBytes: Int) {
                self.name = name
                self.detail = detail
                self.isVeil = isVeil
                self.transport = transport
                let perSecond = { (value: Int) in seconds > 0 ? BenchReport.rounded(Double(value) / seconds) : 0 }
                messagesPerSecond = perSecond(messages)
                payloadBytes = Stats(payloads.map(Double.init))
                payloadBytesPerSecond = perSecond(payloads.reduce(0, +))
                packetsPerSecond = perSecond(packets)
                wireBytesPerSecond = perSecond(wireBytes)
            }
        }

        /// A figure from elsewhere, for context: quoted, not measured here.
        struct Quoted: Codable {
            var name: String
            var lowBitsPerSecond: Double
            var highBitsPerSecond: Double
            var source: String
        }

        /// The header model's constants, as applied.
        struct Overhead: Codable {
            var ip: String
            var udp = WireOverhead.udpHeader
            var dtlsRecord = WireOverhead.dtlsRecordHeader + WireOverhead.dtlsAEADExpansion
            var sctpCommonHeader = WireOverhead.sctpCommonHeader
            var sctpDataChunkHeader = WireOverhead.sctpDataChunkHeader
            var sctpPacketLimit: Int
            var sackPacket: Int
            var srtpAuthenticationTag = WireOverhead.srtpAuthenticationTag
            var pathMTU: Int

            init(_ model: WireOverhead) {
                ip = model.ip.rawValue
                sctpPacketLimit = model.sctpPacketLimit
                sackPacket = model.sackPacketBytes
                pathMTU = model.pathMTU
            }
        }

        var frames: Int
        var seconds: Double
        var framesPerSecond: Double
        var overhead: Overhead
        /// First Veil's, then the others.
        var streams: [Stream] = []
        /// The receiver's SACK packets for Veil's messages, in the other direction (one per two
        /// messages), when it sends nothing they could ride on.
        var sackBytesPerSecond = 0.0
        var landmarkPointsPerFrame = 0.0
        var quoted: [Quoted] = [
            Quoted(name: "Zoom 1:1 video call", lowBitsPerSecond: 600_000, highBitsPerSecond: 1_200_000, source: "Zoom's bandwidth requirements"),
            Quoted(name: "Opus speech", lowBitsPerSecond: 16_000, highBitsPerSecond: 40_000, source: "Opus recommended speech bitrates"),
        ]
        /// Why the video rows are missing, when they are.
        var videoSkipped: String?
        /// Wall time of the whole comparison: tracking, serialising, encoding.
        var wallSeconds = 0.0

        /// Veil's stream (the first one marked `isVeil`).
        var veil: Stream? { streams.first(where: \.isVeil) }
    }
}

extension BenchReport.Bandwidth {
    /// The bandwidth section of the Markdown report; `call` adds the real call's figures.
    func markdown(call: BenchReport.Call?) -> [String] {
        func bytes(_ value: Double) -> String { Self.grouped(value) }
        func kbit(_ value: Double) -> String { value * 8 / 1000 >= 100 ? String(format: "%.0f", value * 8 / 1000) : String(format: "%.1f", value * 8 / 1000) }
        func times(_ value: Double, _ base: Double?) -> String {
            guard let base, base > 0 else { return "-" }
            let ratio = value / base
            return ratio >= 100 ? String(format: "%.0f×", ratio) : String(format: "%.1f×", ratio)
        }
        let veilPayload = veil?.payloadBytesPerSecond, veilWire = veil?.wireBytesPerSecond
        var lines: [String] = []
        lines.append("## Bandwidth: the same clips sent every way")
        lines.append("")
        lines.append("\(frames) frames (\(String(format: "%g", seconds)) s at \(String(format: "%g", framesPerSecond)) fps), tracked once and "
                     + "serialised each way; the video rows encode the original frames. **Payload** is measured: encoder output, "
                     + "serialised bytes. **On the wire** adds the headers of the transport each would use (model below). "
                     + "× Veil divides by Veil's figure in the same column.")
        lines.append("")
        lines.append("| stream | payload B/s | kbit/s | × Veil | on the wire B/s | kbit/s | × Veil | B/message p50 (max) |")
        lines.append("|:--|--:|--:|--:|--:|--:|--:|--:|")
        for s in streams {
            let name = s.isVeil ? "**\(s.name)**" : s.name
            lines.append("| \(name) | \(bytes(s.payloadBytesPerSecond)) | \(kbit(s.payloadBytesPerSecond)) | \(times(s.payloadBytesPerSecond, veilPayload)) | "
                         + "\(bytes(s.wireBytesPerSecond)) | \(kbit(s.wireBytesPerSecond)) | \(times(s.wireBytesPerSecond, veilWire)) | "
                         + "\(bytes(s.payloadBytes.p50)) (\(bytes(s.payloadBytes.max))) |")
        }
        if let call, !call.directions.isEmpty {
            let audio = call.directions.map(\.audioBytesPerSecond).reduce(0, +) / Double(call.directions.count)
            // 20 ms Opus frames: 50 packets a second, each with RTP, SRTP, UDP and IP headers.
            let wire = audio + 50 * Double(12 + WireOverhead.srtpAuthenticationTag + WireOverhead.udpHeader + (overhead.ip == "IPv6" ? 40 : 20))
            lines.append("| Opus voice, measured in the call below | \(bytes(audio)) | \(kbit(audio)) | \(times(audio, veilPayload)) | "
                         + "\(bytes(wire)) | \(kbit(wire)) | \(times(wire, veilWire)) | - |")
        }
        for q in quoted {
            let low = q.lowBitsPerSecond / 8, high = q.highBitsPerSecond / 8
            lines.append("| *\(q.name) (quoted, not measured)* | \(bytes(low))–\(bytes(high)) | \(kbit(low))–\(kbit(high)) | "
                         + "\(times(low, veilPayload))–\(times(high, veilPayload)) | | | | |")
        }
        lines.append("")
        for s in streams {
            lines.append("- **\(s.name)**: \(s.detail). \(String(format: "%.1f", s.messagesPerSecond)) messages/s, "
                         + "\(String(format: "%.1f", s.packetsPerSecond)) packets/s over \(s.transport).")
        }
        if let json = streams.first(where: { $0.name.hasPrefix("Landmarks") }), landmarkPointsPerFrame > 0 {
            let perPoint = json.payloadBytes.p50 / landmarkPointsPerFrame
            lines.append("- Veil's regions hold \(String(format: "%.0f", landmarkPointsPerFrame)) points; Apple Vision's hold 65 or 76. "
                         + "At the same \(String(format: "%.0f", perPoint)) B per point, 76 points would take "
                         + "\(bytes(perPoint * 76)) B per message, \(bytes(perPoint * 76 * json.messagesPerSecond)) B/s.")
        }
        if let videoSkipped { lines.append("- Video not measured: \(videoSkipped)") }
        lines.append("- Quoted figures are from DESIGN.md's survey (vendor documentation), for scale only.")
        lines.append("")
        let o = overhead
        let ipBytes = o.ip == "IPv6" ? 40 : 20
        let perMessage = ipBytes + o.udp + o.dtlsRecord + o.sctpCommonHeader + o.sctpDataChunkHeader
        lines.append("**Header model** (per packet, \(o.ip)): IP \(ipBytes) + UDP \(o.udp) B. A data-channel message adds a DTLS 1.2 record "
                     + "(13-byte header + AES-GCM 8-byte explicit nonce and 16-byte tag = \(o.dtlsRecord) B), the SCTP common header "
                     + "(\(o.sctpCommonHeader) B) and one DATA chunk header (\(o.sctpDataChunkHeader) B), the data padded to 4 bytes: "
                     + "\(perMessage) B + padding per message, split into chunks above \(o.sctpPacketLimit)-byte SCTP packets. "
                     + "The receiver answers with a SACK packet (\(o.sackPacket) B) for every second message: "
                     + "\(bytes(sackBytesPerSecond)) B/s back towards Veil's sender when it has nothing to send "
                     + "(in a call both sides send, and SACKs ride in the other side's packets). "
                     + "Video: the payloader's RTP packets (measured, 12-byte header + payload descriptor) + SRTP's "
                     + "\(o.srtpAuthenticationTag)-byte tag + UDP + IP; header extensions and RTCP are left out. VMC and Live Link: "
                     + "the datagrams Veil's senders sent, as received over loopback, each with its UDP and IP headers "
                     + "(IP-fragmented above the \(o.pathMTU)-byte MTU; Veil keeps VMC datagrams to 1 400 B).")
        if let call, !call.directions.isEmpty, let veil {
            let measured = call.directions.map { "\($0.from) → \($0.to) \(bytes($0.expressionBytesPerSecond)) B/s" }.joined(separator: ", ")
            lines.append("")
            lines.append("Cross-check: the real call below counted \(measured) of ExpressionFrame payload (tracked live, not the same "
                         + "frames) against \(bytes(veil.payloadBytesPerSecond)) B/s here. webrtcbin 1.22 reports no SCTP or "
                         + "transport byte counts, so the headers stay a model.")
        }
        lines.append("")
        lines.append("Took \(String(format: "%.1f", wallSeconds)) s (tracking and serialising, then each clip encoded once per video setting). "
                     + "The synthetic clips have a still background and no camera noise, so the constant-quality video rows are "
                     + "lower than a real camera would give; the bitrate rows are what a call's encoder is allowed to spend.")
        return lines
    }

    /// A whole number with spaces between thousands ("12 345").
    static func grouped(_ value: Double) -> String {
        let digits = String(Int(value.rounded()))
        var out = ""
        for (index, character) in digits.reversed().enumerated() {
            if index > 0, index % 3 == 0, character != "-" { out.append(" ") }
            out.append(character)
        }
        return String(out.reversed())
    }
}
