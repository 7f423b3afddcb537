import CGStreamer
import VeilCore

/// What a source knows about its frames before the first `read`.
struct SourceInfo {
    var width: Int
    var height: Int
    var framesPerSecond: Double?
    var durationSeconds: Double?
    var frameCount: Int?
    var isLive: Bool
}

/// Something that fills frames one after the other; confined to one caller at a time.
protocol FrameReader: AnyObject {
    var info: SourceInfo { get }
    /// Fills `frame` with the next frame; false at the end.
    func read(into frame: inout VideoFrame) throws -> Bool
}

/// Reads RGB frames from a pipeline that ends in `appsink name=sink` with `format=RGB` caps.
///
/// Waiting happens in one place, the bus: the appsink's new-sample callback posts an application
/// message (a wake-up) after queueing each sample, so `read` blocks on the bus until a sample, the
/// end of the stream or an error arrives, with a timeout. Wake-ups are drained after each pulled
/// sample, so the bus never accumulates them.
final class PipelineReader: FrameReader {
    /// How the reader names its input and classifies failures in error messages.
    struct Subject {
        /// "video file /a/b.mp4", "camera /dev/video0", ...
        var name: String
        /// Kind thrown when GStreamer cannot open the input.
        var missingKind: MediaError.Kind
        /// What to do when the input cannot be opened.
        var missingAdvice: String
    }

    private let pipeline: MediaPipeline
    private let sink: UnsafeMutablePointer<GstElement>
    private let subject: Subject
    private let timeout: Double
    /// Filled in at start-up; owners may refine it (e.g. the exact frame count of a sequence).
    var info: SourceInfo
    /// Frames to deliver at most (1 for a still image, even if the file turns out to be a video).
    var frameLimit: Int?
    private var endOfStream = false
    private var failure: MediaError?
    private var framesRead = 0
    /// The caps `videoInfo` was computed from (a reference the reader owns), to parse caps only when they change.
    private var videoInfoCaps: UnsafeMutablePointer<GstCaps>?
    private var videoInfo = GstVideoInfo()

    /// Starts `pipeline` and waits (at most `timeout` seconds) until it knows the frame format:
    /// preroll for files, the first frame for live sources.
    init(pipeline: MediaPipeline, subject: Subject, live: Bool, timeout: Double) throws {
        self.pipeline = pipeline
        self.subject = subject
        self.timeout = timeout
        self.sink = try pipeline.element(named: "sink")
        self.info = SourceInfo(width: 0, height: 0, isLive: live)

        MediaPipeline.postWakeUps(fromAppSink: sink)

        if live {
            try startLive()
        } else {
            try startPrerolled()
        }
    }

    deinit {
        // The pipeline (and with it the appsink) goes to NULL in MediaPipeline's deinit.
        if let videoInfoCaps { gst_caps_unref(videoInfoCaps) }
    }

    private var appSink: UnsafeMutablePointer<GstAppSink> {
        UnsafeMutableRawPointer(sink).assumingMemoryBound(to: GstAppSink.self)
    }

    // MARK: Start-up

    private func startPrerolled() throws {
        switch pipeline.setState(GST_STATE_PAUSED) {
        case GST_STATE_CHANGE_FAILURE:
            throw startFailure()
        case GST_STATE_CHANGE_ASYNC:
            waiting: while true {
                guard let event = pipeline.next(GST_MESSAGE_ERROR | GST_MESSAGE_WARNING | GST_MESSAGE_ASYNC_DONE | GST_MESSAGE_EOS,
                                                timeout: timeout) else {
                    throw MediaError(.timedOut, "\(subject.name) did not start within \(Int(timeout)) s; check that it is a readable video or image")
                }
                switch event {
                case .error(let failure): throw mediaError(failure)
                // Streams that are all audio in a container that queues them (MP4, Ogg) never fail
                // on their own: decodebin just leaves them unlinked and the preroll never ends.
                case .warning(let failure) where failure.isUnresolvedLink: throw noVideo()
                case .endOfStream: throw noVideo()
                case .asyncDone: break waiting
                case .warning, .wakeUp, .other: continue
                }
            }
        default:
            break
        }
        guard let sample = gst_app_sink_try_pull_preroll(appSink, 0) else { throw noVideo() }
        defer { gst_sample_unref(sample) }
        guard let caps = gst_sample_get_caps(sample) else { throw noVideo() }
        try adoptCaps(caps)
        if let nanoseconds = pipeline.durationNanoseconds() {
            let seconds = Double(nanoseconds) / 1e9
            info.durationSeconds = seconds
            if let fps = info.framesPerSecond { info.frameCount = Int((seconds * fps).rounded()) }
        }
        guard pipeline.setState(GST_STATE_PLAYING) != GST_STATE_CHANGE_FAILURE else { throw startFailure() }
    }

