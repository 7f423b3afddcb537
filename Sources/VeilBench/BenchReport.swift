import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Summary statistics of a set of timings (or sizes): percentiles interpolate linearly between
/// the sorted values, as numpy's default does.
struct Stats: Codable {
    var count: Int
    var mean: Double
    var p50: Double
    var p95: Double
    var min: Double
    var max: Double

    init(_ values: [Double]) {
        let sorted = values.sorted()
        count = sorted.count
        guard let first = sorted.first, let last = sorted.last else {
            mean = 0; p50 = 0; p95 = 0; min = 0; max = 0
            return
        }
        func percentile(_ p: Double) -> Double { Stats.percentile(p, ofSorted: sorted) }
        mean = BenchReport.rounded(sorted.reduce(0, +) / Double(sorted.count))
        p50 = BenchReport.rounded(percentile(50))
        p95 = BenchReport.rounded(percentile(95))
        min = BenchReport.rounded(first)
        max = BenchReport.rounded(last)
    }

    /// The `p`th percentile (0…100) of ascending `sorted` values, interpolated; 0 when empty.
    static func percentile(_ p: Double, ofSorted sorted: [Double]) -> Double {
        guard !sorted.isEmpty else { return 0 }
        let position = Swift.min(Swift.max(p, 0), 100) / 100 * Double(sorted.count - 1)
        let lower = Int(position.rounded(.down)), upper = Swift.min(lower + 1, sorted.count - 1)
        return sorted[lower] + (sorted[upper] - sorted[lower]) * (position - Double(lower))
    }
}

/// The results of one `veil bench` run: what `latest.json` holds and `latest.md` shows.
public struct BenchReport: Codable {
    var date = ISO8601DateFormatter().string(from: Date())
    var machine: Machine
    var framesPerClip: Int
    var warmUpFrames: Int
    var quick: Bool
    var width: Int
    var height: Int
    var photos: [String]
    var scriptSeconds: Double
    var scriptFramesPerSecond: Double
    var clips: [ClipResult] = []
    var tracking = Tracking([])
    /// Whether the default tracker (`tracking`) is the attention mesh (nil in runs from before it was).
    var defaultAttentionMesh: Bool?
    /// The pipeline that is not the default at the bench's size, and both pipelines at camera sizes.
    var trackingBySize: [SizedTracking]?
    var rendering: [Rendering] = []
    /// The default gradient background alone, without the avatar or the read-back.
    var backgroundMilliseconds = Stats([])
    var wire = Wire([], framesPerSecond: 30)
    var videoRead: VideoRead?
    /// The bandwidth comparison (`BandwidthBenchmark`); nil with --no-bandwidth.
    var bandwidth: Bandwidth?
    /// The local two-person call; nil with --no-call or when it could not run (`callSkipped` says why).
    var call: Call?
    var callSkipped: String?
    /// dlib and MediaPipe on the same frames and stills; nil with --no-peers.
    var peers: PeerTracking?
    /// `veil serve` under N simulated clients; nil with --no-server-load.
    var serverLoad: ServerLoad?
    /// Several nodes behind haproxy sharing rooms through Redis under N clients; nil with --no-cluster-load.
    var clusterLoad: ClusterLoad?
    /// Mouth-to-ear under four network conditions, Veil and Chromium side by side.
    var latency: Latency?

    /// Frame in → wire bytes out, milliseconds per frame over every measured frame.
    struct Tracking: Codable {
        var frames: Int
        var trackedFrames: Int
        var detectorRuns: Int
        var total: Stats
        var tracker: Stats
        var detection: Stats
        /// Detection time on the frames where the detector ran.
        var detectionPerRun: Stats
        var landmarks: Stats
        var iris: Stats
        var trackerOther: Stats
        /// Of landmarks and iris: the crops, and the attention mesh's custom operations (nil in older runs).
        var crop: Stats?
        var customOperations: Stats?
        var estimator: Stats
        var encode: Stats

        init(_ samples: [TrackingSample]) {
            frames = samples.count
            trackedFrames = samples.filter(\.tracked).count
            detectorRuns = samples.filter(\.ranDetection).count
            total = Stats(samples.map(\.total))
            tracker = Stats(samples.map(\.tracker))
            detection = Stats(samples.map(\.detection))
            detectionPerRun = Stats(samples.filter(\.ranDetection).map(\.detection))
            landmarks = Stats(samples.map(\.landmarks))
            iris = Stats(samples.map(\.iris))
            trackerOther = Stats(samples.map(\.trackerOther))
            crop = Stats(samples.map(\.crop))
            customOperations = Stats(samples.map(\.customOperations))
            estimator = Stats(samples.map(\.estimator))
            encode = Stats(samples.map(\.encode))
        }
    }

    /// One tracker on the clips letterboxed into one frame size.
    struct SizedTracking: Codable {
        var width: Int, height: Int
        /// The attention mesh (one model, 478 points) or the 468-point mesh and the iris model.
        var attentionMesh: Bool
        var tracking: Tracking
    }

