import CGStreamer
import CVeilGLib
import Foundation
import VeilCore

// Mute, and the speech level of the voice being sent for voice-driven avatars, buffer by buffer.
extension PeerConnection {
    /// On the loop, before the pipeline plays: watches every buffer entering the mute element (the
    /// 48 kHz mono S16 audio that goes into the encoder). For each one, on its streaming thread and
    /// just before the element processes it, the element is muted or unmuted as `setMuted` last
    /// said, and the buffer's RMS (0 and `muted` when muted) is published on `outgoingLevels`, timed
    /// at the buffer's middle on the device's media clock (running time plus the pipeline's base
    /// time, moved back from the connection's clock: the time a frame sent with it is stamped
    /// with, which the connection moves to its own clock as it does the RTCP sender reports). So the level that drives a
    /// voice-driven mouth always describes exactly what was sent, however late the loop runs.
    func measureOutgoingLevel() {
        guard let volume = graph.volume, let pad = gst_element_get_static_pad(volume, "sink") else { return }
        defer { gst_object_unref(gpointerOf(pad)) }
        _ = addProbe(pad, GST_PAD_PROBE_TYPE_BUFFER) { [weak self] pad, info in
            guard let self, let buffer = gst_pad_probe_info_get_buffer(info) else { return GST_PAD_PROBE_OK }
            let (muted, changed) = self.shared.withLock { s in
                defer { s.appliedMute = s.muted }
                return (s.muted, s.appliedMute != s.muted)
            }
            if changed, let volume = self.graph.volume { veil_object_set_bool(gpointerOf(volume), "mute", muted ? 1 : 0) }
            guard let start = self.graph.mediaTimeMicros(pts: buffer.pointee.pts, pad: pad) else { return GST_PAD_PROBE_OK }
            var map = GstMapInfo()
            guard gst_buffer_map(buffer, &map, GST_MAP_READ) != 0 else { return GST_PAD_PROBE_OK }
            defer { gst_buffer_unmap(buffer, &map) }
            let count = Int(map.size) / MemoryLayout<Int16>.size
            guard count > 0, let data = map.data else { return GST_PAD_PROBE_OK }
            var level = UnsafeRawPointer(data).withMemoryRebound(to: Int16.self, capacity: count) { samples in
                AudioLevel(samples: UnsafeBufferPointer(start: samples, count: count), timeMicros: start,
                           sampleRate: 48_000, muted: muted)
            }
            level.timeMicros += level.durationMicros / 2
            self.levelSink.yield(level)
            return GST_PAD_PROBE_OK
        }
    }
}
