import CGStreamer
import Foundation
import VeilCore

// The speech level of the voice being sent, for voice-driven avatars.
extension PeerConnection {
    /// On the loop, before the pipeline plays: measures every buffer leaving the mute element (the
    /// 48 kHz mono S16 audio that goes into the encoder, silent while muted) and publishes its RMS
    /// on `outgoingLevels`, timed at the buffer's middle on the media clock (running time plus the
    /// pipeline's base time: the clock RTCP sender reports and `ExpressionFrame`s use).
    func measureOutgoingLevel() {
        guard let volume = graph.volume, let pad = gst_element_get_static_pad(volume, "src") else { return }
        defer { gst_object_unref(gpointerOf(pad)) }
        _ = addProbe(pad, GST_PAD_PROBE_TYPE_BUFFER) { [weak self] pad, info in
            guard let self, let buffer = gst_pad_probe_info_get_buffer(info),
                  let start = Self.localClockTime(pts: buffer.pointee.pts, pad: pad, pipeline: self.graph.pipeline) else { return GST_PAD_PROBE_OK }
            var map = GstMapInfo()
            guard gst_buffer_map(buffer, &map, GST_MAP_READ) != 0 else { return GST_PAD_PROBE_OK }
            defer { gst_buffer_unmap(buffer, &map) }
            let count = Int(map.size) / MemoryLayout<Int16>.size
            guard count > 0, let data = map.data else { return GST_PAD_PROBE_OK }
            var level = UnsafeRawPointer(data).withMemoryRebound(to: Int16.self, capacity: count) { samples in
                AudioLevel(samples: UnsafeBufferPointer(start: samples, count: count), timeMicros: start / 1000, sampleRate: 48_000)
            }
            level.timeMicros += level.durationMicros / 2
            self.levelSink.yield(level)
            return GST_PAD_PROBE_OK
        }
    }
}
