import Foundation
import VeilCairo
import VeilCore
import VeilVision
import VeilMedia
import VeilRender
import VeilSynth
import VeilTracking
import VeilConsole
#if canImport(Glibc)
import Glibc
#endif

/// The measurements behind `veil bench`: synthesise the clips, then time tracking, drawing and the
/// wire on them.
public struct Benchmark {
    public var photos = ["astronaut.png", "takeo.ppm"]
    public var script = ExpressionScript.talking
    public var size = (width: 640, height: 480)
    public var framesPerClip = ExpressionScript.talking.frameCount
    /// Frames run before each measured pass and not counted: the first runs of a model pay for
    /// page faults, cold caches and lazy set-up.
    public var warmUpFrames = 10
    public var quick = false
    public var pin = true
    public var timeVideoRead = true
    public var measureCall = true
    public var measureBandwidth = true
    /// Run dlib and MediaPipe on the same frames (Bench+Peers.swift).
    public var measurePeers = true
    public var measureServerLoad = true
    /// Three nodes behind haproxy sharing rooms through Redis, under `clusterClients` clients.
    public var measureClusterLoad = true
    public var clusterClients = 3000
    /// Mouth-to-ear through the relay under the four network conditions, Veil and Chromium.
    public var measureLatency = true
    public var quiet = false

    /// A benchmark with the settings above.
    public init() {}

    /// One synthetic clip, every frame in memory.
    struct Clip {
        var photo: String
        var frames: [RGBImage]
    }

    /// Runs every measurement and returns the report; restores the thread's CPU set when done.
    public func run() throws -> BenchReport {
        var report = BenchReport(machine: .current(), framesPerClip: framesPerClip, warmUpFrames: warmUpFrames,
                                 quick: quick, width: size.width, height: size.height, photos: photos,
                                 scriptSeconds: script.duration, scriptFramesPerSecond: script.framesPerSecond)
        let tracker = try MediaPipeFaceTracker()
        let synthesis = try MediaPipeFaceTracker(options: .meshAndIris)
        let clips = try photos.map { try synthesize($0, tracker: synthesis) }
        report.defaultAttentionMesh = tracker.options.attentionMesh
        if timeVideoRead, let first = clips.first { report.videoRead = try measureVideoRead(first) }

        do {
            let affinity = pin ? CPUAffinity.pinToFirstCPU() : CPUAffinity.Outcome(pinned: false, detail: "--no-pin given", restore: nil)
            defer { affinity.restore?() }
            report.machine.pinnedToCPU0 = affinity.pinned
            report.machine.pinning = affinity.detail
            if !quiet { Terminal.note("bench: \(affinity.pinned ? "pinned to CPU 0" : "not pinned: \(affinity.detail)")") }

            let expressions = try measureTracking(clips, tracker: tracker, into: &report)
            report.trackingBySize = try measureTrackingBySize(clips, defaultAttentionMesh: tracker.options.attentionMesh)
            for (name, style) in [("mask", AvatarStyle.mask), ("sketch", AvatarStyle.sketch)] {
                report.rendering.append(try measureRendering(expressions, style: style, name: name))
            }
            report.backgroundMilliseconds = try measureBackground(frames: expressions.count)
        }
        // Each peer is its own process, pinned with taskset; started after the CPU set is restored.
        if measurePeers {
            // The other pipeline, timed at the bench's size with the others.
            let other = report.trackingBySize?.first {
                $0.attentionMesh != tracker.options.attentionMesh && $0.width == size.width && $0.height == size.height
            }
            report.peers = comparePeers(clips, veil: report.tracking, tracker: tracker, otherPipeline: other?.tracking)
        }

        if measureBandwidth {
            var bandwidth = BandwidthBenchmark()
            bandwidth.framesPerSecond = script.framesPerSecond
            bandwidth.quiet = quiet
            report.bandwidth = try bandwidth.run(clips: clips, tracker: tracker)
        }

        // The call runs unpinned (after the CPU set is restored): its threads, and GStreamer's,
        // inherit the affinity of the thread that creates them.
        if !measureCall {
            report.callSkipped = "--no-call given"
        } else if clips.count >= 2 {
            var call = CallBenchmark()
            call.joins = quick ? 3 : 5
            call.measuredSeconds = quick ? 5 : 20
            call.framesPerSecond = script.framesPerSecond
            call.size = size
            call.quiet = quiet
            do {
                report.call = try call.run(aliceClip: clips[0], bobClip: clips[1], tracker: tracker)
            } catch {
                report.callSkipped = "the call failed (\(error))"
                Terminal.error("bench: \(report.callSkipped ?? "the call failed"); the other results are still written")
            }
        } else {
            report.callSkipped = "it needs two clips"
        }
        if measureLatency {
            report.latency = measureLatencyConditions(camera: clips.first.map { LatencyBenchmark.Camera(frames: $0.frames, tracker: tracker) })
        }
        if measureServerLoad {
            var load = ServerLoadBenchmark()
            load.clientCounts = quick ? [100, 500] : [100, 500, 1000]
            load.quiet = quiet
            do { report.serverLoad = try load.run() } catch {
                Terminal.error("bench: the server load could not run (\(error)); the other results are still written")
            }
        }
        if measureClusterLoad {
            var cluster = ClusterLoadBenchmark()
            cluster.clients = clusterClients
            cluster.quiet = quiet
            report.clusterLoad = cluster.run()
        }
        report.machine.loadAverageAtEnd = Machine.loadAverage()
        return report
    }

