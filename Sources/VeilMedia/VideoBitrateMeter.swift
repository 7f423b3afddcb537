import CGStreamer
import VeilCore
import VeilVision

/// A video codec set up the way a sender would set it up, for `VideoBitrateMeter`.
///
/// Both codecs are configured for real-time use (no look-ahead, no B-frames, one pass), as a video
/// call encodes: VP8 with libvpx's real-time deadline, H.264 with x264's `zerolatency` tuning in the
/// constrained baseline profile that WebRTC negotiates.
public struct VideoEncoding: Sendable, Equatable, CustomStringConvertible {
    /// The compression format.
    public enum Codec: String, Sendable, Equatable {
        /// VP8 (libvpx through GStreamer's `vp8enc`, gstreamer1.0-plugins-good).
        case vp8 = "VP8"
        /// H.264 (x264 through GStreamer's `x264enc`, gstreamer1.0-plugins-ugly).
        case h264 = "H.264"
    }

    /// How the encoder decides how many bytes each frame gets.
    public enum RateControl: Sendable, Equatable {
        /// Aim at a bitrate in bits per second, as a call's congestion control sets it.
        case bitrate(Int)
        /// Constant quality: VP8's `cq-level` (0…63) or x264's CRF (0…51); lower is better.
        case quality(Int)
    }

    /// The compression format.
    public var codec: Codec
    /// Bitrate target or constant quality.
    public var rateControl: RateControl
    /// The longest run of frames between two keyframes.
    public var keyframeInterval: Int

    /// An encoding; `keyframeInterval` is in frames.
    public init(codec: Codec, rateControl: RateControl, keyframeInterval: Int) {
        self.codec = codec; self.rateControl = rateControl; self.keyframeInterval = keyframeInterval
    }

    /// For reports: "VP8 500 kbit/s", "H.264 CRF 23".
    public var description: String {
        switch (codec, rateControl) {
        case (_, .bitrate(let bits)): return "\(codec.rawValue) \(bits / 1000) kbit/s"
        case (.vp8, .quality(let level)): return "VP8 cq-level \(level)"
        case (.h264, .quality(let level)): return "H.264 CRF \(level)"
        }
    }

    /// Throws unless every setting is in the range its encoder accepts.
    func validate() throws {
        guard (1...100_000).contains(keyframeInterval) else {
            throw MediaError(.invalidArgument, "keyframe interval \(keyframeInterval) frames is out of range; give 1…100000")
        }
        switch (codec, rateControl) {
        case (_, .bitrate(let bits)):
            guard (10_000...100_000_000).contains(bits) else {
                throw MediaError(.invalidArgument, "bitrate \(bits) bit/s is out of range; give 10 kbit/s…100 Mbit/s")
            }
        case (.vp8, .quality(let level)):
            guard (0...63).contains(level) else {
                throw MediaError(.invalidArgument, "VP8 cq-level \(level) is out of range; give 0…63")
            }
        case (.h264, .quality(let level)):
            guard (0...51).contains(level) else {
                throw MediaError(.invalidArgument, "H.264 CRF \(level) is out of range; give 0…51")
            }
        }
    }

    /// The GStreamer elements this encoding needs, and the Debian package each comes in.
    var requiredElements: [(element: String, package: String)] {
        switch codec {
        case .vp8: return [("vp8enc", "gstreamer1.0-plugins-good"), ("rtpvp8pay", "gstreamer1.0-plugins-good")]
        case .h264: return [("x264enc", "gstreamer1.0-plugins-ugly"), ("rtph264pay", "gstreamer1.0-plugins-good")]
        }
    }

    /// From raw I420 to the encoded stream. Only numbers are interpolated.
    ///
    /// VP8 follows what real-time libvpx users (WebRTC among them) set: the real-time deadline,
    /// no lag, quantizer 2…56, and for a bitrate CBR with a 1 s buffer, 100 % undershoot and 15 %
    /// overshoot allowed. H.264 is x264 `veryfast` with `zerolatency` (no look-ahead, no frame
    /// threads delay), constrained baseline, a VBV buffer of one second for a bitrate.
    var encoderDescription: String {
        switch (codec, rateControl) {
        case (.vp8, .bitrate(let bits)):
            return "vp8enc deadline=1 cpu-used=-6 lag-in-frames=0 end-usage=cbr target-bitrate=\(bits) "
                + "min-quantizer=2 max-quantizer=56 undershoot=100 overshoot=15 buffer-initial-size=500 "
                + "buffer-optimal-size=600 buffer-size=1000 keyframe-max-dist=\(keyframeInterval)"
        case (.vp8, .quality(let level)):
            // In CQ mode the target bitrate is only a ceiling: set it out of the way.
            return "vp8enc deadline=1 cpu-used=-6 lag-in-frames=0 end-usage=cq cq-level=\(level) target-bitrate=50000000 "
                + "keyframe-max-dist=\(keyframeInterval)"
        case (.h264, .bitrate(let bits)):
            return "x264enc tune=zerolatency speed-preset=veryfast pass=cbr bitrate=\(max(bits / 1000, 1)) vbv-buf-capacity=1000 "
                + "key-int-max=\(keyframeInterval) ! video/x-h264,profile=constrained-baseline,stream-format=byte-stream"
        case (.h264, .quality(let level)):
            // x264enc's pass=qual is CRF with `quantizer` as the rate factor.
            return "x264enc tune=zerolatency speed-preset=veryfast pass=qual quantizer=\(level) "
                + "key-int-max=\(keyframeInterval) ! video/x-h264,profile=constrained-baseline,stream-format=byte-stream"
        }
    }

