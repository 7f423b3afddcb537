import CGStreamer
import VeilCore
import VeilVision

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

/// Reads RGB frames from a pipeline that ends in `appsink name=sink` with `format=RGB` caps; the
/// waiting, start-up and error mapping are the `AppSinkReader`'s.
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

    private let reader: AppSinkReader
    private let subject: Subject
    /// Filled in at start-up; owners may refine it (e.g. the exact frame count of a sequence).
    var info: SourceInfo
    /// Frames to deliver at most (1 for a still image, even if the file turns out to be a video).
    var frameLimit: Int?
    /// The caps `videoInfo` was computed from (a reference the reader owns), to parse caps only when they change.
    private var videoInfoCaps: UnsafeMutablePointer<GstCaps>?
    private var videoInfo = GstVideoInfo()

    /// Starts `pipeline` and waits (at most `timeout` seconds) until it knows the frame format:
    /// preroll for files, the first frame for live sources.
    init(pipeline: MediaPipeline, subject: Subject, live: Bool, timeout: Double) throws {
        let noVideo = MediaError(.unsupportedInput, "\(subject.name) contains no video frames; give a video, an image or an image sequence")
        let wording = AppSinkReader.Wording(name: subject.name, missingKind: subject.missingKind, missingAdvice: subject.missingAdvice,
                                            prerollAdvice: "check that it is a readable video or image", startAdvice: subject.missingAdvice,
                                            undecodable: "is not a video or image GStreamer can decode", missingStream: noVideo,
                                            input: "input", sample: "frame", samples: "frames")
        self.reader = try AppSinkReader(pipeline: pipeline, wording: wording, timeout: timeout)
        self.subject = subject
        self.info = SourceInfo(width: 0, height: 0, isLive: live)

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

    private var noVideo: MediaError { reader.wording.missingStream }

    // MARK: Start-up

    private func startPrerolled() throws {
        try reader.preroll()
        guard let sample = gst_app_sink_try_pull_preroll(reader.appSink, 0) else { throw noVideo }
        defer { gst_sample_unref(sample) }
        guard let caps = gst_sample_get_caps(sample) else { throw noVideo }
        try adoptCaps(caps)
        if let nanoseconds = reader.pipeline.durationNanoseconds() {
            let seconds = Double(nanoseconds) / 1e9
            info.durationSeconds = seconds
            if let fps = info.framesPerSecond { info.frameCount = Int((seconds * fps).rounded()) }
        }
        try reader.play()
    }

    private func startLive() throws {
        try reader.play()
        // The first frame fixes the format. Its wake-up arrives after it is queued, so its caps are
        // on the appsink's pad by then; `read` pulls the frame itself.
        let timeout = reader.timeout
        waiting: while true {
            guard let event = reader.pipeline.next(GST_MESSAGE_ERROR | GST_MESSAGE_EOS | GST_MESSAGE_APPLICATION, timeout: timeout) else {
                throw MediaError(.timedOut, "\(subject.name) delivered no frame within \(Int(timeout)) s; \(subject.missingAdvice)")
            }
            switch event {
            case .error(let failure): throw reader.mediaError(failure)
            case .endOfStream: throw noVideo
            case .wakeUp: break waiting
            case .asyncDone, .warning, .other: continue
            }
        }
        guard let pad = gst_element_get_static_pad(reader.sink, "sink") else { throw noVideo }
        defer { gst_object_unref(UnsafeMutableRawPointer(pad)) }
        guard let caps = gst_pad_get_current_caps(pad) else { throw noVideo }
        defer { gst_caps_unref(caps) }
        try adoptCaps(caps)
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
        if let failure = reader.failure { throw failure }
        if let frameLimit, reader.samplesRead >= frameLimit { return false }
        return try reader.pull { try copy($0, into: &frame) } != nil
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
        if let micros = AppSinkReader.streamTimeMicros(sample, buffer) { return micros }
        guard let fps = info.framesPerSecond, fps > 0 else { return 0 }
        return UInt64((Double(reader.samplesRead) / fps * 1e6).rounded())
    }
}
