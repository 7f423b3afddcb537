import CGStreamer
import Foundation
import Synchronization
import VeilCore
import VeilVision

/// Writes RGB frames, and optionally an audio track, into a video file, or frames into numbered
/// image files, chosen by the output's name:
///
/// - `.mp4` (and `.m4v`): H.264 (x264, 4:2:0 for compatibility) in MP4, audio as AAC-LC;
/// - `.mkv`: H.264 in Matroska, audio as Opus;
/// - `.webm`: VP8 in WebM, audio as Opus;
/// - a name with one `%d` number, e.g. `out/frame_%05d.png` (or `.jpg`): one image per frame, from 0
///   (no audio).
///
/// Timestamps are on the file's timeline, which starts at 0: ``write(_:)`` gives frame `i` the time
/// `i / framesPerSecond`; ``write(_:at:)`` takes the time a frame was rendered (call times, not a
/// perfect grid); ``write(audio:at:)`` takes the time of a chunk's first sample. Audio and video are
/// muxed by these timestamps. The audio track is kept gapless: the writer fills silence before the
/// first chunk (audio that starts after the video starts at its timestamp), across gaps (a muted
/// peer), behind a video that runs more than ``AudioTrackFormat/maximumLag`` ahead, and at the end up
/// to the end of the video.
///
/// Call ``finish()`` at the end: MP4 files are unreadable without it. `write` blocks while an encoder
/// is busy, so call it from a thread of your own, not from Swift's cooperative pool. It never waits
/// for the other track: the muxer's inputs queue what it cannot take yet. Nothing waits longer than
/// ``timeout`` without an answer.
///
/// `@unchecked Sendable`: the GStreamer objects are thread-safe and only touched by the encoder state,
/// which sits behind a `Mutex`; concurrent `write` calls (video on one thread, audio on another) are
/// serialised. Everything else is immutable.
public final class VideoWriter: @unchecked Sendable {
    /// Where the frames go.
    public let url: URL
    /// Width every frame must have.
    public let width: Int
    /// Height every frame must have.
    public let height: Int
    /// Frames per second of the output.
    public let framesPerSecond: Int
    /// The audio track's format; nil when the file has no audio track.
    public let audio: AudioTrackFormat?
    /// Seconds `finish` waits for the encoder to drain, and `write` for a failing pipeline to report.
    public let timeout: Double

    /// The default of ``timeout``.
    public static let defaultTimeout: Double = 30

    /// The latest timestamp accepted, one week: later ones are almost surely a clock that does not
    /// count from the file's start (e.g. time since boot).
    public static let maximumTimestampMicros: UInt64 = 7 * 24 * 3600 * 1_000_000

    private let encoder: Mutex<Encoder>

    /// Opens `url` for writing `width` × `height` frames at `framesPerSecond`, with an audio track when
    /// `audio` is given (video files only). Throws at once when the name's format is unsupported, the
    /// size does not suit the codec, an encoder is missing, or the output cannot be created.
    public convenience init(url: URL, width: Int, height: Int, framesPerSecond: Int, audio: AudioTrackFormat? = nil,
                            timeout: Double = VideoWriter.defaultTimeout) throws {
        try self.init(url: url, width: width, height: height, framesPerSecond: framesPerSecond,
                      container: Container(url), audio: audio, timeout: timeout)
    }

    init(url: URL, width: Int, height: Int, framesPerSecond: Int, container: Container, audio: AudioTrackFormat? = nil,
         timeout: Double) throws {
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
        if let audio {
            guard container.muxer != nil else {
                throw MediaError(.invalidArgument, "\(container.name) output \(url.path) cannot hold audio; write a .mp4, .mkv or .webm file for a track with sound")
            }
            try audio.validate(for: url.path)
        }
        try Self.requireWritableDirectory(for: container.directory(of: url), output: url.path)
        self.url = url
        self.width = width
        self.height = height
        self.framesPerSecond = framesPerSecond
        self.audio = audio
        self.timeout = timeout
        self.encoder = Mutex(try Encoder(url: url, width: width, height: height, framesPerSecond: framesPerSecond,
                                         container: container, audio: audio, timeout: timeout))
    }

    /// Number of frames accepted so far.
    public var framesWritten: Int {
        encoder.withLock { $0.framesWritten }
    }

    /// Appends `image`, which must be `width` × `height`, as frame `i` at `i / framesPerSecond`
    /// (`i` counts the frames written before). Errors of the encoder or the output (disk full,
    /// directory removed) are thrown by the `write` or `finish` that notices them.
    public func write(_ image: RGBImage) throws {
        try requireSize(image)
        try encoder.withLock { try $0.writeNextFrame(image) }
    }

