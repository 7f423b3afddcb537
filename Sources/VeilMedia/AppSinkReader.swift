import CGStreamer

/// What the readers of a pipeline ending in `appsink name=sink` share: start-up (preroll with a
/// timeout), waiting for samples, error mapping and the failure that sticks. `PipelineReader`
/// (video frames) and `AudioSource` (sound chunks) own one each and turn its samples into their
/// own output; `MediaPipeline`'s deinit tears the pipeline down.
///
/// Waiting happens in one place, the bus: the appsink's new-sample callback posts an application
/// message (a wake-up) after queueing each sample, so `pull` blocks on the bus until a sample, the
/// end of the stream or an error arrives, with a timeout. Wake-ups are drained after each pulled
/// sample, so the bus never accumulates them.
final class AppSinkReader {
    /// The words of the owner's error messages, so each reader keeps its own.
    struct Wording {
        /// "video file /a/b.mp4", "audio of /a/b.mp4", ...
        var name: String
        /// Kind thrown when GStreamer cannot open the input.
        var missingKind: MediaError.Kind
        /// What to do when the input cannot be opened.
        var missingAdvice: String
        /// What to do when the pipeline does not preroll in time.
        var prerollAdvice: String
        /// What to do when GStreamer refuses to start and the bus does not say why.
        var startAdvice: String
        /// What the input is, after its name, when GStreamer cannot decode it ("cannot be decoded").
        var undecodable: String
        /// The error for an input without the stream the pipeline takes (no video, no audio).
        var missingStream: MediaError
        /// What to check when the stream fails or stalls: "input", "file".
        var input: String
        /// What a stalled stream delivered none of: "frame", "audio".
        var sample: String
        /// What `pull` counts, in the same message: "frames", "chunks".
        var samples: String
    }

    let pipeline: MediaPipeline
    let sink: UnsafeMutablePointer<GstElement>
    let wording: Wording
    let timeout: Double
    /// The error every later `pull` throws again.
    private(set) var failure: MediaError?
    /// Samples handed to `pull`'s closure without error.
    private(set) var samplesRead = 0
    private var endOfStream = false

    /// Takes the appsink of `pipeline` and makes it post wake-ups; the pipeline is not started yet.
    init(pipeline: MediaPipeline, wording: Wording, timeout: Double) throws {
        self.pipeline = pipeline
        self.wording = wording
        self.timeout = timeout
        self.sink = try pipeline.element(named: "sink")
        MediaPipeline.postWakeUps(fromAppSink: sink)
    }

    var appSink: UnsafeMutablePointer<GstAppSink> {
        UnsafeMutableRawPointer(sink).assumingMemoryBound(to: GstAppSink.self)
    }

    // MARK: Start-up

    /// Pauses the pipeline and waits (at most `timeout` seconds) until it has prerolled.
    func preroll() throws {
        switch pipeline.setState(GST_STATE_PAUSED) {
        case GST_STATE_CHANGE_FAILURE:
            throw startFailure()
        case GST_STATE_CHANGE_ASYNC:
            waiting: while true {
                guard let event = pipeline.next(GST_MESSAGE_ERROR | GST_MESSAGE_WARNING | GST_MESSAGE_ASYNC_DONE | GST_MESSAGE_EOS,
                                                timeout: timeout) else {
                    throw MediaError(.timedOut, "\(wording.name) did not start within \(Int(timeout)) s; \(wording.prerollAdvice)")
                }
                switch event {
                case .error(let failure): throw mediaError(failure)
                // An input without the wanted stream in a container that queues its streams (MP4,
                // Ogg) never fails on its own: decodebin just leaves the others unlinked and the
                // preroll never ends.
                case .warning(let failure) where failure.isUnresolvedLink: throw wording.missingStream
                case .endOfStream: throw wording.missingStream
                case .asyncDone: break waiting
                case .warning, .wakeUp, .other: continue
                }
            }
        default:
            break
        }
    }

