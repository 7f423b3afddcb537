import CGStreamer
import CVeilGLib
import Foundation
import Synchronization
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
        let description = first ? receiveDescription(for: output) : "fakesink sync=false async=false"
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

    /// The receive branch without an output (floating reference, for `gst_bin_add`): the voice is
    /// still decoded and played out unheard, so that lip-sync keeps its timing.
    private func discardingBranch() -> UnsafeMutablePointer<GstElement>? {
        guard let bin = gst_parse_bin_from_description(receiveDescription(for: .discard), 1, nil) else { return nil }
        let element = asElement(UnsafeMutableRawPointer(bin))
        connectDecodedSink(in: element)
        return element
    }

    /// The receive branch: depayload and decode as soon as the RTP jitter buffer has a packet in
    /// order, and hand the decoded voice to the playout stage (`decoded`, an appsink that does not
    /// wait). The output, where there is one in GStreamer, is fed by the playout thread through
    /// `playout` (an appsrc): the sound server or a WAV file. A callback output and `.discard` are
    /// served by the playout thread directly.
    func receiveDescription(for output: AudioOutput) -> String {
        // opusdec without use-inband-fec by default: decoding FEC makes it report 120 ms more
        // latency (mouth to ear 150 → 270 ms) for little gain; LossTests measures both, see
        // docs/reliability.md ("Loss"). Packet-loss concealment covers single losses.
        let decode = "queue name=receivequeue max-size-time=500000000 ! rtpopusdepay ! opusdec plc=true use-inband-fec=\(configuration.decodesInbandFEC) ! audioconvert ! audioresample ! capsfilter name=decoded caps=audio/x-raw,format=F32LE,rate=48000,channels=1,layout=interleaved ! appsink name=decodedsink sync=false async=false"
        // A live source stamped by the playout thread with each block's running time; the sink
        // plays it at that time plus the output's latency.
        let playout = "appsrc name=playout is-live=true format=time do-timestamp=false min-latency=0 ! audioconvert"
        switch output {
        case .discard, .callback: return decode
        // 30 ms of ring buffer in 10 ms periods (the sink reports 40 ms of latency, which the
        // playout adds to its target): enough for the playout thread's scheduling, and no more
        // (pulsesink's default is 200 ms; at 20 ms a busy machine underran audibly).
        case .pulse: return decode + "  " + playout + " ! pulsesink name=sink async=false buffer-time=30000 latency-time=10000"
        case .file: return decode + "  " + playout + " ! audio/x-raw,format=S16LE ! wavenc ! filesink name=sink async=false"
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
        // RTP packets leaving the jitter buffer: count them, and tell the playout which RTP
        // timestamp each output timestamp stands for, and which sender time (the reference-timestamp
        // meta rtpjitterbuffer adds once an RTCP sender report arrived).
        addProbe(pad, GST_PAD_PROBE_TYPE_BUFFER) { [weak self] pad, info in
            guard let self, let buffer = gst_pad_probe_info_get_buffer(info) else { return GST_PAD_PROBE_OK }
            let now = UInt64(g_get_monotonic_time())
            self.shared.withLock { shared in
                shared.counters.rtpPacketsReceived += 1
                shared.lastMediaMicros = now
            }
            guard let local = self.graph.mediaTimeMicros(pts: buffer.pointee.pts, pad: pad),
                  let timestamp = rtpTimestamp(of: buffer) else { return GST_PAD_PROBE_OK }
            let sender = gst_buffer_get_reference_timestamp_meta(buffer, CallGStreamer.ntpReferenceCaps).map { UInt64($0.pointee.timestamp) / 1000 }
            self.playout.packetLeftJitterBuffer(rtpTimestamp: timestamp, timestampMicros: local, senderMicros: sender)
            return GST_PAD_PROBE_OK
        }
        connectDecodedSink(in: bin)
        if let source = gst_bin_get_by_name(asBin(bin), "playout") {
            if let caps = gst_caps_from_string("audio/x-raw,format=F32LE,rate=48000,channels=1,layout=interleaved") {
                gst_app_src_set_caps(UnsafeMutableRawPointer(source).assumingMemoryBound(to: GstAppSrc.self), caps)
                gst_caps_unref(caps)
            }
            shared.withLock { $0.playoutSource = ElementRef(source) } // takes the reference
        }
        guard let sink = gst_bin_get_by_name(asBin(bin), "sink") else { return }
        defer { gst_object_unref(gpointerOf(sink)) }
        switch output {
        case .pulse:
            if let outputDevice { veil_object_set_string(gpointerOf(sink), "device", outputDevice) }
        case .file(let url):
            veil_object_set_string(gpointerOf(sink), "location", url.path)
        default:
            break
        }
    }

    /// Feeds what the decoder's appsink gets to the playout stage, with the jitter buffer's output
    /// timestamp on the local media clock, and counts it.
    func connectDecodedSink(in bin: UnsafeMutablePointer<GstElement>) {
        guard let sink = gst_bin_get_by_name(asBin(bin), "decodedsink") else { return }
        defer { gst_object_unref(gpointerOf(sink)) }
        setNewSampleCallback(sink) { [weak self] sample, _ in
            guard let self, let buffer = gst_sample_get_buffer(sample), let segment = gst_sample_get_segment(sample) else { return }
            let running = gst_segment_to_running_time(segment, GST_FORMAT_TIME, buffer.pointee.pts)
            guard running != UInt64.max else { return }
            let timeline = self.graph.clock.localMicros(ofConnectionNanos: UInt64(running) &+ UInt64(gst_element_get_base_time(self.graph.pipeline)))
            var map = GstMapInfo()
            guard gst_buffer_map(buffer, &map, GST_MAP_READ) != 0 else { return }
            let count = Int(map.size) / MemoryLayout<Float>.size
            let samples = map.data.map { data in
                UnsafeRawPointer(data).withMemoryRebound(to: Float.self, capacity: count) { Array(UnsafeBufferPointer(start: $0, count: count)) }
            } ?? []
            gst_buffer_unmap(buffer, &map)
            self.shared.withLock {
                $0.counters.decodedAudioBuffers += 1
                $0.counters.decodedAudioSamples += samples.count
            }
            self.playout.insert(samples, jitterBufferMicros: timeline)
        }
    }

    /// On the loop, as webrtcbin creates its RTP jitter buffer: every packet entering it tells the
    /// playout when it arrived and which media time it carries (its RTP timestamp).
    func watchArrivals(of jitterBuffer: UnsafeMutablePointer<GstElement>) {
        guard let pad = gst_element_get_static_pad(jitterBuffer, "sink") else { return }
        defer { gst_object_unref(gpointerOf(pad)) }
        addProbe(pad, GST_PAD_PROBE_TYPE_BUFFER) { [weak self] _, info in
            guard let self, let buffer = gst_pad_probe_info_get_buffer(info), let timestamp = rtpTimestamp(of: buffer) else {
                return GST_PAD_PROBE_OK
            }
            self.playout.packetArrived(rtpTimestamp: timestamp, arrivalMicros: UInt64(g_get_monotonic_time()))
            return GST_PAD_PROBE_OK
        }
    }

    /// Where the playout thread's blocks go, for this connection's output.
    func playoutOutput() -> AudioPlayoutStage.Output {
        let retune: @Sendable (UInt64) -> Void = { [weak self] wait in self?.retuneJitterBuffer(waitMicros: wait) }
        switch output {
        case .callback(let handler):
            return .init(deliver: { [weak self] block, playout in
                guard let self, block.kind != .silence, let audio = self.receivedAudio(block, playoutMicros: playout) else { return }
                handler(audio)
            }, leadMicros: { 0 }, retune: retune)
        case .discard:
            return .init(deliver: { _, _ in }, leadMicros: { 0 }, retune: retune)
        case .pulse, .file:
            return .init(deliver: { [weak self] block, playout in self?.push(block, playingAt: playout) },
                         leadMicros: { [weak self] in self.map { $0.shared.withLock { $0.latencyNanos / 1000 } } ?? 0 },
                         retune: retune)
        }
    }

    /// On the playout thread: a block into the output's appsrc, stamped with the running time at
    /// which it is taken (the sink adds its latency, which is the stage's lead).
    private func push(_ block: AdaptivePlayout.Block, playingAt playout: UInt64) {
        guard let source = shared.withLock({ $0.playoutSource }), let buffer = gst_buffer_new_allocate(nil, gsize(block.samples.count * 4), nil) else { return }
        _ = block.samples.withUnsafeBytes { gst_buffer_fill(buffer, 0, $0.baseAddress, gsize($0.count)) }
        let lead = shared.withLock { $0.latencyNanos / 1000 }
        let taken = graph.clock.connectionMicros(ofLocalMicros: playout &- lead) &* 1000
        let base = UInt64(gst_element_get_base_time(graph.pipeline))
        guard taken > base else {
            gst_buffer_unref(buffer)
            return
        }
        buffer.pointee.pts = GstClockTime(taken &- base)
        buffer.pointee.duration = GstClockTime(UInt64(block.samples.count) * 1_000_000_000 / 48_000)
        _ = gst_app_src_push_buffer(UnsafeMutableRawPointer(source.element).assumingMemoryBound(to: GstAppSrc.self), buffer)
    }

    /// A block as `ReceivedAudio` with its times (the callback output).
    func receivedAudio(_ block: AdaptivePlayout.Block, playoutMicros: UInt64) -> ReceivedAudio? {
        let delay = playout.delayMicros ?? 0
        let presentation = block.timelineMicros ?? (playoutMicros &- delay)
        let sender = block.mediaMicros.flatMap { playout.senderMicros(ofMediaMicros: $0) }
        return ReceivedAudio(samples: block.samples, sampleRate: 48_000, presentationTimeMicros: presentation,
                             playoutTimeMicros: playoutMicros, senderMediaTimeMicros: sender)
    }

    /// Sets the RTP jitter buffer's wait for a missing or reordered packet (its `latency`, counted
    /// from its own output timestamps) to `waitMicros`, as the playout asks
    /// (`AdaptivePlayout.upstreamWaitMicros`, 2…400 ms): a packet is worth waiting for only while
    /// the packets held behind it can still play in time. Changed in steps of 5 ms or more, so that
    /// the latency messages it causes stay rare.
    func retuneJitterBuffer(waitMicros: UInt64) {
        let wanted = UInt32(clamping: waitMicros / 1000)
        onLoop { peer in
            guard let webrtcbin = peer.graph.liveWebrtcbin else { return }
            let current = veil_object_get_uint(gpointerOf(webrtcbin), "latency")
            if abs(Int64(current) - Int64(wanted)) >= 5 { veil_object_set_uint(gpointerOf(webrtcbin), "latency", wanted) }
        }
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