    /// Appends `image`, shown from `timestampMicros` (µs from the file's start) until the next frame.
    /// Timestamps must increase from frame to frame; a frame that is not later than the previous one
    /// is refused with an `.invalidArgument` error, and the writer stays usable. Do not mix with
    /// ``write(_:)``, whose grid knows nothing of these times.
    public func write(_ image: RGBImage, at timestampMicros: UInt64) throws {
        try requireSize(image)
        try Self.requireTimestamp(timestampMicros, of: "video frame", output: url.path)
        try encoder.withLock { try $0.writeFrame(image, atNanos: timestampMicros * 1000) }
    }

    /// Appends audio: `samples` are 16-bit signed PCM, interleaved when stereo (a multiple of
    /// ``AudioTrackFormat/channels``), whose first sample plays at `timestampMicros` (µs from the
    /// file's start). Chunks may come in any size and with gaps (silence fills them); a chunk stamped
    /// earlier than the previous chunk is refused with an `.invalidArgument` error, and the writer
    /// stays usable. Throws `.invalidState` when the writer has no audio track.
    public func write(audio samples: [Int16], at timestampMicros: UInt64) throws {
        guard let audio else {
            throw MediaError(.invalidState, "\(url.path) was opened without an audio track; pass audio: AudioTrackFormat(...) when creating the VideoWriter")
        }
        guard samples.count % audio.channels == 0 else {
            throw MediaError(.invalidArgument, "\(samples.count) audio samples for \(url.path) do not make whole frames of \(audio.channels) channels; write interleaved samples, \(audio.channels) per frame")
        }
        try Self.requireTimestamp(timestampMicros, of: "audio chunk", output: url.path)
        try encoder.withLock { try $0.writeAudio(samples, atMicros: timestampMicros) }
    }

    /// Ends the stream, fills the audio with silence up to the end of the video, waits until
    /// everything is written, and closes the output. Throws when no frame was written (the output
    /// would hold no video). Calling it again does nothing; writing afterwards throws.
    public func finish() throws {
        try encoder.withLock { try $0.finish() }
    }

    private func requireSize(_ image: RGBImage) throws {
        guard image.width == width, image.height == height, image.pixels.count == width * height * 3 else {
            throw MediaError(.invalidArgument, "frame is \(image.width)×\(image.height) but \(url.path) was opened for \(width)×\(height); resize the frame or open another writer")
        }
    }

    private static func requireTimestamp(_ micros: UInt64, of what: String, output: String) throws {
        guard micros <= maximumTimestampMicros else {
            throw MediaError(.invalidArgument, "\(what) for \(output) is stamped \(micros) µs, more than a week into the file; timestamps count from the file's start (0), so subtract the recording's start time")
        }
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
            switch self {
            case .mp4, .matroska, .webm:
                return "\(videoEncoder(framesPerSecond: framesPerSecond)) ! \(muxer ?? "") ! filesink name=sink"
            case .imageSequence(_, let jpeg):
                return "\(jpeg ? "jpegenc quality=95" : "pngenc") ! multifilesink name=sink"
            case .png:
                return "pngenc ! filesink name=sink"
            }
        }

        /// The video encoder of a video container, from raw video on.
        private func videoEncoder(framesPerSecond: Int) -> String {
            switch self {
            case .webm:
                return "video/x-raw,format=I420 ! vp8enc deadline=1 cpu-used=4 end-usage=cq cq-level=8 target-bitrate=20000000 keyframe-max-dist=\(2 * framesPerSecond)"
            default:
                return "video/x-raw,format=I420 ! x264enc speed-preset=veryfast pass=qual quantizer=20 key-int-max=\(2 * framesPerSecond)"
            }
        }

        /// The muxer of a video container; nil for image outputs.
        var muxer: String? {
            switch self {
            case .mp4: return "mp4mux"
            case .matroska: return "matroskamux"
            case .webm: return "webmmux"
            case .imageSequence, .png: return nil
            }
        }

