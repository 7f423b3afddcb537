import CGStreamer
import CVeilGLib
import Foundation
import VeilGLib

/// The GStreamer objects of one `PeerConnection`: a pipeline with the audio capture and encoder
/// feeding webrtcbin. Receive branches are added when remote audio arrives (see `PeerConnection`).
///
/// `@unchecked Sendable`: created, changed and released only on the connection's `GLibLoop`
/// thread. The `let` pointers are immutable after `init` and are also read (never released) by
/// GStreamer callbacks, which run only while the pipeline exists.
final class PeerGraph: @unchecked Sendable {
    let pipeline: UnsafeMutablePointer<GstElement>
    let webrtcbin: UnsafeMutablePointer<GstElement>
    let bus: UnsafeMutablePointer<GstBus>
    /// The clock this connection's peer sees (`ConnectionClock`); the pipeline's clock runs on it.
    let clock: ConnectionClock
    /// The connection's own DTLS certificate (nil: GStreamer's per-process one, if libcrypto failed).
    let certificate = DTLSCertificate.make()
    /// The "mute" volume element before the encoder.
    private(set) var volume: UnsafeMutablePointer<GstElement>?
    /// The mixer an input file is added to (file input only).
    private(set) var mixer: UnsafeMutablePointer<GstElement>?

    // Loop-confined negotiation and channel state.
    var channel: OpaquePointer?
    var remoteDescriptionSet = false
    var pendingCandidates: [ICECandidate] = []
    var offerInFlight = false
    var fileStarted = false
    var fileBin: UnsafeMutablePointer<GstElement>?
    private var tornDown = false

    /// webrtcbin while the pipeline runs; nil after `teardown()`.
    var liveWebrtcbin: UnsafeMutablePointer<GstElement>? { tornDown ? nil : webrtcbin }

    /// Builds the pipeline (state NULL): capture → 48 kHz mono → mute → Opus → RTP → webrtcbin.
    init(input: AudioInput, configuration: PeerConfiguration, clock: ConnectionClock) throws {
        guard let pipeline = gst_pipeline_new(nil) else {
            throw PeerError(.gstreamerUnavailable, "GStreamer could not create a pipeline")
        }
        gst_object_ref_sink(gpointerOf(pipeline))
        self.clock = clock
        // The pipeline's clock is the monotonic system clock moved to the connection's origin (a
        // PulseAudio source would otherwise provide its own): buffer times, and the RTCP sender
        // reports stamped from them, are on the connection's clock, exactly `clock.offsetMicros`
        // from the device's media clock.
        if let own = Self.systemClock(movedBy: clock.offsetMicros) {
            gst_pipeline_use_clock(UnsafeMutableRawPointer(pipeline).assumingMemoryBound(to: GstPipeline.self), own)
            gst_object_unref(gpointerOf(own))
        }
        guard let webrtcbin = gst_element_factory_make("webrtcbin", "webrtc"), let bus = gst_element_get_bus(pipeline) else {
            gst_object_unref(gpointerOf(pipeline))
            throw PeerError(.gstreamerUnavailable, "GStreamer element 'webrtcbin' is missing; install gstreamer1.0-plugins-bad and gstreamer1.0-nice")
        }
        self.pipeline = pipeline
        self.webrtcbin = webrtcbin
        self.bus = bus
        gst_object_ref(gpointerOf(webrtcbin))
        gst_bin_add(asBin(pipeline), webrtcbin)
        do {
            try configure(configuration)
            try addSource(input: input, configuration: configuration)
        } catch {
            teardown()
            throw error
        }
    }

    deinit {
        teardown()
    }