    /// One clip's tracking.
    struct ClipResult: Codable {
        var photo: String
        var frames: Int
        var trackedFrames: Int
        var detectorRuns: Int
        var totalMilliseconds: Stats

        init(_ samples: [TrackingSample], photo: String) {
            self.photo = photo
            frames = samples.count
            trackedFrames = samples.filter(\.tracked).count
            detectorRuns = samples.filter(\.ranDetection).count
            totalMilliseconds = Stats(samples.map(\.total))
        }
    }

    /// One avatar style: `render` plus `CairoCanvas.copy(into:)`, milliseconds per frame.
    struct Rendering: Codable {
        var style: String
        var frames: Int
        var milliseconds: Stats
        var copyMilliseconds: Stats
    }

    /// Bytes on the wire per `ExpressionFrame`, against sending landmarks raw.
    struct Wire: Codable {
        var frames: Int
        var lostFrames: Int
        var bytes: Stats
        var bytesPerSecond: Double
        var framesPerSecond: Double
        /// 468 MediaPipe points × (x, y, z) × float32.
        var raw468x3Float32Bytes = 468 * 3 * 4
        var ratio468x3: Double
        /// 68 dlib points × (x, y) × float32.
        var raw68x2Float32Bytes = 68 * 2 * 4
        var ratio68x2: Double
        var encodeMicroseconds: Stats
        var decodeMicroseconds: Stats

        init(_ samples: [TrackingSample], framesPerSecond: Double) {
            frames = samples.count
            lostFrames = samples.filter { !$0.tracked }.count
            bytes = Stats(samples.map { Double($0.bytes) })
            self.framesPerSecond = framesPerSecond
            bytesPerSecond = BenchReport.rounded(bytes.mean * framesPerSecond)
            ratio468x3 = bytes.mean > 0 ? BenchReport.rounded(Double(raw468x3Float32Bytes) / bytes.mean) : 0
            ratio68x2 = bytes.mean > 0 ? BenchReport.rounded(Double(raw68x2Float32Bytes) / bytes.mean) : 0
            encodeMicroseconds = Stats(samples.map { $0.encode * 1000 })
            decodeMicroseconds = Stats(samples.map { $0.decode * 1000 })
        }
    }

    /// A real two-person call in this process (`CallBenchmark`): join time, capture → remote
    /// render latency and its stages, bytes on the wire, lip-sync. Times in milliseconds.
    struct Call: Codable {
        /// One join of bob into the room where alice waits, from `CallSession.start()`.
        struct Join: Codable {
            /// The server's `joined` (WebSocket, token check, room membership).
            var joinedMilliseconds: Double
            /// The peer connection to alice `connected` (offer/answer, ICE, DTLS).
            var connectedMilliseconds: Double
            /// Alice's first `ExpressionFrame` received (SCTP association and data channel open).
            var firstExpressionMilliseconds: Double
            /// Alice's voice: the first decoded audio buffer reaching the (clock-synced) sink.
            var firstVoiceMilliseconds: Double?
        }

        /// One direction of the call.
        struct Direction: Codable {
            var from: String
            var to: String
            /// Seconds of statistics the rates are taken over.
            var statisticsSeconds = 0.0
            /// Expression payload bytes per second (data-channel message bodies).
            var expressionBytesPerSecond = 0.0
            var expressionFramesPerSecond = 0.0
            /// Audio bytes per second as webrtcbin counts them for the outbound RTP stream.
            var audioBytesPerSecond = 0.0
            /// Frames the sender dropped (channel congested or closed) during the window.
            var framesDropped = 0
            /// Frames the receiver's jitter buffer dropped as too late during the window.
            var lateDropped = 0
            /// The receiver's expression buffer: the adaptive delay it would apply on its own
            /// (without a voice to follow) at the end of the window.
            var bufferTargetDelayMilliseconds: Double?
            var roundTripMilliseconds: Double?
            /// Capture → remote render of this direction's frames.
            var endToEnd = Stats([])
        }

        var voice: String
        var framesPerSecond: Double
        var warmUpSeconds: Double
        var measuredSeconds: Double
        /// Alice joining the empty room: start → `joined`.
        var aliceJoinedMilliseconds: Double
        var joinSamples: [Join]
        var joined: Stats
        var connected: Stats
        var firstExpression: Stats
        var firstVoice: Stats
        /// Frames captured in the measured window (both directions), those that arrived, and those
        /// that were the dominant frame of at least one picture drawn.
        var framesCaptured = 0
        var framesArrived = 0
        var framesShown = 0
        /// Capture → the first picture in which the frame weighs most is drawn and copied out.
        var endToEnd = Stats([])
        /// `ExpressionCapture.process`: face tracking and the expression estimator.
        var tracking = Stats([])
        /// `ExpressionFrame.encoded()`.
        var encoding = Stats([])
        /// `CallSession.send` → arrival on the other side (loop hop, SCTP/DTLS/UDP within this machine).
        var network = Stats([])
        /// Arrival → the render tick that first draws a picture in which the frame weighs most.
        var jitterBuffer = Stats([])
        /// That tick: playout, compositor (remote avatar + own inset) drawn with Cairo, copied out.
        var render = Stats([])
        /// Every render tick in the window, whatever it showed.
        var renderTick = Stats([])
        /// Voice capture → playout: when a decoded buffer reached the (clock-synced) audio sink
        /// minus when the sender captured it.
        var voiceMouthToEar = Stats([])
        /// When a buffer reached the sink minus the playout time `ReceivedAudio` announced for it:
        /// near 0 when the timing the avatar follows is the one heard.
        var voicePlayedAfterAnnounced = Stats([])
        /// Audio lead (ms) of every `.frame`/`.interpolated` picture, as `veil call` measures it.
        var lipSyncAudioLead = Stats([])
        /// Its 5th percentile.
        var lipSyncAudioLeadP5 = 0.0
        /// Share (0…1) of those inside +45/−125 ms.
        var lipSyncInside = 0.0
        /// How the pictures in the window were made (`Playout.Source`), counted.
        var playoutSources: [String: Int] = [:]
        var directions: [Direction] = []
        var candidatePair: String?
        /// Wall time of the whole call part, speech synthesis and joins included.
        var wallSeconds = 0.0