    /// Veil, then Chromium, through the same relay schedule (shorter with --quick).
    private func measureLatencyConditions(camera: LatencyBenchmark.Camera?) -> BenchReport.Latency {
        var schedule = LatencyCondition.standardSchedule
        if quick { for index in schedule.indices { schedule[index].seconds = 8 } }
        var latency = BenchReport.Latency(schedule: schedule)
        let say: (String) -> Void = { if !quiet { Terminal.note("bench latency: \($0)") } }
        var veil = LatencyBenchmark()
        veil.schedule = schedule
        veil.camera = camera
        latency.trackedCamera = camera != nil
        do { latency.veil = try veil.run(progress: say) } catch {
            latency.veilSkipped = "\(error)"
            Terminal.error("bench: Veil's latency run failed (\(error)); the other results are still written")
        }
        do { latency.chromium = try ChromiumAnchor().run(schedule, progress: say) } catch {
            latency.chromiumSkipped = "\(error)"
            Terminal.error("bench: the Chromium anchor did not run (\(error)); the other results are still written")
        }
        return latency
    }

    /// The talking clip on the face in `photo`, as in `veil synth`, kept in memory.
    private func synthesize(_ photo: String, tracker: MediaPipeFaceTracker) throws -> Clip {
        let (image, _, _) = try ImageIO.load(VeilResources.file("photos", photo)).letterboxed(width: size.width, height: size.height)
        guard let landmarks = try tracker.landmarks(inStill: image), let mesh = landmarks.mesh else {
            throw VeilError.invalidResource("photo \(photo): no face found in it; run scripts/bootstrap again to restore it")
        }
        let synth = try TalkingFaceSynthesizer(photo: image, mesh: mesh, topology: tracker.topology)
        let progress = ProgressBar(total: framesPerClip, label: "synth \(photo)", quiet: quiet)
        var frames: [RGBImage] = []
        frames.reserveCapacity(framesPerClip)
        for index in 0..<framesPerClip {
            frames.append(synth.frame(at: script.state(ofFrame: index)))
            progress.update(index + 1)
        }
        progress.finish()
        return Clip(photo: photo, frames: frames)
    }