    /// A new monotonic system clock whose time is CLOCK_MONOTONIC plus `offsetMicros`: calibrated
    /// at rate 1 from the internal time now (the calibration is exact at rate 1).
    private static func systemClock(movedBy offsetMicros: Int64) -> UnsafeMutablePointer<GstClock>? {
        guard let object = g_object_new_with_properties(gst_system_clock_get_type(), 0, nil, nil) else { return nil }
        let clock = UnsafeMutableRawPointer(object).assumingMemoryBound(to: GstClock.self)
        gst_object_ref_sink(gpointerOf(clock))
        let internalTime = gst_clock_get_internal_time(clock)
        let external = Int64(bitPattern: UInt64(internalTime)) &+ offsetMicros &* 1000
        guard external > 0 else {
            gst_object_unref(gpointerOf(clock))
            return nil
        }
        gst_clock_set_calibration(clock, internalTime, GstClockTime(external), 1, 1)
        return clock
    }

    private func configure(_ configuration: PeerConfiguration) throws {
        let object = gpointerOf(webrtcbin)
        veil_object_set_int(object, "bundle-policy", Int32(GST_WEBRTC_BUNDLE_POLICY_MAX_BUNDLE.rawValue))
        veil_object_set_uint(object, "latency", configuration.jitterBufferMillis)
        if let stun = configuration.stunServer { veil_object_set_string(object, "stun-server", stun) }
        if let turn = configuration.turnServer { veil_object_set_string(object, "turn-server", turn) }
        if configuration.relayOnly {
            guard configuration.turnServer != nil else {
                throw PeerError(.invalidArgument, "relay-only needs a TURN server (turn://user:password@host:port) to relay through")
            }
            veil_object_set_int(object, "ice-transport-policy", Int32(GST_WEBRTC_ICE_TRANSPORT_POLICY_RELAY.rawValue))
        }
        if let ice = veil_object_get_object(object, "ice-agent") {
            veil_object_set_bool(ice, "ice-tcp", 0)
            g_object_unref(ice)
        }
        // Sender reports stamped with the pipeline clock at capture time, and receivers tagging each
        // packet with the sender time it maps to: what lip-sync needs (see PlayoutMapping).
        if let rtpbin = gst_bin_get_by_name(asBin(webrtcbin), "rtpbin") {
            let rtp = gpointerOf(rtpbin)
            veil_object_set_int(rtp, "ntp-time-source", 3) // GST_RTP_NTP_TIME_SOURCE_CLOCK_TIME
            veil_object_set_bool(rtp, "rtcp-sync-send-time", 0)
            veil_object_set_bool(rtp, "add-reference-timestamp-meta", 1)
            gst_object_unref(rtp)
        }
        let interval = UInt64(max(configuration.rtcpIntervalMillis, 100)) * 1_000_000
        // The connection's own DTLS certificate (`DTLSCertificate`), given to the DTLS decoder as
        // webrtcbin creates it, before the fingerprint is written into a session description.
        let certificate = self.certificate
        onDeepElementAdded(pipeline) { element in
            switch factoryName(element) {
            case "rtpsession": setUInt64(gpointerOf(element), "rtcp-min-interval", interval)
            case "dtlssrtpdec": if let certificate { veil_object_set_string(gpointerOf(element), "pem", certificate.pem) }
            default: break
            }
        }
    }