    private func startLive() throws {
        guard pipeline.setState(GST_STATE_PLAYING) != GST_STATE_CHANGE_FAILURE else { throw startFailure() }
        // The first frame fixes the format. Its wake-up arrives after it is queued, so its caps are
        // on the appsink's pad by then; `read` pulls the frame itself.
        waiting: while true {
            guard let event = pipeline.next(GST_MESSAGE_ERROR | GST_MESSAGE_EOS | GST_MESSAGE_APPLICATION, timeout: timeout) else {
                throw MediaError(.timedOut, "\(subject.name) delivered no frame within \(Int(timeout)) s; \(subject.missingAdvice)")
            }
            switch event {
            case .error(let failure): throw mediaError(failure)
            case .endOfStream: throw noVideo()
            case .wakeUp: break waiting
            case .asyncDone, .warning, .other: continue
            }
        }
        guard let pad = gst_element_get_static_pad(sink, "sink") else { throw noVideo() }
        defer { gst_object_unref(UnsafeMutableRawPointer(pad)) }
        guard let caps = gst_pad_get_current_caps(pad) else { throw noVideo() }
        defer { gst_caps_unref(caps) }
        try adoptCaps(caps)
    }

    /// The error behind a refused state change: it is on the bus already (or arrives shortly).
    private func startFailure() -> MediaError {
        if case .error(let failure)? = pipeline.next(GST_MESSAGE_ERROR, timeout: 1) { return mediaError(failure) }
        return MediaError(.streamFailed, "\(subject.name) could not be started by GStreamer; \(subject.missingAdvice)")
    }

    private func noVideo() -> MediaError {
        MediaError(.unsupportedInput, "\(subject.name) contains no video frames; give a video, an image or an image sequence")
    }

    /// Classifies a bus error for this input.
    private func mediaError(_ failure: GStreamerFailure) -> MediaError {
        if failure.isResourceMissing {
            return failure.mediaError(subject.missingKind, "cannot open \(subject.name)", advice: subject.missingAdvice)
        }
        if failure.isUnsupportedInput {
            return failure.mediaError(.unsupportedInput, "\(subject.name) is not a video or image GStreamer can decode",
                                      advice: "check the file, or install the GStreamer plugin for its format (gstreamer1.0-libav, gstreamer1.0-plugins-good/bad/ugly)")
        }
        if failure.domain == .stream, pipeline.hasUnlinkedInput(element: "convert") {
            // The decoder found streams, but none was video (an audio file): decodebin never linked
            // to the converter, and the data it had nowhere to send stopped the pipeline.
            return noVideo()
        }
        return failure.mediaError(.streamFailed, "reading \(subject.name) failed", advice: "check the input; GStreamer's debug output (GST_DEBUG=3) has details")
    }

    /// Parses `caps` (when they differ from the last ones) into `videoInfo` and the source info.
    private func adoptCaps(_ caps: UnsafeMutablePointer<GstCaps>) throws {
        if caps == videoInfoCaps { return }
        guard gst_video_info_from_caps(&videoInfo, caps) != 0, videoInfo.finfo?.pointee.format == GST_VIDEO_FORMAT_RGB else {
            throw MediaError(.streamFailed, "\(subject.name) produced frames in an unexpected format; check the GStreamer installation (videoconvert)")
        }
        gst_caps_ref(caps)
        if let old = videoInfoCaps { gst_caps_unref(old) }
        videoInfoCaps = caps
        info.width = Int(videoInfo.width)
        info.height = Int(videoInfo.height)
        if videoInfo.fps_n > 0, videoInfo.fps_d > 0 {
            info.framesPerSecond = Double(videoInfo.fps_n) / Double(videoInfo.fps_d)
        }
    }