        /// Video and audio: `appsrc name=src` (RGB) and `appsrc name=audiosrc` (S16LE), each encoded
        /// and queued without limit into the muxer, which ends in `filesink name=sink`. The queues
        /// let one track run ahead while the muxer waits for the other, so pushing video never
        /// blocks on audio or the other way round; `AudioTimeline` bounds how far video runs ahead.
        /// Also returns the audio encoder's delay (see `AudioEncoder`).
        func audioVideoPipeline(framesPerSecond: Int, audio: AudioTrackFormat) throws -> (description: String, encoderDelayFrames: Int) {
            guard let muxer else {
                throw MediaError(.invalidArgument, "\(name) output cannot hold audio; write a .mp4, .mkv or .webm file")
            }
            let encoder = try audioEncoder(channels: audio.channels)
            let unbounded = "queue max-size-buffers=0 max-size-bytes=0 max-size-time=0"
            let description = """
                appsrc name=src format=time block=true max-bytes=0 max-buffers=4 \
                ! videoconvert ! \(videoEncoder(framesPerSecond: framesPerSecond)) ! \(unbounded) ! mux. \
                appsrc name=audiosrc format=time block=true max-bytes=0 max-buffers=8 \
                ! audioconvert ! audioresample ! \(encoder.description) ! \(unbounded) ! mux. \
                \(muxer) name=mux ! filesink name=sink
                """
            return (description, encoder.delayFrames)
        }

        /// An audio encoder and the silence it puts before the first sample ("priming"), in frames.
        private struct AudioEncoder {
            var description: String
            var delayFrames: Int
        }

