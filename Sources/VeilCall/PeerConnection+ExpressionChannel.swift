import CGStreamer
import CVeilGLib
import Foundation
import VeilCore
import VeilGLib

// The expression data channel: opening, receiving, sending.
extension PeerConnection {
    /// On a webrtcbin thread: the remote opened a data channel.
    func remoteOpenedChannel(_ channel: OpaquePointer) {
        let label = takeString(veil_object_get_string(gpointerOf(channel), "label")) ?? ""
        guard role == .answerer, label == configuration.expressionChannelLabel else {
            // Only one channel, with the agreed label, ever carries data.
            gst_webrtc_data_channel_close(channel)
            return
        }
        g_object_ref(gpointerOf(channel))
        attach(channel)
        let owned = OwnedChannel(channel)
        onLoop { peer in
            guard peer.graph.liveWebrtcbin != nil, peer.graph.channel == nil else { return }
            peer.graph.channel = owned.take()
        }
        if veil_object_get_int(gpointerOf(channel), "ready-state") == Int32(GST_WEBRTC_DATA_CHANNEL_STATE_OPEN.rawValue) {
            channelOpened()
        }
    }

    func attach(_ channel: OpaquePointer) {
        let object = gpointerOf(channel)
        GSignal.connect(object, "on-open") { [weak self] in self?.channelOpened() }
        GSignal.connect(object, "on-close") { [weak self] in
            guard let self else { return }
            let (wasOpen, waiter) = self.shared.withLock { shared -> (Bool, (@Sendable () -> Void)?) in
                defer {
                    shared.channelOpen = false
                    shared.onChannelClosed = nil
                }
                return (shared.channelOpen, shared.onChannelClosed)
            }
            if wasOpen { self.eventSink.yield(.dataChannelClosed) }
            waiter?()
        }
        GSignal.connect(object, "on-error") { [weak self] (error: gpointer?) in
            let message = error.flatMap { $0.assumingMemoryBound(to: GError.self).pointee.message.map { String(cString: $0) } } ?? "unknown error"
            self?.eventSink.yield(.failure(PeerError(.mediaFailed, "expression data channel failed: \(message)")))
        }
        GSignal.connect(object, "on-message-data") { [weak self] (bytes: gpointer?) in
            self?.received(OpaquePointer(bytes))
        }
        GSignal.connect(object, "on-message-string") { [weak self] (text: gpointer?) in
            // Text is never an expression frame.
            let size = text.map { strlen($0.assumingMemoryBound(to: CChar.self)) } ?? 0
            self?.shared.withLock {
                $0.counters.invalidPayloads += 1
                $0.counters.largestPayloadReceived = max($0.counters.largestPayloadReceived, size)
            }
        }
    }

    func channelOpened() {
        let first = shared.withLock { shared -> Bool in
            defer { shared.channelOpen = true }
            return !shared.channelOpen
        }
        if first { eventSink.yield(.dataChannelOpened) }
    }

    /// On the SCTP thread: one data-channel message.
    func received(_ gbytes: OpaquePointer?) {
        let arrival = UInt64(g_get_monotonic_time())
        let size = gbytes.map { Int(g_bytes_get_size($0)) } ?? 0
        // Oversized payloads are rejected without being copied.
        let frame = size <= ExpressionFrame.maximumEncodedSize ? (try? ExpressionFrame(decoding: bytes(of: gbytes))) : nil
        shared.withLock { shared in
            shared.lastMediaMicros = arrival
            shared.counters.largestPayloadReceived = max(shared.counters.largestPayloadReceived, size)
            if frame != nil {
                shared.counters.framesReceived += 1
                shared.counters.bytesReceived += size
            } else {
                shared.counters.invalidPayloads += 1
            }
        }
        if let frame {
            // The voice waits for the avatar's frames a little (AdaptivePlayout.syncedFrameArrived).
            playout.syncedFrameArrived(senderMicros: frame.captureTimeMicros, arrivalMicros: arrival)
            frameSink.yield(ReceivedExpressionFrame(frame: frame, arrivalMediaTimeMicros: arrival, byteCount: size))
        }
    }