    /// Writes `clip` to a temporary H.264 MP4 and times reading it back as RGB frames (GStreamer
    /// decodes on threads of its own, so this runs before pinning and counts wall time).
    private func measureVideoRead(_ clip: Clip) throws -> BenchReport.VideoRead {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("veil-bench-\(getpid()).mp4")
        defer { try? FileManager.default.removeItem(at: url) }
        let writer = try VideoWriter(url: url, width: size.width, height: size.height,
                                     framesPerSecond: Int(script.framesPerSecond.rounded()))
        let progress = ProgressBar(total: clip.frames.count, label: "encode mp4", quiet: quiet)
        for (index, frame) in clip.frames.enumerated() {
            try writer.write(frame)
            progress.update(index + 1)
        }
        try writer.finish()
        progress.finish()
        let fileBytes = (try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int) ?? 0

        let opened = monotonicMilliseconds()
        let source = try VideoSource(file: url)
        var frame = VideoFrame(image: RGBImage(width: 0, height: 0), timestampMicros: 0)
        var firstFrame = 0.0
        var perFrame: [Double] = []
        var last = opened
        while try source.read(into: &frame) {
            let now = monotonicMilliseconds()
            if firstFrame == 0 { firstFrame = now - opened } else { perFrame.append(now - last) }
            last = now
        }
        return BenchReport.VideoRead(frames: perFrame.count + (firstFrame > 0 ? 1 : 0), fileBytes: fileBytes,
                                     openToFirstFrameMilliseconds: BenchReport.rounded(firstFrame),
                                     perFrameMilliseconds: Stats(perFrame))
    }

    /// Tracks every clip from its first frame with a fresh capture (as a new call would), after a
    /// warm-up on the same clip. Returns the expressions a receiver would show, from the decoded bytes.
    private func measureTracking(_ clips: [Clip], tracker: MediaPipeFaceTracker, into report: inout BenchReport) throws -> [VeilCore.Expression] {
        let timing = try timeTracking(clips, tracker: tracker, label: "track")
        report.clips = zip(clips, timing.samplesByClip).map { BenchReport.ClipResult($1, photo: $0.photo) }
        let samples = timing.samplesByClip.flatMap { $0 }
        report.tracking = BenchReport.Tracking(samples)
        report.wire = BenchReport.Wire(samples, framesPerSecond: script.framesPerSecond)
        return timing.shown
    }

    /// The pipeline that is not the default (and at camera sizes the default one too) on the same
    /// clips, each frame letterboxed into 640×480, 1280×720 and 1920×1080 before it is timed: the
    /// crops are cut from the whole frame, so only detection should see the frame's size.
    private func measureTrackingBySize(_ clips: [Clip], defaultAttentionMesh: Bool) throws -> [BenchReport.SizedTracking] {
        var results: [BenchReport.SizedTracking] = []
        for (width, height) in [(size.width, size.height), (1280, 720), (1920, 1080)] {
            for attention in [true, false] where attention != defaultAttentionMesh || width != size.width {
                var options = MediaPipeFaceTracker.Options()
                options.attentionMesh = attention
                let tracker = try MediaPipeFaceTracker(options: options)
                let resized = width == size.width && height == size.height ? nil : (width, height)
                let timing = try timeTracking(clips, tracker: tracker, label: "track \(attention ? "attention " : "")\(width)×\(height)",
                                              resize: resized)
                results.append(BenchReport.SizedTracking(width: width, height: height, attentionMesh: attention,
                                                         tracking: BenchReport.Tracking(timing.samplesByClip.flatMap { $0 })))
            }
        }
        return results
    }