        /// AAC-LC for MP4, which every player handles; Opus for Matroska and WebM.
        ///
        /// Opus records its delay in the stream (pre-skip), so decoders remove it. mp4mux (1.22)
        /// writes no edit list for AAC's priming, so players would play the audio late by the
        /// encoder's delay (measured: 1024 frames for FFmpeg's avenc_aac, 21 ms at 48 kHz; 1600 for
        /// voaacenc); the writer compensates by starting the track that much into the timeline.
        /// FFmpeg's encoder (gstreamer1.0-libav) comes first: it sounds better and drains fully.
        private func audioEncoder(channels: Int) throws -> AudioEncoder {
            switch self {
            case .mp4:
                let bitrate = 64_000 * channels
                // gst-libav turns FFmpeg's "M/S stereo: auto" into a boolean defaulting to forced
                // M/S, which (FFmpeg 5.1) loses the side signal: left-only sound comes out on both.
                if GStreamer.hasElement("avenc_aac") {
                    return AudioEncoder(description: "avenc_aac bitrate=\(bitrate) aac-ms=false", delayFrames: 1024)
                }
                if GStreamer.hasElement("voaacenc") { return AudioEncoder(description: "voaacenc bitrate=\(bitrate)", delayFrames: 1600) }
                throw MediaError(.gstreamerUnavailable, "no AAC encoder for the audio of \(name): install gstreamer1.0-libav (avenc_aac), or write .mkv or .webm (Opus) instead")
            default:
                guard GStreamer.hasElement("opusenc") else {
                    throw MediaError(.gstreamerUnavailable, "no Opus encoder for the audio of \(name): install gstreamer1.0-plugins-base (opusenc)")
                }
                return AudioEncoder(description: "opusenc bitrate=\(48_000 * channels)", delayFrames: 0)
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

/// Owns the encoding pipeline: appsrc → videoconvert → encoder → muxer → file sink, and for an
/// audio track a second appsrc → audioconvert → encoder into the same muxer.
///
/// Flow control: each appsrc blocks `push_buffer` while its queue is full (four frames, eight audio
/// buffers). If the pipeline fails while a push is blocked, the bus's sync handler lifts the queue
/// limits so the push returns and the error (now on the bus) is thrown instead of hanging.
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
    /// Timestamp of the last frame pushed, and where the video ends (its timestamp plus duration).
    private var lastFramePTS: GstClockTime?
    private var videoEndNanos: UInt64 = 0
    /// The audio branch, when the file has an audio track.
    private var audio: AudioTrack?

    /// An audio branch: its appsrc, format, encoder delay and where each chunk goes.
    private struct AudioTrack {
        let source: UnsafeMutablePointer<GstElement>
        let format: AudioTrackFormat
        /// Frames of priming the encoder adds and the muxer does not record. The first this many
        /// frames of the timeline are not pushed and the rest are stamped that much earlier, so the
        /// priming takes their place and every later sample plays at its time.
        let encoderDelayFrames: Int
        var timeline: AudioTimeline
    }

    init(url: URL, width: Int, height: Int, framesPerSecond: Int, container: VideoWriter.Container,
         audio audioFormat: AudioTrackFormat?, timeout: Double) throws {
        outputName = url.path
        self.framesPerSecond = framesPerSecond
        self.timeout = timeout
        let description: String
        var encoderDelayFrames = 0
        if let audioFormat {
            (description, encoderDelayFrames) = try container.audioVideoPipeline(framesPerSecond: framesPerSecond, audio: audioFormat)
        } else {
            description = """
                appsrc name=src format=time block=true max-bytes=0 max-buffers=4 \
                ! videoconvert ! \(container.encoderAndSink(framesPerSecond: framesPerSecond))
                """
        }
        let pipeline = try MediaPipeline(description: description)
        let source = try pipeline.element(named: "src")
        try GStreamer.setString(pipeline.element(named: "sink"), "location", container.location(of: url))
        var audio: AudioTrack?
        if let audioFormat {
            let audioSource = try pipeline.element(named: "audiosrc")
            var audioInfo = GstAudioInfo()
            // Positioned channels: audioconvert would mix unpositioned stereo into both outputs.
            let positions = audioFormat.channels == 1 ? [GST_AUDIO_CHANNEL_POSITION_MONO]
                : [GST_AUDIO_CHANNEL_POSITION_FRONT_LEFT, GST_AUDIO_CHANNEL_POSITION_FRONT_RIGHT]
            gst_audio_info_set_format(&audioInfo, GST_AUDIO_FORMAT_S16LE, gint(audioFormat.sampleRate), gint(audioFormat.channels), positions)
            guard let audioCaps = gst_audio_info_to_caps(&audioInfo) else {
                throw MediaError(.gstreamerUnavailable, "GStreamer could not describe \(audioFormat.channels)-channel audio at \(audioFormat.sampleRate) Hz; check the GStreamer installation")
            }
            gst_app_src_set_caps(UnsafeMutableRawPointer(audioSource).assumingMemoryBound(to: GstAppSrc.self), audioCaps)
            gst_caps_unref(audioCaps)
            audio = AudioTrack(source: audioSource, format: audioFormat, encoderDelayFrames: encoderDelayFrames,
                               timeline: AudioTimeline(sampleRate: audioFormat.sampleRate, maximumLag: audioFormat.maximumLag))
        }

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
        self.audio = audio
        let config = gst_buffer_pool_get_config(pool)
        gst_buffer_pool_config_set_params(config, caps, guint(videoInfo.size), 2, 0)
        guard gst_buffer_pool_set_config(pool, config) != 0, gst_buffer_pool_set_active(pool, 1) != 0 else {
            throw MediaError(.gstreamerUnavailable, "GStreamer could not set up frame buffers; check the GStreamer installation")
        }

        pipeline.unblockOnError([source, audio?.source].compactMap { $0 })

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

    private func appSource(_ element: UnsafeMutablePointer<GstElement>) -> UnsafeMutablePointer<GstAppSrc> {
        UnsafeMutableRawPointer(element).assumingMemoryBound(to: GstAppSrc.self)
    }

    // MARK: Video

    /// Frame `framesWritten` on the `i / framesPerSecond` grid.
    func writeNextFrame(_ image: RGBImage) throws {
        let start = gst_util_uint64_scale(guint64(framesWritten), 1_000_000_000, guint64(framesPerSecond))
        let end = gst_util_uint64_scale(guint64(framesWritten + 1), 1_000_000_000, guint64(framesPerSecond))
        try writeFrame(image, pts: start, duration: end - start)
    }

    /// A frame at an explicit time; it lasts a nominal frame, muxers time it by the next frame.
    func writeFrame(_ image: RGBImage, atNanos pts: UInt64) throws {
        try writeFrame(image, pts: GstClockTime(pts), duration: gst_util_uint64_scale(1, 1_000_000_000, guint64(framesPerSecond)))
    }

    private func writeFrame(_ image: RGBImage, pts: GstClockTime, duration: GstClockTime) throws {
        try requireWritable()
        if let lastFramePTS, pts <= lastFramePTS {
            throw MediaError(.invalidArgument, "video frame at \(pts / 1000) µs for \(outputName) is not later than the previous frame at \(lastFramePTS / 1000) µs; give each frame a later timestamp")
        }
        // A muted peer must not hold the video back: fill the audio up to the allowed lag first.
        if var track = audio {
            let silence = track.timeline.fill(forVideoAt: UInt64(pts))
            audio = track
            try pushSilence(silence, track: track)
        }

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
        buffer.pointee.pts = pts
        buffer.pointee.duration = duration
        try push(buffer, to: source, what: "frames")
        lastFramePTS = pts
        videoEndNanos = max(videoEndNanos, UInt64(pts + duration))
        framesWritten += 1
        try checkBus()
    }

    // MARK: Audio

    func writeAudio(_ samples: [Int16], atMicros timestamp: UInt64) throws {
        try requireWritable()
        guard var track = audio else {
            throw MediaError(.invalidState, "\(outputName) was opened without an audio track; pass audio: AudioTrackFormat(...) when creating the VideoWriter")
        }
        let frames = samples.count / track.format.channels
        guard frames > 0 else { return }
        let placement = try track.timeline.place(frames: frames, at: timestamp)
        audio = track
        try pushSilence(placement.silence, track: track)
        let kept = placement.droppedFrames..<frames
        try samples.withUnsafeBufferPointer { all in
            try pushAudio(frames: placement.startFrame..<placement.startFrame + kept.count, track: track) { target, skipped, count in
                // `skipped` frames at the start fall into the encoder's delay.
                let channels = track.format.channels
                guard let base = all.baseAddress else { return }
                let first = (kept.lowerBound + skipped) * channels
                #if _endian(little)
                target.copyMemory(from: base + first, byteCount: count * channels * MemoryLayout<Int16>.size)
                #else
                let destination = target.bindMemory(to: Int16.self, capacity: count * channels)
                for i in 0..<count * channels { destination[i] = base[first + i].littleEndian }
                #endif
            }
        }
    }

    /// Pushes silence over `frames`, in buffers of at most a second.
    private func pushSilence(_ frames: Range<Int>, track: AudioTrack) throws {
        var start = frames.lowerBound
        while start < frames.upperBound {
            let end = min(frames.upperBound, start + track.format.sampleRate)
            try pushAudio(frames: start..<end, track: track) { target, _, count in
                target.initializeMemory(as: UInt8.self, repeating: 0, count: count * track.format.channels * MemoryLayout<Int16>.size)
            }
            start = end
        }
    }

    /// Pushes one audio buffer covering `frames` of the timeline, less the part inside the encoder's
    /// delay. `fill` gets the buffer, how many leading frames were skipped, and how many to write.
    private func pushAudio(frames: Range<Int>, track: AudioTrack,
                           fill: (UnsafeMutableRawPointer, _ skipped: Int, _ count: Int) throws -> Void) throws {
        let delay = track.encoderDelayFrames
        let pushed = max(frames.lowerBound, delay)..<max(frames.upperBound, delay)
        guard !pushed.isEmpty else { return }
        let size = pushed.count * track.format.channels * MemoryLayout<Int16>.size
        guard let buffer = gst_buffer_new_allocate(nil, gsize(size), nil) else {
            throw fail(MediaError(.streamFailed, "no memory for \(pushed.count) audio frames of \(outputName)"))
        }
        var map = GstMapInfo()
        guard gst_buffer_map(buffer, &map, GST_MAP_WRITE) != 0, let target = map.data else {
            gst_buffer_unref(buffer)
            throw fail(MediaError(.streamFailed, "an audio buffer for \(outputName) could not be mapped into memory"))
        }
        do {
            try fill(UnsafeMutableRawPointer(target), pushed.lowerBound - frames.lowerBound, pushed.count)
        } catch {
            gst_buffer_unmap(buffer, &map)
            gst_buffer_unref(buffer)
            throw error
        }
        gst_buffer_unmap(buffer, &map)
        let rate = guint64(track.format.sampleRate)
        let first = guint64(pushed.lowerBound - delay), end = guint64(pushed.upperBound - delay)
        let start = gst_util_uint64_scale(first, 1_000_000_000, rate)
        buffer.pointee.pts = start
        buffer.pointee.duration = gst_util_uint64_scale(end, 1_000_000_000, rate) - start
        buffer.pointee.offset = first
        buffer.pointee.offset_end = end
        try push(buffer, to: track.source, what: "audio")
    }

    // MARK: Both

    /// Hands `buffer` to an appsrc (which takes it); blocks while the appsrc's queue is full.
    private func push(_ buffer: UnsafeMutablePointer<GstBuffer>, to element: UnsafeMutablePointer<GstElement>, what: String) throws {
        let result = gst_app_src_push_buffer(appSource(element), buffer)
        guard result == GST_FLOW_OK else {
            if case .error(let failure)? = pipeline.next(GST_MESSAGE_ERROR, timeout: 1) { throw fail(mediaError(failure)) }
            throw fail(MediaError(.streamFailed, "the encoder for \(outputName) stopped accepting \(what); check the output"))
        }
    }

    private func requireWritable() throws {
        guard !finished else {
            throw MediaError(.invalidState, "cannot write to \(outputName) after finish(); open a new VideoWriter")
        }
        if let failure { throw failure }
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
        if var track = audio {
            let silence = track.timeline.fill(throughNanos: videoEndNanos)
            audio = track
            try pushSilence(silence, track: track)
            _ = gst_app_src_end_of_stream(appSource(track.source))
        }
        _ = gst_app_src_end_of_stream(appSource(source))
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