    /// The RTP payloader WebRTC would use, packets of at most `mtu` bytes (RTP header included).
    func payloaderDescription(mtu: Int) -> String {
        switch codec {
        // WebRTC's VP8 descriptor carries a 15-bit picture ID.
        case .vp8: return "rtpvp8pay mtu=\(mtu) picture-id-mode=15-bit"
        // Parameter sets before every keyframe, FU-A fragmentation (packetization-mode 1).
        case .h264: return "rtph264pay mtu=\(mtu) config-interval=-1"
        }
    }
}

/// What `VideoBitrateMeter` measured: the size of every encoded frame and of every RTP packet a
/// WebRTC sender would have made of them.
public struct EncodedVideo: Sendable {
    /// The encoding used.
    public var encoding: VideoEncoding
    /// Frames handed to the encoder.
    public var framesIn: Int
    /// Frames per second of the input timeline.
    public var framesPerSecond: Int
    /// Bytes of each encoded frame, in output order (an encoder may drop frames, so there can be
    /// fewer than `framesIn`).
    public var frameBytes: [Int]
    /// How many of them are keyframes.
    public var keyframes: Int
    /// Bytes of each RTP packet (12-byte RTP header, payload descriptor and payload; no SRTP, UDP
    /// or IP).
    public var rtpPacketBytes: [Int]

    /// Sum of `frameBytes`: the encoder's output alone.
    public var totalBytes: Int { frameBytes.reduce(0, +) }
    /// Sum of `rtpPacketBytes`.
    public var totalRTPBytes: Int { rtpPacketBytes.reduce(0, +) }
    /// Length of the input in seconds.
    public var seconds: Double { framesPerSecond > 0 ? Double(framesIn) / Double(framesPerSecond) : 0 }
}

/// Encodes RGB frames with a video codec as a video call would (`VideoEncoding`) and measures the
/// result: bytes per encoded frame from the encoder's output, and the RTP packets a payloader makes
/// of them. Nothing is written anywhere; it answers "what would sending this as video cost".
///
/// The pipeline is `appsrc → videoconvert → I420 → encoder → tee`, one branch into an appsink for
/// the frames, the other through the RTP payloader into a second appsink. Both appsinks queue
/// without limit, do not sync to a clock and do not hold the end of the stream back until they are
/// emptied (`wait-on-eos=false`), so encoding runs as fast as the machine allows and `finish` can
/// wait for the end before taking the rest; `write` blocks while four frames wait for the encoder
/// and takes what is ready out of the sinks.
///
/// Confined to one caller at a time.
public final class VideoBitrateMeter {
    /// Width every frame must have.
    public let width: Int
    /// Height every frame must have.
    public let height: Int
    /// Frames per second of the input timeline (the encoder's rate control depends on it).
    public let framesPerSecond: Int
    /// How the frames are encoded.
    public let encoding: VideoEncoding
    /// Seconds `finish` waits for the encoder to drain.
    public let timeout: Double

    private let pipeline: MediaPipeline
    private let source: UnsafeMutablePointer<GstElement>
    private let frameSink: UnsafeMutablePointer<GstElement>
    private let rtpSink: UnsafeMutablePointer<GstElement>
    private let videoInfo: GstVideoInfo
    private var framesIn = 0
    private var frameBytes: [Int] = []
    private var keyframes = 0
    private var rtpPacketBytes: [Int] = []
    private var finished = false
    private var failure: MediaError?

