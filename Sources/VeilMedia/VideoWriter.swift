import CGStreamer
import Foundation
import Synchronization
import VeilCore

/// Writes RGB frames into a video file or numbered image files, chosen by the output's name:
///
/// - `.mp4` (and `.m4v`): H.264 (x264, 4:2:0 for compatibility) in MP4;
/// - `.mkv`: H.264 in Matroska;
/// - `.webm`: VP8 in WebM;
/// - a name with one `%d` number, e.g. `out/frame_%05d.png` (or `.jpg`): one image per frame, from 0.
///
/// Frame `i` gets the timestamp `i / framesPerSecond`. Call ``finish()`` at the end: MP4 files are
/// unreadable without it. `write` blocks while the encoder is busy, so call it from a thread of your
/// own, not from Swift's cooperative pool. Nothing waits longer than ``timeout`` without an answer.
///
/// `@unchecked Sendable`: the GStreamer objects are thread-safe and only touched by the encoder state,
/// which sits behind a `Mutex`; concurrent `write` calls are serialised (their order is then up to the
/// callers). Everything else is immutable.
public final class VideoWriter: @unchecked Sendable {
    /// Where the frames go.
    public let url: URL
    /// Width every frame must have.
    public let width: Int
    /// Height every frame must have.
    public let height: Int
    /// Frames per second of the output.
    public let framesPerSecond: Int
    /// Seconds `finish` waits for the encoder to drain, and `write` for a failing pipeline to report.
    public let timeout: Double

    /// The default of ``timeout``.
    public static let defaultTimeout: Double = 30

    private let encoder: Mutex<Encoder>

    /// Opens `url` for writing `width` × `height` frames at `framesPerSecond`. Throws at once when the
    /// name's format is unsupported, the size does not suit the codec, or the output cannot be created.
    public convenience init(url: URL, width: Int, height: Int, framesPerSecond: Int,
                            timeout: Double = VideoWriter.defaultTimeout) throws {
        try self.init(url: url, width: width, height: height, framesPerSecond: framesPerSecond,
                      container: Container(url), timeout: timeout)
    }

    init(url: URL, width: Int, height: Int, framesPerSecond: Int, container: Container, timeout: Double) throws {
        try GStreamer.validate(timeout: timeout)
        guard (1...16384).contains(width), (1...16384).contains(height) else {
            throw MediaError(.invalidArgument, "frame size \(width)×\(height) for \(url.path) is out of range; give 1…16384 pixels per side")
        }
        guard (1...1000).contains(framesPerSecond) else {
            throw MediaError(.invalidArgument, "frame rate \(framesPerSecond) for \(url.path) is out of range; give 1…1000")
        }
        if container.needsEvenSize, width % 2 != 0 || height % 2 != 0 {
            throw MediaError(.invalidArgument, "\(container.name) needs an even width and height, but the frames are \(width)×\(height); crop or pad them by one pixel")
        }
        try Self.requireWritableDirectory(for: container.directory(of: url), output: url.path)
        self.url = url
        self.width = width
        self.height = height
        self.framesPerSecond = framesPerSecond
        self.timeout = timeout
        self.encoder = Mutex(try Encoder(url: url, width: width, height: height, framesPerSecond: framesPerSecond,
                                         container: container, timeout: timeout))
    }

    /// Number of frames accepted so far.
    public var framesWritten: Int {
        encoder.withLock { $0.framesWritten }
    }

    /// Appends `image`, which must be `width` × `height`. Errors of the encoder or the output
    /// (disk full, directory removed) are thrown by the `write` or `finish` that notices them.
    public func write(_ image: RGBImage) throws {
        guard image.width == width, image.height == height, image.pixels.count == width * height * 3 else {
            throw MediaError(.invalidArgument, "frame is \(image.width)×\(image.height) but \(url.path) was opened for \(width)×\(height); resize the frame or open another writer")
        }
        try encoder.withLock { try $0.write(image) }
    }