        init(voice: String, framesPerSecond: Double, warmUpSeconds: Double, measuredSeconds: Double,
             aliceJoinedMilliseconds: Double, joinSamples: [Join]) {
            self.voice = voice
            self.framesPerSecond = framesPerSecond
            self.warmUpSeconds = warmUpSeconds
            self.measuredSeconds = measuredSeconds
            self.aliceJoinedMilliseconds = aliceJoinedMilliseconds
            self.joinSamples = joinSamples
            joined = Stats(joinSamples.map(\.joinedMilliseconds))
            connected = Stats(joinSamples.map(\.connectedMilliseconds))
            firstExpression = Stats(joinSamples.map(\.firstExpressionMilliseconds))
            firstVoice = Stats(joinSamples.compactMap(\.firstVoiceMilliseconds))
        }
    }

    /// Reading the synthetic clip back from an H.264 MP4.
    struct VideoRead: Codable {
        var frames: Int
        var fileBytes: Int
        var openToFirstFrameMilliseconds: Double
        /// Between successive frames after the first.
        var perFrameMilliseconds: Stats
    }

    /// Four decimals: 0.1 µs for milliseconds, plenty for everything else.
    static func rounded(_ value: Double) -> Double { (value * 10_000).rounded() / 10_000 }

    /// The report as pretty-printed JSON with sorted keys (stable diffs between runs).
    public func json() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        return try encoder.encode(self) + Data("\n".utf8)
    }

    // MARK: Markdown

    /// The report as Markdown: what `veil bench` prints and writes to latest.md.
    public var markdown: String {
        func ms(_ v: Double) -> String { String(format: "%.2f", v) }
        func row(_ name: String, _ s: Stats, bold: Bool = false) -> String {
            bold ? "| **\(name)** | **\(ms(s.p50))** | \(ms(s.p95)) | \(ms(s.mean)) |"
                 : "| \(name) | \(ms(s.p50)) | \(ms(s.p95)) | \(ms(s.mean)) |"
        }
        func percent(_ part: Int, _ whole: Int) -> String {
            String(format: "%.1f %%", whole > 0 ? 100 * Double(part) / Double(whole) : 0)
        }
        let t = tracking
        var lines: [String] = []
        lines.append("# veil bench")
        lines.append("")
        var about = "\(date) · "
        about += machine.gitCommit.map { "commit \($0.prefix(12))\(machine.gitDirty == true ? " (uncommitted changes)" : "")" } ?? "commit unknown"
        about += " · \(machine.buildConfiguration) build · \(machine.cpuModel ?? "unknown CPU"), \(machine.logicalCores) logical cores"
        lines.append(about + "  ")
        if let uname = machine.uname { lines.append("`\(uname)`  ") }
        if let swift = machine.swiftVersion { lines.append("\(swift)  ") }
        lines.append("Tracking and drawing on one thread, " + (machine.pinnedToCPU0 ? "pinned to CPU 0" : "not pinned (\(machine.pinning))")
                     + "; load average \(machine.loadAverageAtStart ?? "?") at the start, \(machine.loadAverageAtEnd ?? "?") at the end.")
        if let load = machine.loadAverageAtStart?.split(separator: " ").first.flatMap({ Double($0) }), load >= 0.5 {
            lines.append("Other work was running (1-minute load \(String(format: "%.2f", load)) before the start), so p95 and max "
                         + "are noisier than the medians.")
        }
        lines.append("")
        let names = photos.joined(separator: " and ")
        lines.append("Input: the built-in \(String(format: "%g", scriptSeconds)) s talking clip (`ExpressionScript.talking`, "
                     + "\(String(format: "%g", scriptFramesPerSecond)) fps) synthesised in memory from \(names), letterboxed into "
                     + "\(width)×\(height); \(framesPerClip) frames per clip\(quick ? " (--quick)" : ""), \(t.frames) in all. Each clip "
                     + "is tracked from its first frame with a fresh capture, after a \(warmUpFrames)-frame warm-up that is not counted.")
        lines.append("")
        let renderHeadline = rendering.map { "\($0.style) \(ms($0.milliseconds.p50)) ms" }.joined(separator: " · ")
        lines.append("**Medians:** tracking \(ms(t.total.p50)) ms/frame (aim ≤ 5 ms), \(percent(t.trackedFrames, t.frames)) of frames "
                     + "tracked · drawing \(renderHeadline) (aim ≤ 2 ms) · \(String(format: "%g", wire.bytes.p50)) B/frame on the wire"
                     + (call.map { " · call: capture → remote render \(String(format: "%.0f", $0.endToEnd.p50)) ms, join "
                                   + "\(String(format: "%.0f", $0.firstExpression.p50)) ms to the first expression" } ?? ""))
        lines.append("")
        lines.append("## Tracking: 640×480 frame → wire bytes, one core")
        lines.append("")
        lines.append("| stage | p50 ms | p95 ms | mean ms |")
        lines.append("|:--|--:|--:|--:|")
        lines.append(row("frame → wire bytes", t.total, bold: true))
        lines.append(row("tracker", t.tracker))
        lines.append(row("├ face detection¹", t.detection))
        if defaultAttentionMesh == true {
            lines.append(row("├ attention mesh (crop, model, custom operations)", t.landmarks))
            if let crop = t.crop { lines.append(row("│ ├ of which the crop", crop)) }
            if let custom = t.customOperations { lines.append(row("│ └ of which custom operations", custom)) }
        } else {
            lines.append(row("├ face mesh (crop + model)", t.landmarks))
            lines.append(row("├ iris, both eyes (crops + model)", t.iris))
        }
        lines.append(row("└ rest (mesh → landmarks, next region)", t.trackerOther))
        lines.append(row("expression estimator", t.estimator))
        lines.append(row("wire encoding", t.encode))
        lines.append("")
        lines.append("¹ The detector runs only when there is no face to follow: on \(t.detectorRuns) of \(t.frames) frames, "
                     + "\(ms(t.detectionPerRun.p50)) ms median per run (max \(ms(t.detectionPerRun.max)) ms).")
        lines.append("")
        lines.append("| clip | frames | tracked | detector runs | p50 ms | p95 ms | max ms |")
        lines.append("|:--|--:|--:|--:|--:|--:|--:|")
        for clip in clips {
            lines.append("| \(clip.photo) | \(clip.frames) | \(clip.trackedFrames) (\(percent(clip.trackedFrames, clip.frames))) | "
                         + "\(clip.detectorRuns) | \(ms(clip.totalMilliseconds.p50)) | \(ms(clip.totalMilliseconds.p95)) | "
                         + "\(ms(clip.totalMilliseconds.max)) |")
        }
        lines.append("| all | \(t.frames) | \(t.trackedFrames) (\(percent(t.trackedFrames, t.frames))) | \(t.detectorRuns) | "
                     + "\(ms(t.total.p50)) | \(ms(t.total.p95)) | \(ms(t.total.max)) |")
        lines.append("")
        if let sized = trackingBySize, !sized.isEmpty {
            lines.append(contentsOf: trackingBySizeMarkdown(sized))
            lines.append("")
        }
        if let peers {
            lines.append(contentsOf: peers.markdown(width: width, height: height))
            lines.append("")
        }
        lines.append("## Drawing: expression → \(width)×\(height) RGB, default gradient background, one core")
        lines.append("")
        lines.append("| style | p50 ms | p95 ms | mean ms | of which `copy(into:)` p50 ms |")
        lines.append("|:--|--:|--:|--:|--:|")
        for r in rendering {
            lines.append("| \(r.style) | **\(ms(r.milliseconds.p50))** | \(ms(r.milliseconds.p95)) | \(ms(r.milliseconds.mean)) | "
                         + "\(ms(r.copyMilliseconds.p50)) |")
        }
        lines.append("")
        lines.append("Drawn from the \(t.frames) expressions decoded from the wire bytes (the last tracked one where a frame was lost); "
                     + "the gradient background alone takes \(ms(backgroundMilliseconds.p50)) ms p50 of each.")
        lines.append("")
        lines.append("## Wire")
        lines.append("")
        let w = wire
        lines.append("| | |")
        lines.append("|:--|--:|")
        lines.append("| bytes per `ExpressionFrame`: p50 / mean / p95 / max | \(String(format: "%g / %.1f / %g / %g", w.bytes.p50, w.bytes.mean, w.bytes.p95, w.bytes.max)) |")
        lines.append("| at \(String(format: "%g", w.framesPerSecond)) fps | \(String(format: "%.0f B/s = %.1f kbit/s", w.bytesPerSecond, w.bytesPerSecond * 8 / 1000)) |")
        lines.append("| raw 468 × 3 float32 landmarks, \(w.raw468x3Float32Bytes) B/frame | \(String(format: "%.1f×", w.ratio468x3)) the mean Veil frame |")
        lines.append("| raw 68 × 2 float32 landmarks, \(w.raw68x2Float32Bytes) B/frame | \(String(format: "%.1f×", w.ratio68x2)) the mean Veil frame |")
        lines.append("| encode / decode p50 | \(String(format: "%.2f µs / %.2f µs", w.encodeMicroseconds.p50, w.decodeMicroseconds.p50)) |")
        lines.append("")
        lines.append("\(w.lostFrames) of \(w.frames) frames were lost (header only). Payload only: packet headers (IP/UDP/RTP, or a data channel's) "
                     + "come on top, the same for any payload.")
        if let v = videoRead {
            lines.append("")
            lines.append("## Video input (not pinned, GStreamer's own threads)")
            lines.append("")
            lines.append("Reading the first clip back from a \(v.fileBytes / 1024) KiB H.264 MP4 as \(width)×\(height) RGB: "
                         + "\(ms(v.perFrameMilliseconds.p50)) ms/frame p50 (p95 \(ms(v.perFrameMilliseconds.p95)), mean "
                         + "\(ms(v.perFrameMilliseconds.mean))) over \(v.frames) frames, after \(ms(v.openToFirstFrameMilliseconds)) ms "
                         + "from opening to the first frame.")
        }
        if let b = bandwidth {
            lines.append("")
            lines.append(contentsOf: b.markdown(call: call))
        }
        if let c = call {
            lines.append("")
            lines.append(contentsOf: c.markdown(width: width, height: height))
        } else if let reason = callSkipped {
            lines.append("")
            lines.append("## Call")
            lines.append("")
            lines.append("Not measured: \(reason).")
        }
        if let latency {
            lines.append("")
            lines.append(contentsOf: latency.markdown)
        }
        if let load = serverLoad {
            lines.append("")
            lines.append(contentsOf: load.markdown)
        }
        if let load = clusterLoad {
            lines.append("")
            lines.append(contentsOf: load.markdown)
        }
        return lines.joined(separator: "\n") + "\n"
    }
}

