import CGStreamer
import CVeilGLib
import Foundation
import VeilCore
import VeilGLib

// Audio: the input file, the receive branch and its timing, and the bus.
extension PeerConnection {
    /// On the loop, when first connected: starts an input file from its beginning.
    func startFileInput() {
        guard case .file(let url) = input, !graph.fileStarted, let mixer = graph.mixer, graph.liveWebrtcbin != nil else { return }
        graph.fileStarted = true
        do {
            let (branch, startMicros) = try graph.addFileBranch(url: url, mixer: mixer)
            graph.fileBin = branch
            shared.withLock { $0.fileStartMicros = startMicros }
        } catch {
            fail(error as? PeerError ?? PeerError(.mediaFailed, "\(error)"), fatal: false)
        }
    }

    /// On a webrtcbin streaming thread: a remote media stream starts. The first audio stream is
    /// decoded into the configured output; anything else is discarded.
    func incomingPad(_ pad: UnsafeMutablePointer<GstPad>) {
        guard gst_pad_get_direction(pad) == GST_PAD_SRC else { return }
        let first = shared.withLock { shared -> Bool? in
            guard !shared.closing else { return nil }
            defer { shared.audioLinked = true }
            return !shared.audioLinked
        }
        guard let first else { return }
        let description = first ? receiveDescription() : "fakesink sync=false async=false"
        var error: UnsafeMutablePointer<GError>?
        guard let bin = gst_parse_bin_from_description(description, 1, &error) else {
            let message = error.flatMap { $0.pointee.message.map { String(cString: $0) } } ?? "unknown error"
            if let error { g_error_free(error) }
            return fail(PeerError(.gstreamerUnavailable, "the audio receive pipeline could not be built: \(message); install gstreamer1.0-plugins-base/good"), fatal: true)
        }
        if let error { g_error_free(error) }
        let element = asElement(UnsafeMutableRawPointer(bin))
        if first { configureReceive(bin: element, pad: pad) }
        gst_bin_add(asBin(graph.pipeline), element)
        var branch = element
        if gst_element_sync_state_with_parent(element) == 0, let fallback = discardingBranch() {
            // The output could not start (no sound server, an unwritable file); its bus error is
            // reported as a non-fatal failure. A branch left stopped would answer FLUSHING and
            // stop the bundled transport, and the data channel with it: drop the audio instead.
            // The failed bin stays `receiveBin`, so that its error is recognised as the output's.
            gst_element_set_locked_state(element, 1)
            gst_element_set_state(element, GST_STATE_NULL)
            gst_bin_remove(asBin(graph.pipeline), element)
            gst_bin_add(asBin(graph.pipeline), fallback)
            gst_element_sync_state_with_parent(fallback)
            branch = fallback
        }
        if let sink = gst_element_get_static_pad(branch, "sink") {
            if gst_pad_link(pad, sink) != GST_PAD_LINK_OK {
                fail(PeerError(.mediaFailed, "the remote audio could not be linked to its decoder"), fatal: false)
            } else if branch == element, let output = gst_bin_get_by_name(asBin(element), "sink") {
                primeLatency(output)
                gst_object_unref(gpointerOf(output))
            }
            gst_object_unref(gpointerOf(sink))
        }
    }

    /// Gives a newly linked sink the latency it will get from the pipeline, before its first buffer.
    /// Otherwise it plays the first ~100 ms at latency 0, until the pipeline handles the latency
    /// message, and then jumps by the whole latency: a gap and a resync in the audio.
    private func primeLatency(_ sink: UnsafeMutablePointer<GstElement>) {
        guard let query = gst_query_new_latency() else { return }
        defer { gst_query_unref(query) }
        guard gst_element_query(sink, query) != 0 else { return }
        var live: gboolean = 0
        var minimum: GstClockTime = 0, maximum: GstClockTime = 0
        gst_query_parse_latency(query, &live, &minimum, &maximum)
        guard live != 0, minimum != GstClockTime.max, let event = gst_event_new_latency(minimum) else { return }
        _ = gst_element_send_event(sink, event)
    }