    /// Ends the stream, waits until everything is written, and closes the output. Throws when no
    /// frame was written (the output would hold no video). Calling it again does nothing; writing
    /// afterwards throws.
    public func finish() throws {
        try encoder.withLock { try $0.finish() }
    }

    private static func requireWritableDirectory(for directory: String, output: String) throws {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw MediaError(.notWritable, "cannot write \(output): the directory \(directory) does not exist; create it first")
        }
        guard FileManager.default.isWritableFile(atPath: directory) else {
            throw MediaError(.notWritable, "cannot write \(output): the directory \(directory) is not writable; check its permissions or pick another")
        }
    }
}

// MARK: - Output formats

extension VideoWriter {
    /// The output format, chosen from the output's name.
    enum Container {
        case mp4, matroska, webm
        case imageSequence(FramePattern, jpeg: Bool)
        /// One PNG file (used by `ImageIO.savePNG`).
        case png

        init(_ url: URL) throws {
            let path = url.path
            if path.contains("%") {
                let pattern = try FramePattern(path)
                switch pattern.fileExtension {
                case "png": self = .imageSequence(pattern, jpeg: false)
                case "jpg", "jpeg": self = .imageSequence(pattern, jpeg: true)
                default:
                    throw MediaError(.invalidArgument, "cannot write \(path): numbered frames must be .png or .jpg files, e.g. frame_%05d.png")
                }
                return
            }
            switch url.pathExtension.lowercased() {
            case "mp4", "m4v": self = .mp4
            case "mkv": self = .matroska
            case "webm": self = .webm
            case "png":
                throw MediaError(.invalidArgument, "cannot write \(path) as a video: for numbered PNG frames give a pattern like frame_%05d.png; for one image use ImageIO.savePNG")
            default:
                throw MediaError(.invalidArgument, "cannot write \(path): unsupported extension '\(url.pathExtension)'; use .mp4, .mkv, .webm or a pattern like frame_%05d.png")
            }
        }

        /// For messages.
        var name: String {
            switch self {
            case .mp4: return "MP4 (H.264)"
            case .matroska: return "Matroska (H.264)"
            case .webm: return "WebM (VP8)"
            case .imageSequence(_, let jpeg): return jpeg ? "JPEG sequence" : "PNG sequence"
            case .png: return "PNG"
            }
        }

        /// H.264 in 4:2:0 needs both sides even.
        var needsEvenSize: Bool {
            switch self {
            case .mp4, .matroska: return true
            default: return false
            }
        }

        func directory(of url: URL) -> String {
            if case .imageSequence(let pattern, _) = self { return pattern.directory }
            return url.deletingLastPathComponent().path
        }

        /// The pipeline after `appsrc name=src ! videoconvert`, ending in an element named `sink`
        /// whose `location` is the output. Only numbers are interpolated.
        func encoderAndSink(framesPerSecond: Int) -> String {
            let h264 = "video/x-raw,format=I420 ! x264enc speed-preset=veryfast pass=qual quantizer=20 key-int-max=\(2 * framesPerSecond)"
            switch self {
            case .mp4: return "\(h264) ! mp4mux ! filesink name=sink"
            case .matroska: return "\(h264) ! matroskamux ! filesink name=sink"
            case .webm:
                return "video/x-raw,format=I420 ! vp8enc deadline=1 cpu-used=4 end-usage=cq cq-level=8 target-bitrate=20000000 keyframe-max-dist=\(2 * framesPerSecond) ! webmmux ! filesink name=sink"
            case .imageSequence(_, let jpeg):
                return "\(jpeg ? "jpegenc quality=95" : "pngenc") ! multifilesink name=sink"
            case .png:
                return "pngenc ! filesink name=sink"
            }
        }

        /// The `location` property GStreamer's sink gets.
        func location(of url: URL) -> String {
            if case .imageSequence(let pattern, _) = self { return pattern.pattern }
            return url.path
        }
    }
}

// MARK: - The GStreamer side