extension BenchReport.Call {
    /// The call section of the Markdown report.
    func markdown(width: Int, height: Int) -> [String] {
        func ms(_ v: Double) -> String { String(format: "%.2f", v) }
        func ms0(_ v: Double) -> String { String(format: "%.0f", v) }
        func row(_ name: String, _ s: Stats, bold: Bool = false) -> String {
            bold ? "| **\(name)** | **\(ms(s.p50))** | \(ms(s.p95)) | \(ms(s.mean)) |"
                 : "| \(name) | \(ms(s.p50)) | \(ms(s.p95)) | \(ms(s.mean)) |"
        }
        func joinRow(_ name: String, _ s: Stats) -> String {
            s.count == 0 ? "| \(name) | - | - | - |" : "| \(name) | \(ms0(s.p50)) | \(ms0(s.min)) | \(ms0(s.max)) |"
        }
        var lines: [String] = []
        lines.append("## Call: alice and bob on one machine, one process")
        lines.append("")
        lines.append("A real call through the embedded room server (port 0) and WebRTC (webrtcbin: Opus voice and the expression data "
                     + "channel) between host candidates of this machine. Each side films its synthetic clip at \(String(format: "%g", framesPerSecond)) fps in real "
                     + "time (tracked as it goes, threads not pinned), speaks with \(voice), and draws the other's avatar at "
                     + "\(String(format: "%g", framesPerSecond)) fps (mask, \(width)×\(height), picture-in-picture with its own inset). "
                     + "Both sides read one monotonic clock, so one-way times are plain differences. Measured over "
                     + "\(String(format: "%g", measuredSeconds)) s, both directions pooled, after the voices' RTCP timing arrived and "
                     + "\(String(format: "%g", warmUpSeconds)) s to settle; \(String(format: "%.0f", wallSeconds)) s for the whole part.")
        lines.append("")
        lines.append("### Join")
        lines.append("")
        lines.append("| from `CallSession.start()` to | p50 ms | min ms | max ms |")
        lines.append("|:--|--:|--:|--:|")
        lines.append(joinRow("in the room (`joined`: WebSocket, token, membership)", joined))
        lines.append(joinRow("**connected to alice** (offer/answer, ICE, DTLS)", connected))
        lines.append(joinRow("**first expression frame** from alice (data channel open)", firstExpression))
        lines.append(joinRow("first voice played (first decoded audio at the sink)", firstVoice))
        lines.append("")
        lines.append("Bob joined \(joinSamples.count) times into the room where alice waited, a fresh `CallSession` each time, leaving "
                     + "in between. Alice, alone in the room, was in it after \(ms0(aliceJoinedMilliseconds)) ms.")
        lines.append("")
        lines.append("### Capture → remote render")
        lines.append("")
        lines.append("| stage | p50 ms | p95 ms | mean ms |")
        lines.append("|:--|--:|--:|--:|")
        lines.append(row("capture → remote render", endToEnd, bold: true))
        lines.append(row("tracking (`ExpressionCapture.process`)", tracking))
        lines.append(row("encoding (`encoded()`)", encoding))
        lines.append(row("network (send → arrival, same machine)", network))
        lines.append(row("jitter buffer (arrival → first picture the frame dominates)", jitterBuffer))
        lines.append(row("render (playout, compositor with Cairo, copy out)", render))
        lines.append("")
        lines.append("Per frame, over the \(framesShown) frames drawn of \(framesCaptured) captured (\(framesArrived) arrived); the means "
                     + "add up to the total, the percentiles need not. A frame is drawn at the first render tick whose picture it weighs "
                     + "most in (`Playout.earlier`/`later`). Capture is the moment the frame is handed to tracking: a camera's own latency "
                     + "(exposure, transfer, driver) comes on top.")
        lines.append("")
        lines.append("The jitter buffer is where the time goes, by design: the avatar is played out with the voice, and the voice took "
                     + "\(ms0(voiceMouthToEar.p50)) ms p50 (p95 \(ms0(voiceMouthToEar.p95))) from capture to playout (20 ms Opus frames, "
                     + "the adaptive playout's delay, which also waits for expression frames that come late, decoder and sink; it reached the sink \(ms(voicePlayedAfterAnnounced.p50)) ms p50 "
                     + "after the playout time the avatar is aligned to). A frame waits until the audio captured with it is heard, "
                     + "minus what tracking and the network already took. Each render tick took \(ms(renderTick.p50)) ms p50 "
                     + "(p95 \(ms(renderTick.p95))). Without a voice to follow, the buffers would play out after their own adaptive "
                     + "delay, \(directions.compactMap(\.bufferTargetDelayMilliseconds).map(ms0).joined(separator: " / ")) ms here "
                     + "(one frame interval plus arrival jitter, 40 ms at least). Where the receiver's 30 fps ticks fall between the sender's 30 fps captures is "
                     + "arbitrary, so the total moves by up to a frame interval from run to run.")
        lines.append("")
        lines.append("### Bytes and lip-sync")
        lines.append("")
        lines.append("| direction | expression B/s | audio B/s | audio : expression | expression frames/s | dropped / late | capture → render p50 ms | RTT ms |")
        lines.append("|:--|--:|--:|--:|--:|--:|--:|--:|")
        for d in directions {
            let ratio = d.expressionBytesPerSecond > 0 ? String(format: "%.1f : 1", d.audioBytesPerSecond / d.expressionBytesPerSecond) : "-"
            lines.append("| \(d.from) → \(d.to) | **\(ms0(d.expressionBytesPerSecond))** | \(ms0(d.audioBytesPerSecond)) | \(ratio) | "
                         + "\(String(format: "%.1f", d.expressionFramesPerSecond)) | \(d.framesDropped) / \(d.lateDropped) | "
                         + "\(ms(d.endToEnd.p50)) | \(d.roundTripMilliseconds.map { String(format: "%.1f", $0) } ?? "-") |")
        }
        lines.append("")
        let seconds = directions.map(\.statisticsSeconds).min() ?? 0
        lines.append("From `PeerStatistics` over \(String(format: "%.0f", seconds)) s of the window. Expression bytes are data-channel "
                     + "payloads (SCTP, DTLS, UDP and IP headers not counted); audio bytes are webrtcbin's count for the outbound Opus "
                     + "RTP stream (32 kbit/s target, voice mode).")
        lines.append("")
        if lipSyncAudioLead.count > 0 {
            lines.append("**Lip-sync** (audio lead: the voice heard minus the capture time of the frame that weighs most, over the "
                         + "\(lipSyncAudioLead.count) `.frame`/`.interpolated` pictures): p5 / p50 / p95 "
                         + "\(String(format: "%.1f / %.1f / %.1f", lipSyncAudioLeadP5, lipSyncAudioLead.p50, lipSyncAudioLead.p95)) ms; "
                         + "\(String(format: "%.1f", lipSyncInside * 100)) % inside +45/−125 ms (ITU-R BT.1359).")
        } else {
            lines.append("**Lip-sync**: no picture was aligned with a voice (the voices' RTCP timing never arrived).")
        }
        let sources = playoutSources.sorted { $0.value > $1.value }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        lines.append("Pictures drawn in the window, by how they were made: \(sources).")
        if let pair = candidatePair { lines.append("Selected ICE pair: \(pair).") }
        return lines
    }
}