    /// A sink that drops what it gets (floating reference, for `gst_bin_add`).
    private func discardingBranch() -> UnsafeMutablePointer<GstElement>? {
        guard let sink = gst_element_factory_make("fakesink", nil) else { return nil }
        veil_object_set_bool(gpointerOf(sink), "sync", 0)
        veil_object_set_bool(gpointerOf(sink), "async", 0)
        return sink
    }

    func receiveDescription() -> String {
        // opusdec without use-inband-fec by default: decoding FEC makes it report 120 ms more
        // latency (mouth to ear 150 → 270 ms) for little gain; LossTests measures both, see
        // docs/reliability.md ("Loss"). Packet-loss concealment covers single losses.
        let decode = "queue name=receivequeue max-size-time=500000000 ! rtpopusdepay ! opusdec plc=true use-inband-fec=\(configuration.decodesInbandFEC) ! audioconvert ! audioresample ! capsfilter name=decoded caps=audio/x-raw,format=F32LE,rate=48000,channels=1,layout=interleaved"
        switch output {
        case .discard: return decode + " ! fakesink name=sink sync=true async=false"
        case .callback: return decode + " ! appsink name=sink sync=true async=false max-buffers=100 drop=true"
        case .pulse: return decode + " ! pulsesink name=sink async=false"
        case .file: return decode + " ! audioconvert ! audio/x-raw,format=S16LE ! wavenc ! filesink name=sink async=false"
        }
    }

    /// Probes and sinks of the receive branch (before it is linked, so nothing is missed).
    func configureReceive(bin: UnsafeMutablePointer<GstElement>, pad: UnsafeMutablePointer<GstPad>) {
        gst_object_ref(gpointerOf(bin))
        // Under the lock that `applyAudioOutputDevice` takes: a switch either happens before and is
        // read here, or after and finds the bin.
        let outputDevice = shared.withLock { shared -> String? in
            shared.receiveBin = ElementRef(bin)
            return shared.outputDevice
        }
        // RTP packets leaving the jitter buffer: count them, and learn the sender-time mapping from
        // the reference-timestamp meta rtpjitterbuffer adds once an RTCP sender report arrived.
        addProbe(pad, GST_PAD_PROBE_TYPE_BUFFER) { [weak self] pad, info in
            guard let self, let buffer = gst_pad_probe_info_get_buffer(info) else { return GST_PAD_PROBE_OK }
            var update: PlayoutMapping?
            if let meta = gst_buffer_get_reference_timestamp_meta(buffer, CallGStreamer.ntpReferenceCaps),
               let local = self.graph.mediaTimeMicros(pts: buffer.pointee.pts, pad: pad) {
                let sender = UInt64(meta.pointee.timestamp) / 1000
                update = PlayoutMapping(offsetMicros: Int64(bitPattern: local) &- Int64(bitPattern: sender),
                                        latencyMicros: 0, referenceSenderMicros: sender)
            }
            let now = UInt64(g_get_monotonic_time())
            self.shared.withLock { shared in
                shared.counters.rtpPacketsReceived += 1
                shared.lastMediaMicros = now
                if let update { shared.mapping = update }
            }
            return GST_PAD_PROBE_OK
        }
        if let decoded = gst_bin_get_by_name(asBin(bin), "decoded") {
            if let source = gst_element_get_static_pad(decoded, "src") {
                addProbe(source, GST_PAD_PROBE_TYPE_BUFFER) { [weak self] _, info in
                    if let buffer = gst_pad_probe_info_get_buffer(info) {
                        let samples = Int(gst_buffer_get_size(buffer)) / MemoryLayout<Float>.size
                        self?.shared.withLock {
                            $0.counters.decodedAudioBuffers += 1
                            $0.counters.decodedAudioSamples += samples
                        }
                    }
                    return GST_PAD_PROBE_OK
                }
                gst_object_unref(gpointerOf(source))
            }
            gst_object_unref(gpointerOf(decoded))
        }
        guard let sink = gst_bin_get_by_name(asBin(bin), "sink") else { return }
        defer { gst_object_unref(gpointerOf(sink)) }
        switch output {
        case .pulse:
            if let outputDevice { veil_object_set_string(gpointerOf(sink), "device", outputDevice) }
        case .file(let url):
            veil_object_set_string(gpointerOf(sink), "location", url.path)
        case .callback(let handler):
            setNewSampleCallback(sink) { [weak self] sample, latency in
                guard let self, let audio = self.receivedAudio(sample, pipeline: self.graph.pipeline, sinkLatencyNanos: latency) else { return }
                handler(audio)
            }
        default:
            break
        }
    }