    /// Tracks every clip from its first frame with a fresh capture (as a new call would), after a
    /// warm-up on the same clip; each frame letterboxed into `resize` first (not timed). Returns each
    /// clip's samples, and the expressions a receiver would show, from the decoded bytes.
    private func timeTracking(_ clips: [Clip], tracker: MediaPipeFaceTracker, label: String,
                              resize: (Int, Int)? = nil) throws -> (samplesByClip: [[TrackingSample]], shown: [VeilCore.Expression]) {
        let timed = TimedTracker(tracker)
        var samplesByClip: [[TrackingSample]] = []
        var shown: [VeilCore.Expression] = []
        let progress = ProgressBar(total: clips.count * (framesPerClip + warmUpFrames), label: label, quiet: quiet)
        var done = 0
        func sized(_ frame: RGBImage) -> RGBImage { resize.map { frame.letterboxed(width: $0.0, height: $0.1).image } ?? frame }
        for clip in clips {
            let warmUp = ExpressionCapture(tracker: timed)
            for (index, frame) in clip.frames.prefix(warmUpFrames).enumerated() {
                _ = try warmUp.process(sized(frame), captureTimeMicros: captureTime(ofFrame: index)).frame.encoded()
                done += 1; progress.update(done)
            }
            timed.reset()
            let capture = ExpressionCapture(tracker: timed)
            var clipSamples: [TrackingSample] = []
            var lastShown = VeilCore.Expression.neutral
            for (index, original) in clip.frames.enumerated() {
                let frame = sized(original)
                let t0 = monotonicMilliseconds()
                let output = try capture.process(frame, captureTimeMicros: captureTime(ofFrame: index))
                let t1 = monotonicMilliseconds()
                let bytes = output.frame.encoded()
                let t2 = monotonicMilliseconds()
                let received = try ExpressionFrame(decoding: bytes)
                let t3 = monotonicMilliseconds()
                if received.state == .tracked { lastShown = received.expression }
                shown.append(lastShown)
                let tracking = output.tracking
                clipSamples.append(TrackingSample(
                    total: t2 - t0, tracker: timed.lastMilliseconds, detection: tracking.detectionMilliseconds,
                    landmarks: tracking.landmarkMilliseconds, iris: tracking.irisMilliseconds,
                    crop: tracking.cropMilliseconds, customOperations: tracking.customOperationMilliseconds,
                    estimator: (t1 - t0) - timed.lastMilliseconds, encode: t2 - t1, decode: t3 - t2,
                    ranDetection: tracking.ranDetection, tracked: received.state == .tracked, bytes: bytes.count))
                done += 1; progress.update(done)
            }
            timed.reset()
            samplesByClip.append(clipSamples)
        }
        progress.finish()
        return (samplesByClip, shown)
    }

    /// Draws every expression in `style` and reads the canvas back as RGB, as `veil render` does
    /// per frame.
    private func measureRendering(_ expressions: [VeilCore.Expression], style: AvatarStyle, name: String) throws -> BenchReport.Rendering {
        let canvas = try CairoCanvas(width: size.width, height: size.height)
        let renderer = AvatarRenderer()
        let rect = Rect(x: 0, y: 0, width: Float(size.width), height: Float(size.height))
        var image = RGBImage(width: size.width, height: size.height)
        for expression in expressions.prefix(warmUpFrames) {
            renderer.render(expression, into: canvas, rect: rect, style: style, background: AvatarBackground.default)
            canvas.copy(into: &image)
        }
        let progress = ProgressBar(total: expressions.count, label: "render \(name)", quiet: quiet)
        var total: [Double] = [], copy: [Double] = []
        total.reserveCapacity(expressions.count); copy.reserveCapacity(expressions.count)
        for (index, expression) in expressions.enumerated() {
            let t0 = monotonicMilliseconds()
            renderer.render(expression, into: canvas, rect: rect, style: style, background: AvatarBackground.default)
            let t1 = monotonicMilliseconds()
            canvas.copy(into: &image)
            let t2 = monotonicMilliseconds()
            total.append(t2 - t0); copy.append(t2 - t1)
            progress.update(index + 1)
        }
        progress.finish()
        return BenchReport.Rendering(style: name, frames: expressions.count, milliseconds: Stats(total), copyMilliseconds: Stats(copy))
    }

    /// The default gradient background alone, the part of every frame that does not depend on the
    /// expression.
    private func measureBackground(frames: Int) throws -> Stats {
        let canvas = try CairoCanvas(width: size.width, height: size.height)
        let rect = Rect(x: 0, y: 0, width: Float(size.width), height: Float(size.height))
        var times: [Double] = []
        times.reserveCapacity(frames)
        for index in 0..<(warmUpFrames + frames) {
            let t0 = monotonicMilliseconds()
            AvatarRenderer.drawBackground(AvatarBackground.default, into: canvas, rect: rect)
            let t1 = monotonicMilliseconds()
            if index >= warmUpFrames { times.append(t1 - t0) }
        }
        return Stats(times)
    }

    private func captureTime(ofFrame index: Int) -> UInt64 {
        UInt64((script.time(ofFrame: index) * 1e6).rounded())
    }
}