    /// Builds and starts the encoder for `width` × `height` RGB frames at `framesPerSecond`, with RTP
    /// packets of at most `rtpMTU` bytes (WebRTC stays near 1200). Throws when a setting is out of
    /// range or GStreamer lacks the encoder or payloader (saying which Debian package has it).
    public init(width: Int, height: Int, framesPerSecond: Int, encoding: VideoEncoding, rtpMTU: Int = 1200,
                timeout: Double = 30) throws {
        try GStreamer.validate(timeout: timeout)
        try encoding.validate()
        guard (16...8192).contains(width), (16...8192).contains(height), width % 2 == 0, height % 2 == 0 else {
            throw MediaError(.invalidArgument, "frame size \(width)×\(height) cannot be encoded as \(encoding); give even sides of 16…8192 pixels")
        }
        guard (1...240).contains(framesPerSecond) else {
            throw MediaError(.invalidArgument, "frame rate \(framesPerSecond) is out of range for \(encoding); give 1…240")
        }
        guard (100...65_000).contains(rtpMTU) else {
            throw MediaError(.invalidArgument, "RTP packet size \(rtpMTU) bytes is out of range; give 100…65000")
        }
        try GStreamer.initialize()
        for (element, package) in encoding.requiredElements where !GStreamer.hasElement(element) {
            throw MediaError(.gstreamerUnavailable, "GStreamer has no \(element), needed for \(encoding); install \(package) (scripts/bootstrap does)")
        }
        let unbounded = "queue max-size-buffers=0 max-size-bytes=0 max-size-time=0"
        let description = """
            appsrc name=src format=time block=true max-bytes=0 max-buffers=4 ! videoconvert ! video/x-raw,format=I420 \
            ! \(encoding.encoderDescription) ! tee name=t \
            t. ! \(unbounded) ! appsink name=sink sync=false wait-on-eos=false \
            t. ! \(unbounded) ! \(encoding.payloaderDescription(mtu: rtpMTU)) ! appsink name=rtp sync=false wait-on-eos=false
            """
        let pipeline = try MediaPipeline(description: description)
        let source = try pipeline.element(named: "src")
        let frameSink = try pipeline.element(named: "sink")
        let rtpSink = try pipeline.element(named: "rtp")

        var info = GstVideoInfo()
        guard gst_video_info_set_format(&info, GST_VIDEO_FORMAT_RGB, guint(width), guint(height)) != 0 else {
            throw MediaError(.invalidArgument, "GStreamer rejected the frame size \(width)×\(height); pick another size")
        }
        info.fps_n = gint(framesPerSecond)
        info.fps_d = 1
        guard let caps = gst_video_info_to_caps(&info) else {
            throw MediaError(.gstreamerUnavailable, "GStreamer could not describe RGB frames; check the GStreamer installation")
        }
        gst_app_src_set_caps(UnsafeMutableRawPointer(source).assumingMemoryBound(to: GstAppSrc.self), caps)
        gst_caps_unref(caps)

        self.width = width
        self.height = height
        self.framesPerSecond = framesPerSecond
        self.encoding = encoding
        self.timeout = timeout
        self.pipeline = pipeline
        self.source = source
        self.frameSink = frameSink
        self.rtpSink = rtpSink
        self.videoInfo = info

        pipeline.unblockOnError([source])

        if pipeline.setState(GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE {
            if case .error(let failure)? = pipeline.next(GST_MESSAGE_ERROR, timeout: 1) { throw mediaError(failure) }
            throw MediaError(.streamFailed, "GStreamer could not start the \(encoding) encoder; check the GStreamer installation (GST_DEBUG=3 shows details)")
        }
    }

    deinit {
        pipeline.setState(GST_STATE_NULL)
    }

    /// Encodes `image` as the next frame (at `frames / framesPerSecond` s). Blocks while the encoder
    /// is busy; throws the encoder's error, also on every later call.
    public func write(_ image: RGBImage) throws {
        if let failure { throw failure }
        guard !finished else {
            throw MediaError(.invalidState, "the \(encoding) meter has finished; create a new VideoBitrateMeter to encode more")
        }
        guard image.width == width, image.height == height, image.pixels.count == width * height * 3 else {
            throw MediaError(.invalidArgument, "frame is \(image.width)×\(image.height) but the \(encoding) meter was made for \(width)×\(height); resize the frame")
        }
        guard let buffer = gst_buffer_new_allocate(nil, gsize(videoInfo.size), nil) else {
            throw fail(MediaError(.streamFailed, "no memory for a \(width)×\(height) frame"))
        }
        var map = GstMapInfo()
        guard gst_buffer_map(buffer, &map, GST_MAP_WRITE) != 0, let target = map.data else {
            gst_buffer_unref(buffer)
            throw fail(MediaError(.streamFailed, "a frame buffer could not be mapped into memory"))
        }
        let rowBytes = width * 3, stride = Int(videoInfo.stride.0)
        image.pixels.withUnsafeBytes { pixels in
            guard let base = pixels.baseAddress else { return }
            for row in 0..<height {
                UnsafeMutableRawPointer(target + row * stride).copyMemory(from: base + row * rowBytes, byteCount: rowBytes)
            }
        }
        gst_buffer_unmap(buffer, &map)
        let start = gst_util_uint64_scale(guint64(framesIn), 1_000_000_000, guint64(framesPerSecond))
        let end = gst_util_uint64_scale(guint64(framesIn + 1), 1_000_000_000, guint64(framesPerSecond))
        buffer.pointee.pts = start
        buffer.pointee.duration = end - start
        // push_buffer takes the buffer whatever it returns.
        guard gst_app_src_push_buffer(UnsafeMutableRawPointer(source).assumingMemoryBound(to: GstAppSrc.self), buffer) == GST_FLOW_OK else {
            if case .error(let failure)? = pipeline.next(GST_MESSAGE_ERROR, timeout: 1) { throw fail(mediaError(failure)) }
            throw fail(MediaError(.streamFailed, "the \(encoding) encoder stopped accepting frames; GST_DEBUG=3 shows why"))
        }
        framesIn += 1
        if case .error(let failure)? = pipeline.next(GST_MESSAGE_ERROR, timeout: 0) { throw fail(mediaError(failure)) }
        drain()
    }

    /// Ends the stream, waits until the encoder has emitted everything, and returns the sizes.
    /// Throws when no frame was written, on an encoder error, or after `timeout` seconds.
    public func finish() throws -> EncodedVideo {
        if let failure { throw failure }
        guard !finished else {
            throw MediaError(.invalidState, "the \(encoding) meter has finished already; its result was returned then")
        }
        finished = true
        defer { pipeline.setState(GST_STATE_NULL) }
        guard framesIn > 0 else {
            throw fail(MediaError(.invalidState, "no frames were given to the \(encoding) meter; write at least one before finish()"))
        }
        _ = gst_app_src_end_of_stream(UnsafeMutableRawPointer(source).assumingMemoryBound(to: GstAppSrc.self))
        waiting: while true {
            guard let event = pipeline.next(GST_MESSAGE_ERROR | GST_MESSAGE_EOS, timeout: timeout) else {
                throw fail(MediaError(.timedOut, "the \(encoding) encoder did not finish within \(Int(timeout)) s of the last frame"))
            }
            switch event {
            case .error(let failure): throw fail(mediaError(failure))
            case .endOfStream: break waiting
            default: continue
            }
        }
        drain()
        return EncodedVideo(encoding: encoding, framesIn: framesIn, framesPerSecond: framesPerSecond,
                            frameBytes: frameBytes, keyframes: keyframes, rtpPacketBytes: rtpPacketBytes)
    }

    /// Encodes `frames` in order and returns the sizes: `init`, `write` for each, `finish`.
    public static func measure(_ frames: [RGBImage], framesPerSecond: Int, encoding: VideoEncoding,
                               rtpMTU: Int = 1200) throws -> EncodedVideo {
        guard let first = frames.first else {
            throw MediaError(.invalidArgument, "no frames to encode as \(encoding); give at least one")
        }
        let meter = try VideoBitrateMeter(width: first.width, height: first.height, framesPerSecond: framesPerSecond,
                                          encoding: encoding, rtpMTU: rtpMTU)
        for frame in frames { try meter.write(frame) }
        return try meter.finish()
    }

    /// Takes every sample waiting in both sinks and records its size.
    private func drain() {
        let frames = UnsafeMutableRawPointer(frameSink).assumingMemoryBound(to: GstAppSink.self)
        while let sample = gst_app_sink_try_pull_sample(frames, 0) {
            if let buffer = gst_sample_get_buffer(sample) {
                frameBytes.append(Int(gst_buffer_get_size(buffer)))
                if buffer.pointee.mini_object.flags & GST_BUFFER_FLAG_DELTA_UNIT.rawValue == 0 { keyframes += 1 }
            }
            gst_sample_unref(sample)
        }
        let packets = UnsafeMutableRawPointer(rtpSink).assumingMemoryBound(to: GstAppSink.self)
        while let sample = gst_app_sink_try_pull_sample(packets, 0) {
            if let buffer = gst_sample_get_buffer(sample) { rtpPacketBytes.append(Int(gst_buffer_get_size(buffer))) }
            gst_sample_unref(sample)
        }
    }

    /// Remembers `error` so every later call throws it too.
    private func fail(_ error: MediaError) -> MediaError {
        failure = error
        return error
    }

    private func mediaError(_ failure: GStreamerFailure) -> MediaError {
        failure.mediaError(.streamFailed, "encoding as \(encoding) failed",
                           advice: "check the GStreamer installation (gstreamer1.0-plugins-good/ugly); GST_DEBUG=3 shows details")
    }
}