    /// On the loop: hands one encoded frame to the channel, or drops it.
    func transmit(_ payload: [UInt8]) {
        guard !payload.isEmpty, let channel = graph.channel, graph.liveWebrtcbin != nil,
              veil_object_get_int(gpointerOf(channel), "ready-state") == Int32(GST_WEBRTC_DATA_CHANNEL_STATE_OPEN.rawValue)
        else {
            shared.withLock { $0.counters.framesDropped += 1 }
            return
        }
        let buffered = veil_object_get_uint64(gpointerOf(channel), "buffered-amount")
        guard ExpressionSendPolicy.shouldSend(bufferedAmount: UInt64(buffered), frameSize: payload.count,
                                              maximumBuffered: configuration.maximumBufferedExpressionBytes) else {
            shared.withLock { $0.counters.framesDropped += 1 }
            return
        }
        let gbytes = payload.withUnsafeBytes { g_bytes_new($0.baseAddress, gsize($0.count)) }
        defer { g_bytes_unref(gbytes) }
        var error: UnsafeMutablePointer<GError>?
        let sent = gst_webrtc_data_channel_send_data_full(channel, gbytes, &error) != 0
        if let error { g_error_free(error) }
        shared.withLock { shared in
            if sent {
                shared.counters.framesSent += 1
                shared.counters.bytesSent += payload.count
            } else {
                shared.counters.framesDropped += 1
            }
        }
    }

    /// Tests only: frames sent plus frames dropped so far.
    func sentAndDroppedForTesting() -> Int {
        shared.withLock { $0.counters.framesSent + $0.counters.framesDropped }
    }

    /// Tests only: puts arbitrary bytes on the expression channel, bypassing the encoder, to check
    /// that the receiving side rejects them.
    func sendUncheckedPayloadForTesting(_ payload: [UInt8]) {
        onLoop { $0.transmit(payload) }
    }
}

// MARK: - Tests only: what the peer's RTCP says

extension PeerConnection {
    /// Tests only: the last session description the remote peer sent.
    var remoteDescriptionForTesting: String? { shared.withLock { $0.remoteDescription } }

    /// Tests only: the certificate the remote peer presented in the DTLS handshake (PEM), once done.
    var remoteCertificateForTesting: String? {
        try? loop.sync {
            var pem: String?
            self.graph.forEachElement { element in
                if pem == nil, factoryName(element) == "dtlssrtpdec" { pem = takeString(veil_object_get_string(gpointerOf(element), "peer-pem")) }
            }
            return pem
        }
    }

    /// Tests only: hands every RTCP compound packet the remote peer sends (as it leaves SRTP
    /// decryption, before rtpbin reads it) to `handler`, on a streaming thread, from now on.
    func observeIncomingRTCPForTesting(_ handler: @escaping @Sendable ([UInt8]) -> Void) {
        let watch: @Sendable (UnsafeMutablePointer<GstPad>) -> Void = { pad in
            guard let name = takeString(gst_object_get_name(UnsafeMutableRawPointer(pad).assumingMemoryBound(to: GstObject.self))),
                  name.hasPrefix("recv_rtcp_sink") else { return }
            _ = addProbe(pad, GST_PAD_PROBE_TYPE_BUFFER) { _, info in
                guard let buffer = gst_pad_probe_info_get_buffer(info) else { return GST_PAD_PROBE_OK }
                var map = GstMapInfo()
                guard gst_buffer_map(buffer, &map, GST_MAP_READ) != 0 else { return GST_PAD_PROBE_OK }
                let bytes = map.data.map { Array(UnsafeBufferPointer(start: $0, count: Int(map.size))) } ?? []
                gst_buffer_unmap(buffer, &map)
                handler(bytes)
                return GST_PAD_PROBE_OK
            }
        }
        try? loop.sync {
            guard let webrtcbin = self.graph.liveWebrtcbin, let rtpbin = gst_bin_get_by_name(asBin(webrtcbin), "rtpbin") else { return }
            defer { gst_object_unref(gpointerOf(rtpbin)) }
            GSignal.connect(gpointerOf(rtpbin), "pad-added") { (pad: gpointer?) in
                if let pad { watch(pad.assumingMemoryBound(to: GstPad.self)) }
            }
            guard let iterator = gst_element_iterate_sink_pads(rtpbin) else { return }
            defer { gst_iterator_free(iterator) }
            var item = GValue()
            while gst_iterator_next(iterator, &item) == GST_ITERATOR_OK {
                if let pad = g_value_get_object(&item) { watch(pad.assumingMemoryBound(to: GstPad.self)) }
                g_value_reset(&item)
            }
            g_value_unset(&item)
        }
    }
}