    private func addSource(input: AudioInput, configuration: PeerConfiguration) throws {
        // Live test sources produce 10 ms buffers: a buffer is timestamped at its start but pushed
        // at its end, so its length adds to the mouth-to-ear delay.
        let source: String
        switch input {
        case .testTone:
            source = "audiotestsrc name=source is-live=true wave=sine volume=0.2 samplesperbuffer=480"
        case .silence:
            source = "audiotestsrc name=source is-live=true wave=silence samplesperbuffer=480"
        case .pulse:
            // Read in 10 ms fragments (the sound server hands each one over as it fills), with room
            // for 40 ms should the send thread be late; pulsesrc's default keeps 200 ms.
            source = "pulsesrc name=source buffer-time=40000 latency-time=10000"
        case .file:
            // Live silence keeps the track running; the file joins the mixer once connected.
            source = "audiotestsrc name=source is-live=true wave=silence samplesperbuffer=480 ! audio/x-raw,format=S16LE,rate=48000,channels=1,layout=interleaved ! audiomixer name=mixer"
        }
        let bitrate = min(max(configuration.opusBitrate, 6_000), 128_000)
        // Until the connection is up, webrtcbin holds the send path back. A live source held back
        // catches up afterwards in a burst: seconds of stale audio, played late by the receiver
        // and anchoring its RTP jitter buffer seconds behind the path. The leaky queue keeps at
        // most 40 ms instead and lets the source run in real time; in a call it is empty.
        let description = source + " ! queue name=sendqueue leaky=downstream max-size-time=40000000 max-size-buffers=0 max-size-bytes=0"
            + " ! audioconvert ! audioresample ! audio/x-raw,format=S16LE,rate=48000,channels=1"
            + " ! volume name=mute ! opusenc audio-type=voice bitrate=\(bitrate) frame-size=20 inband-fec=true packet-loss-percentage=10"
            + " ! rtpopuspay pt=96 ! capsfilter caps=application/x-rtp,media=audio,encoding-name=OPUS,payload=96,clock-rate=48000"
        var error: UnsafeMutablePointer<GError>?
        guard let bin = gst_parse_bin_from_description(description, 1, &error) else {
            let message = error.flatMap { $0.pointee.message.map { String(cString: $0) } } ?? "unknown error"
            if let error { g_error_free(error) }
            throw PeerError(.gstreamerUnavailable, "the audio send pipeline could not be built: \(message); install gstreamer1.0-plugins-base/good (and -pulseaudio for PulseAudio)")
        }
        if let error { g_error_free(error) }
        let element = asElement(UnsafeMutableRawPointer(bin))
        gst_bin_add(asBin(pipeline), element)
        if let named = gst_bin_get_by_name(asBin(element), "source") {
            switch input {
            case .testTone(let frequency):
                veil_object_set_double(gpointerOf(named), "freq", frequency.isFinite ? min(max(frequency, 1), 20_000) : 440)
            case .pulse(let device?):
                veil_object_set_string(gpointerOf(named), "device", device)
            default:
                break
            }
            gst_object_unref(gpointerOf(named))
        }
        // The bin owns these; the pipeline keeps them alive until teardown.
        volume = gst_bin_get_by_name(asBin(element), "mute")
        mixer = gst_bin_get_by_name(asBin(element), "mixer")

        guard let sinkPad = gst_element_request_pad_simple(webrtcbin, "sink_%u"),
              let sourcePad = gst_element_get_static_pad(element, "src") else {
            throw PeerError(.gstreamerUnavailable, "webrtcbin refused an audio input pad")
        }
        defer {
            gst_object_unref(gpointerOf(sinkPad))
            gst_object_unref(gpointerOf(sourcePad))
        }
        guard gst_pad_link(sourcePad, sinkPad) == GST_PAD_LINK_OK else {
            throw PeerError(.gstreamerUnavailable, "the Opus encoder could not be linked to webrtcbin")
        }
        if let transceiver = veil_object_get_object(gpointerOf(sinkPad), "transceiver") {
            veil_object_set_int(transceiver, "direction", Int32(GST_WEBRTC_RTP_TRANSCEIVER_DIRECTION_SENDRECV.rawValue))
            g_object_unref(transceiver)
        }
    }