    /// A decoded sample that a synchronised appsink renders now, as `ReceivedAudio` with its times;
    /// `sinkLatencyNanos` is the latency the sink renders with.
    func receivedAudio(_ sample: OpaquePointer, pipeline: UnsafeMutablePointer<GstElement>, sinkLatencyNanos: UInt64) -> ReceivedAudio? {
        guard let buffer = gst_sample_get_buffer(sample) else { return nil }
        var map = GstMapInfo()
        guard gst_buffer_map(buffer, &map, GST_MAP_READ) != 0 else { return nil }
        let count = Int(map.size) / MemoryLayout<Float>.size
        let samples = map.data.map { data in
            UnsafeRawPointer(data).withMemoryRebound(to: Float.self, capacity: count) { Array(UnsafeBufferPointer(start: $0, count: count)) }
        } ?? []
        gst_buffer_unmap(buffer, &map)
        var presentation: UInt64 = 0
        if let segment = gst_sample_get_segment(sample) {
            let running = gst_segment_to_running_time(segment, GST_FORMAT_TIME, buffer.pointee.pts)
            if running != UInt64.max { presentation = graph.clock.localMicros(ofConnectionNanos: UInt64(running) &+ UInt64(gst_element_get_base_time(pipeline))) }
        }
        let mapping = shared.withLock { $0.mapping }
        // Played at its timestamp plus the sink's latency, or now if it came late: the first few
        // buffers of a stream reach the sink ~100 ms after their time while the branch starts.
        let playout = max(presentation &+ sinkLatencyNanos / 1000, UInt64(g_get_monotonic_time()))
        let sender = mapping.map { mapping -> UInt64 in
            var mapping = mapping
            mapping.latencyMicros = 0
            return mapping.senderMediaTimeMicros(playingAt: presentation)
        }
        return ReceivedAudio(samples: samples, sampleRate: 48_000, presentationTimeMicros: presentation,
                             playoutTimeMicros: playout, senderMediaTimeMicros: sender)
    }

    // MARK: - Bus (loop)

    func busMessage(_ message: UnsafeMutablePointer<GstMessage>) {
        let type = message.pointee.type
        if type == GST_MESSAGE_LATENCY {
            gst_bin_recalculate_latency(asBin(graph.pipeline))
            if let latency = graph.latencyNanoseconds() { shared.withLock { $0.latencyNanos = latency } }
        } else if type == GST_MESSAGE_ERROR {
            var error: UnsafeMutablePointer<GError>?
            var debug: UnsafeMutablePointer<gchar>?
            gst_message_parse_error(message, &error, &debug)
            let text = error.flatMap { $0.pointee.message.map { String(cString: $0) } } ?? "unknown error"
            if let error { g_error_free(error) }
            g_free(debug)
            func within(_ bin: UnsafeMutablePointer<GstElement>?) -> Bool {
                guard let bin, let source = message.pointee.src else { return false }
                return gst_object_has_as_ancestor(source, UnsafeMutableRawPointer(bin).assumingMemoryBound(to: GstObject.self)) != 0
            }
            let receiveBin = shared.withLock { $0.receiveBin }
            if within(graph.fileBin) {
                fail(PeerError(.mediaFailed, "the audio input file could not be played: \(text); the call continues with silence"), fatal: false)
            } else if within(receiveBin?.element) {
                // Without a working speaker the call still carries voice out and expressions both ways.
                fail(PeerError(.mediaFailed, "the received audio cannot be played: \(text); the call continues without sound (check the audio output)"), fatal: false)
            } else {
                fail(PeerError(.mediaFailed, "the call's media pipeline failed: \(text)"), fatal: true)
            }
        }
    }
}