/// Where the numbers were measured. Every probe fails soft: an unknown is left out, not guessed.
struct Machine: Codable {
    var uname: String?
    var cpuModel: String?
    var logicalCores: Int
    var activeCores: Int
    var swiftVersion: String?
    var buildConfiguration: String
    var gitCommit: String?
    var gitDirty: Bool?
    var loadAverageAtStart: String?
    var loadAverageAtEnd: String?
    var pinnedToCPU0 = false
    var pinning = "not attempted"

    /// Probes this machine and checkout; the pinning fields are filled in later by the benchmark.
    static func current() -> Machine {
        #if DEBUG
        let configuration = "debug"
        #else
        let configuration = "release"
        #endif
        let commit = run(["git", "rev-parse", "HEAD"])
        return Machine(
            uname: run(["uname", "-a"]),
            cpuModel: cpuModel(),
            logicalCores: ProcessInfo.processInfo.processorCount,
            activeCores: ProcessInfo.processInfo.activeProcessorCount,
            swiftVersion: run(["swift", "--version"])?.split(separator: "\n").first.map(String.init),
            buildConfiguration: configuration,
            gitCommit: commit,
            gitDirty: commit == nil ? nil : run(["git", "status", "--porcelain", "--untracked-files=no"]).map { !$0.isEmpty },
            loadAverageAtStart: loadAverage())
    }

