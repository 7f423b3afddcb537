import CGStreamer
import CVeilGLib
import Foundation
import VeilCore
import VeilGLib

// Closing in bounded steps.
extension PeerConnection {
    /// Closing in three steps, each bounded: close the data channel (so that the remote learns at
    /// once, ≤ 300 ms), finalise an output file (≤ 2 s), then stop the pipeline.
    func beginClosing(_ done: @escaping @Sendable () -> Void) {
        guard let channel = graph.channel, shared.withLock({ $0.channelOpen }) else { return finalizeOutput(done) }
        let once = ResumeOnce<Void>(nil)
        let next: @Sendable () -> Void = { [self] in
            if once.claim() { loop.perform { self.finalizeOutput(done) } }
        }
        shared.withLock { $0.onChannelClosed = next }
        gst_webrtc_data_channel_close(channel)
        loop.after(milliseconds: 300) { next() }
    }

    func finalizeOutput(_ done: @escaping @Sendable () -> Void) {
        let (receiveBin, source) = shared.withLock { shared -> (ElementRef?, ElementRef?) in
            defer {
                shared.receiveBin = nil
                shared.playoutSource = nil
            }
            return (shared.receiveBin, shared.playoutSource)
        }
        // No block is pushed after this: the end of stream below is the output's last buffer.
        playout.stop()
        let finish: @Sendable () -> Void = { [self] in
            self.graph.teardown()
            self.shared.withLock { $0.channelOpen = false }
            self.update(.closed)
            self.signalingSink.finish()
            self.eventSink.finish()
            self.frameSink.finish()
            self.levelSink.finish()
            done()
        }
        // A WAV file gets its final header only from an end-of-stream: send one from the playout's
        // appsrc and wait for it at the file sink before stopping.
        guard case .file = output, let receiveBin, let source, let sink = gst_bin_get_by_name(asBin(receiveBin.element), "sink") else {
            finish()
            return
        }
        let once = ResumeOnce<Void>(nil)
        let complete: @Sendable () -> Void = { [loop] in
            if once.claim() { loop.perform { finish() } }
        }
        if let sinkPad = gst_element_get_static_pad(sink, "sink") {
            addProbe(sinkPad, GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM) { _, info in
                if let event = gst_pad_probe_info_get_event(info), event.pointee.type == GST_EVENT_EOS { complete() }
                return GST_PAD_PROBE_OK
            }
            gst_object_unref(gpointerOf(sinkPad))
        }
        _ = gst_app_src_end_of_stream(UnsafeMutableRawPointer(source.element).assumingMemoryBound(to: GstAppSrc.self))
        gst_object_unref(gpointerOf(sink))
        loop.after(milliseconds: 2000) { complete() }
    }
}