    /// Adds `filesrc ! decodebin ! …` for `url` to `mixer`, timed to start 150 ms from now. Returns
    /// the branch and the device media time (µs) at which the file's first sample enters the mix:
    /// its capture time, as far as the call is concerned.
    func addFileBranch(url: URL, mixer: UnsafeMutablePointer<GstElement>) throws -> (branch: UnsafeMutablePointer<GstElement>, startMicros: UInt64?) {
        let description = "filesrc name=file ! decodebin ! audioconvert ! audioresample ! audio/x-raw,format=S16LE,rate=48000,channels=1,layout=interleaved ! queue name=out"
        var error: UnsafeMutablePointer<GError>?
        // Not ghosting unlinked pads: audioconvert's sink waits for decodebin's dynamic pad and
        // must not become the bin's input. The output is ghosted by hand.
        guard let bin = gst_parse_bin_from_description(description, 0, &error) else {
            if let error { g_error_free(error) }
            throw PeerError(.gstreamerUnavailable, "the audio file reader could not be built; install gstreamer1.0-plugins-base")
        }
        if let error { g_error_free(error) }
        let element = asElement(UnsafeMutableRawPointer(bin))
        if let out = gst_bin_get_by_name(asBin(element), "out") {
            if let pad = gst_element_get_static_pad(out, "src") {
                if let ghost = gst_ghost_pad_new("src", pad) { gst_element_add_pad(element, ghost) }
                gst_object_unref(gpointerOf(pad))
            }
            gst_object_unref(gpointerOf(out))
        }
        if let file = gst_bin_get_by_name(asBin(element), "file") {
            veil_object_set_string(gpointerOf(file), "location", url.path)
            gst_object_unref(gpointerOf(file))
        }
        // Into the mixer's own bin: pads only link within one bin.
        guard let parent = gst_object_get_parent(UnsafeMutableRawPointer(mixer).assumingMemoryBound(to: GstObject.self)) else {
            gst_object_unref(gpointerOf(element))
            throw PeerError(.gstreamerUnavailable, "the audio mixer has no parent bin")
        }
        gst_bin_add(UnsafeMutableRawPointer(parent).assumingMemoryBound(to: GstBin.self), element)
        gst_object_unref(gpointerOf(parent))
        guard let source = gst_element_get_static_pad(element, "src"), let sink = gst_element_request_pad_simple(mixer, "sink_%u") else {
            throw PeerError(.gstreamerUnavailable, "the audio file could not be connected to the mixer")
        }
        defer {
            gst_object_unref(gpointerOf(source))
            gst_object_unref(gpointerOf(sink))
        }
        // Shift the file's timeline to start a little after now (running time), leaving decodebin
        // time to find the format so that the first syllable is not clipped.
        var startMicros: UInt64?
        if let pipelineClock = gst_element_get_clock(pipeline) {
            let now = gst_clock_get_time(pipelineClock)
            gst_object_unref(gpointerOf(pipelineClock))
            let running = now &- gst_element_get_base_time(pipeline)
            gst_pad_set_offset(source, Int(bitPattern: UInt(running)) &+ 150_000_000)
            startMicros = clock.localMicros(ofConnectionNanos: UInt64(now) &+ 150_000_000)
        }
        guard gst_pad_link(source, sink) == GST_PAD_LINK_OK else {
            throw PeerError(.gstreamerUnavailable, "the audio file could not be connected to the mixer")
        }
        gst_element_sync_state_with_parent(element)
        return (element, startMicros)
    }

    /// A buffer timestamp on `pad` as device media time (µs): its running time plus the pipeline's
    /// base time is a time of the connection's clock, moved back by the connection's offset.
    func mediaTimeMicros(pts: GstClockTime, pad: UnsafeMutablePointer<GstPad>) -> UInt64? {
        guard pts != GstClockTime.max, let event = gst_pad_get_sticky_event(pad, GST_EVENT_SEGMENT, 0) else { return nil }
        defer { gst_event_unref(event) }
        var segment: UnsafePointer<GstSegment>?
        gst_event_parse_segment(event, &segment)
        guard let segment else { return nil }
        let running = gst_segment_to_running_time(segment, GST_FORMAT_TIME, pts)
        guard running != GstClockTime.max else { return nil }
        return clock.localMicros(ofConnectionNanos: UInt64(running) &+ UInt64(gst_element_get_base_time(pipeline)))
    }