    // MARK: Reading

    func read(into frame: inout VideoFrame) throws -> Bool {
        if let failure { throw failure }
        if let frameLimit, framesRead >= frameLimit { return false }
        while true {
            if let sample = gst_app_sink_try_pull_sample(appSink, 0) {
                defer { gst_sample_unref(sample) }
                do {
                    try copy(sample, into: &frame)
                } catch let error as MediaError {
                    failure = error
                    throw error
                }
                framesRead += 1
                drainBus()
                return true
            }
            if endOfStream { return false }
            guard let event = pipeline.next(GST_MESSAGE_ERROR | GST_MESSAGE_EOS | GST_MESSAGE_APPLICATION, timeout: timeout) else {
                let error = MediaError(.timedOut, "\(subject.name) delivered no frame within \(Int(timeout)) s after \(framesRead) frames; check the input")
                failure = error
                throw error
            }
            try handle(event)
        }
    }

    /// Takes what is on the bus without waiting: wake-ups are dropped, an end or error is recorded.
    private func drainBus() {
        while failure == nil, let event = pipeline.next(GST_MESSAGE_ERROR | GST_MESSAGE_EOS | GST_MESSAGE_APPLICATION, timeout: 0) {
            // An error found here is thrown by the next `read`.
            try? handle(event)
        }
    }

    private func handle(_ event: BusEvent) throws {
        switch event {
        case .error(let gstFailure):
            let error = mediaError(gstFailure)
            failure = error
            throw error
        case .endOfStream:
            endOfStream = true
        case .wakeUp, .asyncDone, .warning, .other:
            break
        }
    }

    /// Copies the sample's rows into `frame.image`, honouring the stride; reuses the pixel storage.
    private func copy(_ sample: OpaquePointer, into frame: inout VideoFrame) throws {
        guard let caps = gst_sample_get_caps(sample), let buffer = gst_sample_get_buffer(sample) else {
            throw MediaError(.streamFailed, "\(subject.name) delivered a frame without data; check the input")
        }
        try adoptCaps(caps)
        var mapped = GstVideoFrame()
        guard gst_video_frame_map(&mapped, &videoInfo, buffer, GST_MAP_READ) != 0 else {
            throw MediaError(.streamFailed, "a frame of \(subject.name) could not be mapped into memory; check the input")
        }
        defer { gst_video_frame_unmap(&mapped) }
        let width = Int(mapped.info.width), height = Int(mapped.info.height)
        let stride = Int(mapped.info.stride.0), rowBytes = width * 3
        guard let source = mapped.data.0, width > 0, height > 0, stride >= rowBytes else {
            throw MediaError(.streamFailed, "\(subject.name) delivered an empty or malformed frame; check the input")
        }
        frame.image.resize(width: width, height: height)
        frame.image.pixels.withUnsafeMutableBytes { destination in
            guard let target = destination.baseAddress else { return }
            if stride == rowBytes {
                target.copyMemory(from: source, byteCount: rowBytes * height)
            } else {
                for row in 0..<height {
                    (target + row * rowBytes).copyMemory(from: source + row * stride, byteCount: rowBytes)
                }
            }
        }
        frame.timestampMicros = timestampMicros(sample, buffer)
    }

    /// Stream time of the frame (from the start of the input), or frame index / rate when unknown.
    private func timestampMicros(_ sample: OpaquePointer, _ buffer: UnsafeMutablePointer<GstBuffer>) -> UInt64 {
        let none = GstClockTime.max
        let pts = buffer.pointee.pts
        if pts != none {
            var time = pts
            if let segment = gst_sample_get_segment(sample) {
                let streamTime = gst_segment_to_stream_time(segment, GST_FORMAT_TIME, pts)
                if streamTime != none { time = streamTime }
            }
            return UInt64(time / 1000)
        }
        guard let fps = info.framesPerSecond, fps > 0 else { return 0 }
        return UInt64((Double(framesRead) / fps * 1e6).rounded())
    }
}