    /// The first three fields of /proc/loadavg.
    static func loadAverage() -> String? {
        guard let text = try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8) else { return nil }
        return text.split(separator: " ").prefix(3).joined(separator: " ")
    }

    /// `model name` from /proc/cpuinfo (x86), else `Model` or `Hardware` (Arm boards).
    static func cpuModel() -> String? {
        guard let text = try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8) else { return nil }
        for key in ["model name", "Model", "Hardware"] {
            for line in text.split(separator: "\n") where line.hasPrefix(key) {
                guard let colon = line.firstIndex(of: ":") else { continue }
                let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                if !value.isEmpty { return value }
            }
        }
        return nil
    }

    /// Standard output of a command found on PATH, trimmed; nil when it cannot run or fails.
    static func run(_ arguments: [String]) -> String? {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle(forWritingAtPath: "/dev/null")
        do { try process.run() } catch { return nil }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { return nil }
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

extension BenchReport {
    /// Mouth-to-ear through the relay, Veil beside Chromium (libwebrtc's NetEq), condition by condition.
    struct Latency: Codable {
        var schedule: [LatencyCondition]
        var veil: [LatencyBenchmark.Result] = []
        var veilSkipped: String?
        var chromium: [ConditionResult] = []
        var chromiumSkipped: String?
        /// Whether the sender's frames were tracked from a clip (else made without tracking).
        var trackedCamera: Bool?

        var markdown: [String] {
            var lines = ["## Latency: mouth to ear through a relay, Veil and Chromium side by side", ""]
            lines.append("Tone bursts (80 ms every 500 ms) enter the sender's audio input; their onset is detected where the receiver "
                         + "hands audio to the sound server (Veil: the playout's output; Chromium: WebAudio, one AudioContext clock), "
                         + "on one clock. Both calls cross the same in-process UDP relay, conditions back to back in one call. "
                         + (trackedCamera == true
                            ? "Capture → avatar is the age of each picture drawn (30/s): from the moment the sender's camera frame was taken, through Veil's tracker on that frame, to the picture."
                            : "Capture → avatar is the age of each picture drawn (30/s), without a tracker (frames made at capture)."))
            lines.append("")
            if let reason = veilSkipped { lines.append("Veil not measured: \(reason)."); lines.append("") }
            let untracked = veil.compactMap(\.framesUntracked).reduce(0, +), tracked = veil.compactMap(\.framesTracked).reduce(0, +)
            if untracked > 0 {
                lines.append("Tracking failed on \(untracked) of the sender's \(untracked + tracked) camera frames; those were not sent.")
                lines.append("")
            }
            if let reason = chromiumSkipped { lines.append("Chromium not measured: \(reason)."); lines.append("") }
            lines.append("| condition | Veil mouth→ear p50 / p95 | Chromium p50 / p95 | Veil ÷ Chromium (p50) | Veil capture→avatar p50 / p95 | "
                         + "lip-sync p5 / p50 / p95 (in window) | late packets Veil (after 1 s) / Chromium discarded | "
                         + "concealment events/min Veil / Chromium | concealed s/min Veil / Chromium | stretched s/min (Veil) | target delay Veil / NetEq |")
            lines.append("|---|---|---|---|---|---|---|---|---|---|---|")
            for (index, condition) in schedule.enumerated() {
                let v: LatencyBenchmark.Result? = index < veil.count ? veil[index] : nil
                let c: ConditionResult? = index < chromium.count ? chromium[index] : nil
                lines.append(row(condition, veil: v, chromium: c))
            }
            lines.append("")
            lines.append("Late packets: Veil counts a received packet late when its audio reached the playout after its playout time "
                         + "at the target delay (audio made up for a lost packet is no packet: when it comes after its time, the playout's "
                         + "own concealment shows it); in brackets, the same from the condition's second second on: a step in the path's "
                         + "delay makes the first packets after it late for any receiver. libwebrtc counts no late packets as such: its "
                         + "nearest figure is inbound-rtp `packetsDiscarded`, the packets that came too late to be played at all; a packet "
                         + "that came after its time and was played after a concealment is not in it. Concealment events count the same "
                         + "thing on both sides (inbound-rtp `concealmentEvents`: a run of made-up audio, for a lost packet or a late one). "
                         + "Targets are at each condition's end.")
            return lines
        }

        private func row(_ condition: LatencyCondition, veil v: LatencyBenchmark.Result?, chromium c: ConditionResult?) -> String {
            func ms(_ value: Double?) -> String { value.map { String(format: "%.0f", $0) } ?? "–" }
            func p(_ values: [Double]?, _ q: Double) -> Double? {
                guard let values, !values.isEmpty else { return nil }
                return Stats.percentile(q, ofSorted: values.sorted())
            }
            func fixed(_ value: Double?, _ format: String) -> String { value.map { String(format: format, $0) } ?? "–" }
            let veilMouth = v?.mouthToEarMillis, chromeMouth = c?.mouthToEarMillis
            let vp50 = p(veilMouth, 50), cp50 = p(chromeMouth, 50)
            var ratio = "–"
            if let vp50, let cp50, cp50 > 0 { ratio = String(format: "%.2f", vp50 / cp50) }
            let veilHeard = v.map { "\($0.burstsDetected)/\($0.burstsSent)" } ?? "–"
            let chromeHeard = c.map { "\($0.burstsDetected)/\($0.burstsSent)" } ?? "–"
            let avatar = v?.captureToAvatarMillis
            let leads = v?.audioLeadMillis
            let inWindow = fixed(v.map { $0.lipSyncInWindowShare * 100 }, "%.0f")
            let settledLate = (v?.settledLatePacketShare).map { String(format: " (%.1f %%)", $0 * 100) } ?? ""
            let veilLate = fixed(v.map { $0.latePacketShare * 100 }, "%.1f %%") + settledLate
            let chromeLate = fixed(c.map { Double($0.packetsDiscarded) * 100 / Double(max($0.packetsReceived, 1)) }, "%.1f %%")
            var cells: [String] = [condition.name]
            cells.append("\(ms(vp50)) / \(ms(p(veilMouth, 95))) ms (\(veilHeard))")
            cells.append("\(ms(cp50)) / \(ms(p(chromeMouth, 95))) ms (\(chromeHeard))")
            cells.append(ratio)
            cells.append("\(ms(p(avatar, 50))) / \(ms(p(avatar, 95))) ms")
            cells.append("\(ms(p(leads, 5))) / \(ms(p(leads, 50))) / \(ms(p(leads, 95))) ms (\(inWindow) %)")
            cells.append("\(veilLate) / \(chromeLate)")
            let chromeEvents = c.flatMap { c in c.concealmentEvents.map { Double($0) * 60 / max(c.seconds, 1) } }
            cells.append("\(fixed(v?.concealmentEventsPerMinute, "%.1f")) / \(fixed(chromeEvents, "%.1f"))")
            cells.append("\(fixed(v?.concealedSecondsPerMinute, "%.2f")) / \(fixed(c?.concealedSecondsPerMinute, "%.2f"))")
            cells.append(fixed(v?.stretchedSecondsPerMinute, "%.2f"))
            cells.append("\(ms(v?.targetDelayMillis)) / \(ms(c?.netEqTargetDelayMillis)) ms")
            return "| " + cells.joined(separator: " | ") + " |"
        }
    }
}

extension BenchReport {
    /// The per-stage table of each tracker at each frame size.
    func trackingBySizeMarkdown(_ sized: [SizedTracking]) -> [String] {
        func ms(_ value: Double?) -> String { value.map { String(format: "%.2f", $0) } ?? "–" }
        var lines = ["## Tracking by frame size and pipeline, one core (p50 ms)", ""]
        lines.append("The same clips as above, each frame letterboxed into the size first (not timed). The attention mesh is MediaPipe's "
                     + "`face_landmark_with_attention` (what `refine_landmarks=True` runs): one model for 478 points, whose lips, eyelids "
                     + "and irises are refined inside it by three custom operations Veil registers with LiteRT\(defaultAttentionMesh == true ? "; Veil's default" : ""). "
                     + "The two-model pipeline runs the 468-point mesh, then the iris model on each eye\(defaultAttentionMesh == true ? "" : "; Veil's default"). "
                     + "Crops are cut from the whole frame; "
                     + "model is the landmark and iris time less crops and custom operations.")
        lines.append("")
        lines.append("| frame | pipeline | frame → wire bytes | tracker | detection | crops | models | custom operations | rest | estimator | tracked |")
        lines.append("|:--|:--|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
        var rows = sized
        let defaultPipeline = defaultAttentionMesh ?? false
        if rows.first(where: { $0.attentionMesh == defaultPipeline && $0.width == width && $0.height == height }) == nil {
            rows.insert(SizedTracking(width: width, height: height, attentionMesh: defaultPipeline, tracking: tracking), at: 0)
        }
        for row in rows {
            let t = row.tracking
            let crop = t.crop?.p50 ?? 0, custom = t.customOperations?.p50 ?? 0
            let models = t.landmarks.p50 + t.iris.p50 - crop - custom
            lines.append("| \(row.width)×\(row.height) | \(row.attentionMesh ? "attention mesh (478 points)" : "mesh + iris (468 + 2 pupils)") | "
                         + "\(ms(t.total.p50)) | \(ms(t.tracker.p50)) | \(ms(t.detection.p50)) | \(ms(t.crop?.p50)) | \(ms(models)) | "
                         + "\(row.attentionMesh ? ms(t.customOperations?.p50) : "–") | \(ms(t.trackerOther.p50)) | \(ms(t.estimator.p50)) | "
                         + "\(t.trackedFrames)/\(t.frames) |")
        }
        return lines
    }
}