    /// Sets the pipeline playing.
    func play() throws {
        guard pipeline.setState(GST_STATE_PLAYING) != GST_STATE_CHANGE_FAILURE else { throw startFailure() }
    }

    /// The error behind a refused state change: it is on the bus already (or arrives shortly).
    private func startFailure() -> MediaError {
        if case .error(let failure)? = pipeline.next(GST_MESSAGE_ERROR, timeout: 1) { return mediaError(failure) }
        return MediaError(.streamFailed, "\(wording.name) could not be started by GStreamer; \(wording.startAdvice)")
    }

    /// Classifies a bus error for this input.
    func mediaError(_ failure: GStreamerFailure) -> MediaError {
        if failure.isResourceMissing {
            return failure.mediaError(wording.missingKind, "cannot open \(wording.name)", advice: wording.missingAdvice)
        }
        if failure.isUnsupportedInput {
            return failure.mediaError(.unsupportedInput, "\(wording.name) \(wording.undecodable)",
                                      advice: "check the file, or install the GStreamer plugin for its format (gstreamer1.0-libav, gstreamer1.0-plugins-good/bad/ugly)")
        }
        if failure.domain == .stream, pipeline.hasUnlinkedInput(element: "convert") {
            // The decoder found streams, but none of the wanted kind (an audio file read for video):
            // decodebin never linked to the converter, and the data it had nowhere to send stopped
            // the pipeline.
            return wording.missingStream
        }
        return failure.mediaError(.streamFailed, "reading \(wording.name) failed",
                                  advice: "check the \(wording.input); GStreamer's debug output (GST_DEBUG=3) has details")
    }

    // MARK: Reading

    /// Waits for the next sample and returns what `copy` makes of it; nil at the end of the stream.
    /// A failure (an error on the bus, a timeout, a `MediaError` from `copy`) is thrown by this and
    /// every later call.
    func pull<Output>(_ copy: (_ sample: OpaquePointer) throws -> Output) throws -> Output? {
        if let failure { throw failure }
        while true {
            if let sample = gst_app_sink_try_pull_sample(appSink, 0) {
                defer { gst_sample_unref(sample) }
                let output: Output
                do {
                    output = try copy(sample)
                } catch let error as MediaError {
                    failure = error
                    throw error
                }
                samplesRead += 1
                drainBus()
                return output
            }
            if endOfStream { return nil }
            guard let event = pipeline.next(GST_MESSAGE_ERROR | GST_MESSAGE_EOS | GST_MESSAGE_APPLICATION, timeout: timeout) else {
                let error = MediaError(.timedOut, "\(wording.name) delivered no \(wording.sample) within \(Int(timeout)) s after \(samplesRead) \(wording.samples); check the \(wording.input)")
                failure = error
                throw error
            }
            try handle(event)
        }
    }

    /// Takes what is on the bus without waiting: wake-ups are dropped, an end or error is recorded.
    private func drainBus() {
        while failure == nil, let event = pipeline.next(GST_MESSAGE_ERROR | GST_MESSAGE_EOS | GST_MESSAGE_APPLICATION, timeout: 0) {
            // An error found here is thrown by the next `pull`.
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

    /// The buffer's time in microseconds from the start of the input (its stream time when the
    /// sample has a segment), nil when it has no timestamp.
    static func streamTimeMicros(_ sample: OpaquePointer, _ buffer: UnsafeMutablePointer<GstBuffer>) -> UInt64? {
        let none = GstClockTime.max  // GST_CLOCK_TIME_NONE
        let pts = buffer.pointee.pts
        guard pts != none else { return nil }
        var time = pts
        if let segment = gst_sample_get_segment(sample) {
            let streamTime = gst_segment_to_stream_time(segment, GST_FORMAT_TIME, pts)
            if streamTime != none { time = streamTime }
        }
        return UInt64(time / 1000)
    }
}