/// Owns the encoding pipeline: appsrc → videoconvert → encoder → muxer → file sink.
///
/// Flow control: appsrc blocks `push_buffer` while four frames are queued. If the pipeline fails
/// while a push is blocked, the bus's sync handler lifts the queue limit so the push returns and the
/// error (now on the bus) is thrown instead of hanging.
private final class Encoder {
    private let pipeline: MediaPipeline
    private let source: UnsafeMutablePointer<GstElement>
    private let pool: UnsafeMutablePointer<GstBufferPool>
    private let videoInfo: GstVideoInfo
    private let outputName: String
    private let framesPerSecond: Int
    private let timeout: Double
    private(set) var framesWritten = 0
    private var finished = false
    private var failure: MediaError?

    init(url: URL, width: Int, height: Int, framesPerSecond: Int, container: VideoWriter.Container, timeout: Double) throws {
        outputName = url.path
        self.framesPerSecond = framesPerSecond
        self.timeout = timeout
        let pipeline = try MediaPipeline(description: """
            appsrc name=src format=time block=true max-bytes=0 max-buffers=4 \
            ! videoconvert ! \(container.encoderAndSink(framesPerSecond: framesPerSecond))
            """)
        let source = try pipeline.element(named: "src")
        try GStreamer.setString(pipeline.element(named: "sink"), "location", container.location(of: url))

        var info = GstVideoInfo()
        guard gst_video_info_set_format(&info, GST_VIDEO_FORMAT_RGB, guint(width), guint(height)) != 0 else {
            throw MediaError(.invalidArgument, "GStreamer rejected the frame size \(width)×\(height) for \(url.path); pick another size")
        }
        info.fps_n = gint(framesPerSecond)
        info.fps_d = 1
        guard let caps = gst_video_info_to_caps(&info) else {
            throw MediaError(.gstreamerUnavailable, "GStreamer could not describe RGB frames; check the GStreamer installation")
        }
        defer { gst_caps_unref(caps) }
        gst_app_src_set_caps(UnsafeMutableRawPointer(source).assumingMemoryBound(to: GstAppSrc.self), caps)

        // Frames are copied into buffers from a pool, so steady-state writing allocates nothing.
        guard let pool = gst_buffer_pool_new() else {
            throw MediaError(.gstreamerUnavailable, "GStreamer could not create a buffer pool; check the GStreamer installation")
        }
        // From here on every stored property is set, so deinit releases them if a step below throws.
        self.pipeline = pipeline
        self.source = source
        self.pool = pool
        self.videoInfo = info
        let config = gst_buffer_pool_get_config(pool)
        gst_buffer_pool_config_set_params(config, caps, guint(videoInfo.size), 2, 0)
        guard gst_buffer_pool_set_config(pool, config) != 0, gst_buffer_pool_set_active(pool, 1) != 0 else {
            throw MediaError(.gstreamerUnavailable, "GStreamer could not set up frame buffers; check the GStreamer installation")
        }

        // The handler runs on the thread that posts the error; the appsrc outlives it because
        // MediaPipeline removes the handler before releasing its elements.
        gst_bus_set_sync_handler(pipeline.bus, { _, message, appSource in
            if let message, let appSource, message.pointee.type == GST_MESSAGE_ERROR {
                gst_app_src_set_max_buffers(appSource.assumingMemoryBound(to: GstAppSrc.self), 0)
            }
            return GST_BUS_PASS
        }, UnsafeMutableRawPointer(source), nil)

        if pipeline.setState(GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE {
            if case .error(let failure)? = pipeline.next(GST_MESSAGE_ERROR, timeout: 1) {
                throw mediaError(failure)
            }
            throw MediaError(.notWritable, "cannot write \(outputName): GStreamer could not start the encoder; check the path and the GStreamer installation")
        }
        // Some failures (a sink that cannot open its file) are reported just after the state change.
        try checkBus()
    }

    deinit {
        pipeline.setState(GST_STATE_NULL)
        gst_buffer_pool_set_active(pool, 0)
        gst_object_unref(UnsafeMutableRawPointer(pool))
    }

    private var appSource: UnsafeMutablePointer<GstAppSrc> {
        UnsafeMutableRawPointer(source).assumingMemoryBound(to: GstAppSrc.self)
    }

    func write(_ image: RGBImage) throws {
        guard !finished else {
            throw MediaError(.invalidState, "cannot write to \(outputName) after finish(); open a new VideoWriter")
        }
        if let failure { throw failure }
        try checkBus()

        var buffer: UnsafeMutablePointer<GstBuffer>?
        guard gst_buffer_pool_acquire_buffer(pool, &buffer, nil) == GST_FLOW_OK, let buffer else {
            throw fail(MediaError(.streamFailed, "no frame buffer available for \(outputName); the encoder stopped"))
        }
        var map = GstMapInfo()
        guard gst_buffer_map(buffer, &map, GST_MAP_WRITE) != 0, let target = map.data else {
            gst_buffer_unref(buffer)
            throw fail(MediaError(.streamFailed, "a frame buffer for \(outputName) could not be mapped into memory"))
        }
        let rowBytes = Int(videoInfo.width) * 3, stride = Int(videoInfo.stride.0), rows = Int(videoInfo.height)
        image.pixels.withUnsafeBytes { pixels in
            guard let source = pixels.baseAddress else { return }
            if stride == rowBytes {
                UnsafeMutableRawPointer(target).copyMemory(from: source, byteCount: rowBytes * rows)
            } else {
                for row in 0..<rows {
                    UnsafeMutableRawPointer(target + row * stride).copyMemory(from: source + row * rowBytes, byteCount: rowBytes)
                }
            }
        }
        gst_buffer_unmap(buffer, &map)
        let start = gst_util_uint64_scale(guint64(framesWritten), 1_000_000_000, guint64(framesPerSecond))
        let end = gst_util_uint64_scale(guint64(framesWritten + 1), 1_000_000_000, guint64(framesPerSecond))
        buffer.pointee.pts = start
        buffer.pointee.duration = end - start

        // push_buffer takes the buffer; it blocks while the queue is full.
        let result = gst_app_src_push_buffer(appSource, buffer)
        guard result == GST_FLOW_OK else {
            if case .error(let failure)? = pipeline.next(GST_MESSAGE_ERROR, timeout: 1) { throw fail(mediaError(failure)) }
            throw fail(MediaError(.streamFailed, "the encoder for \(outputName) stopped accepting frames; check the output"))
        }
        framesWritten += 1
        try checkBus()
    }

    func finish() throws {
        if finished { return }
        finished = true
        defer { pipeline.setState(GST_STATE_NULL) }
        if let failure { throw failure }
        guard framesWritten > 0 else {
            throw fail(MediaError(.invalidState, "no frames were written to \(outputName), so it holds no video; write at least one frame before finish()"))
        }
        _ = gst_app_src_end_of_stream(appSource)
        guard let event = pipeline.next(GST_MESSAGE_ERROR | GST_MESSAGE_EOS, timeout: timeout) else {
            throw fail(MediaError(.timedOut, "writing \(outputName) did not complete within \(Int(timeout)) s; the file is probably incomplete"))
        }
        if case .error(let failure) = event { throw fail(mediaError(failure)) }
    }

    /// Throws an error GStreamer already reported, without waiting.
    private func checkBus() throws {
        if case .error(let failure)? = pipeline.next(GST_MESSAGE_ERROR, timeout: 0) { throw fail(mediaError(failure)) }
    }

    /// Remembers `error` so every later call throws it too.
    private func fail(_ error: MediaError) -> MediaError {
        failure = error
        return error
    }

    private func mediaError(_ failure: GStreamerFailure) -> MediaError {
        if failure.isNotWritable {
            return failure.mediaError(.notWritable, "cannot write \(outputName)",
                                      advice: "check that the directory exists, is writable and has free space")
        }
        return failure.mediaError(.streamFailed, "encoding \(outputName) failed",
                                  advice: "check the frames and the GStreamer installation (GST_DEBUG=3 shows details)")
    }
}