    /// The text of the first error message waiting on the bus (e.g. why a state change failed).
    func takePendingError() -> String? {
        guard let message = gst_bus_pop_filtered(bus, GST_MESSAGE_ERROR) else { return nil }
        defer { gst_message_unref(message) }
        var error: UnsafeMutablePointer<GError>?
        var debug: UnsafeMutablePointer<gchar>?
        gst_message_parse_error(message, &error, &debug)
        g_free(debug)
        defer { if let error { g_error_free(error) } }
        let source = message.pointee.src.flatMap { takeString(gst_object_get_name($0)) } ?? "?"
        return "\(error.flatMap { $0.pointee.message.map { String(cString: $0) } } ?? "unknown error") (\(source))"
    }

    /// The pipeline's latency in nanoseconds (what its sinks add to each timestamp before playing).
    func latencyNanoseconds() -> UInt64? {
        guard !tornDown, let query = gst_query_new_latency() else { return nil }
        defer { gst_query_unref(query) }
        guard gst_element_query(pipeline, query) != 0 else { return nil }
        var live: gboolean = 0
        var minimum: GstClockTime = 0, maximum: GstClockTime = 0
        gst_query_parse_latency(query, &live, &minimum, &maximum)
        return minimum == GstClockTime.max ? nil : UInt64(minimum)
    }

    /// Calls `body` with every element in the pipeline, nested bins included.
    func forEachElement(_ body: (UnsafeMutablePointer<GstElement>) -> Void) {
        guard let iterator = gst_bin_iterate_recurse(asBin(pipeline)) else { return }
        defer { gst_iterator_free(iterator) }
        var item = GValue()
        while true {
            let result = gst_iterator_next(iterator, &item)
            if result == GST_ITERATOR_OK {
                if let element = g_value_get_object(&item) { body(asElement(element)) }
                g_value_reset(&item)
            } else if result == GST_ITERATOR_RESYNC {
                gst_iterator_resync(iterator)
            } else {
                break
            }
        }
        g_value_unset(&item)
    }

    private func stopEachElement() {
        forEachElement { element in
            // Locked, so that the pipeline's own PLAYING→PAUSED→READY→NULL walk does not bring it
            // (and its failure) back up.
            gst_element_set_locked_state(element, 1)
            gst_element_set_state(element, GST_STATE_NULL)
        }
    }

    /// Stops the pipeline and releases everything. Idempotent.
    func teardown() {
        guard !tornDown else { return }
        tornDown = true
        if gst_element_set_state(pipeline, GST_STATE_NULL) == GST_STATE_CHANGE_FAILURE {
            // A failed element (e.g. an audio sink without a sound server) can stop the pipeline's
            // own state change half-way; stop and lock every element, then the pipeline.
            stopEachElement()
            gst_element_set_state(pipeline, GST_STATE_NULL)
        }
        // When starting failed part-way, webrtcbin may never have left NULL while its transport
        // bins already run: a READY→NULL cycle makes it stop them.
        var current = GST_STATE_VOID_PENDING, pending = GST_STATE_VOID_PENDING
        if gst_element_get_state(webrtcbin, &current, &pending, 0) != GST_STATE_CHANGE_FAILURE, current == GST_STATE_NULL {
            gst_element_set_state(webrtcbin, GST_STATE_READY)
            gst_element_set_state(webrtcbin, GST_STATE_NULL)
        }
        gst_bus_remove_watch(bus)
        if let channel { g_object_unref(gpointerOf(channel)) }
        channel = nil
        if let volume { gst_object_unref(gpointerOf(volume)) }
        if let mixer { gst_object_unref(gpointerOf(mixer)) }
        volume = nil
        mixer = nil
        fileBin = nil
        gst_object_unref(gpointerOf(bus))
        gst_object_unref(gpointerOf(webrtcbin))
        gst_object_unref(gpointerOf(pipeline))
    }
}