/// What one tracked frame cost, in milliseconds, and what it put on the wire.
struct TrackingSample {
    /// Frame in → wire bytes out: `ExpressionCapture.process` plus encoding.
    var total: Double
    /// The whole `track` call.
    var tracker: Double
    var detection: Double
    var landmarks: Double
    var iris: Double
    /// Of landmarks and iris: the crops, and the attention mesh's custom operations.
    var crop = 0.0, customOperations = 0.0
    /// `process` minus `track`: the expression estimator and the frame's assembly.
    var estimator: Double
    var encode: Double
    var decode: Double
    var ranDetection: Bool
    var tracked: Bool
    var bytes: Int
    /// Tracker time outside its three timed stages: mesh → landmarks, the next frame's region.
    var trackerOther: Double { max(tracker - detection - landmarks - iris, 0) }
}

/// Wraps a tracker to time its whole `track` call, which its own stage timers do not cover.
final class TimedTracker: FaceTracking {
    private let tracker: FaceTracking
    /// Wall time of the last `track` call, milliseconds.
    private(set) var lastMilliseconds = 0.0

    init(_ tracker: FaceTracking) { self.tracker = tracker }

    func track(_ image: RGBImage) throws -> TrackingResult {
        let start = monotonicMilliseconds()
        defer { lastMilliseconds = monotonicMilliseconds() - start }
        return try tracker.track(image)
    }

    func reset() { tracker.reset() }
}

/// Pins the calling thread to one CPU so that tracking and drawing are timed on one core, free of
/// migrations. `sched_setaffinity` and `sched_getcpu` are GNU extensions that Swift's Glibc module
/// does not export (it is built without `_GNU_SOURCE`), so they are looked up in the C library at
/// run time; without them the benchmark runs unpinned and says so.
enum CPUAffinity {
    /// Whether pinning took, in words for the report, and how to undo it.
    struct Outcome {
        var pinned: Bool
        var detail: String
        /// Puts the thread's previous CPU set back.
        var restore: (() -> Void)?
    }

    private typealias SetAffinity = @convention(c) (pid_t, Int, UnsafeRawPointer) -> Int32
    private typealias GetAffinity = @convention(c) (pid_t, Int, UnsafeMutableRawPointer) -> Int32
    private typealias GetCPU = @convention(c) () -> Int32
    /// Words of a CPU mask: 1024 CPUs, glibc's `cpu_set_t`.
    private static let maskWords = 16

    /// Restricts the calling thread to CPU 0 and checks that the kernel applied it.
    static func pinToFirstCPU() -> Outcome {
        guard let libc = dlopen(nil, RTLD_NOW),
              let setSymbol = dlsym(libc, "sched_setaffinity"), let getSymbol = dlsym(libc, "sched_getaffinity") else {
            return Outcome(pinned: false, detail: "sched_setaffinity is not available", restore: nil)
        }
        let setAffinity = unsafeBitCast(setSymbol, to: SetAffinity.self)
        let getAffinity = unsafeBitCast(getSymbol, to: GetAffinity.self)
        func set(_ mask: [UInt64]) -> Bool {
            mask.withUnsafeBytes { buffer in buffer.baseAddress.map { setAffinity(0, buffer.count, $0) == 0 } ?? false }
        }
        func get() -> [UInt64]? {
            var mask = [UInt64](repeating: 0, count: maskWords)
            let ok = mask.withUnsafeMutableBytes { buffer in buffer.baseAddress.map { getAffinity(0, buffer.count, $0) == 0 } ?? false }
            return ok ? mask : nil
        }
        let previous = get()
        var cpu0 = [UInt64](repeating: 0, count: maskWords)
        cpu0[0] = 1
        guard set(cpu0) else {
            return Outcome(pinned: false, detail: "sched_setaffinity failed: \(String(cString: strerror(errno)))", restore: nil)
        }
        let confirmed = get() == cpu0
        var detail = confirmed ? "thread affinity set to CPU 0" : "sched_setaffinity succeeded but the mask reads back differently"
        if let symbol = dlsym(libc, "sched_getcpu") { detail += ", running on CPU \(unsafeBitCast(symbol, to: GetCPU.self)())" }
        let restore: (() -> Void)? = previous.map { mask in { _ = set(mask) } }
        return Outcome(pinned: confirmed, detail: detail, restore: restore)
    }
}
