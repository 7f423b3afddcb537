import CGStreamer
import CVeilGLib
import Foundation
import VeilGLib

// The GStreamer plumbing of the call layer: initialisation, casts, GValue properties, and the
// C-callback trampolines VeilGLib does not cover (promises, pad probes, appsink, bus watches,
// deep-element-added). Everything here is internal; no C type leaves VeilCall.

/// One-time GStreamer set-up for calls.
enum CallGStreamer {
    private static let initialization: Result<Void, PeerError> = {
        var error: UnsafeMutablePointer<GError>?
        guard gst_init_check(nil, nil, &error) != 0 else {
            let detail = error.flatMap { $0.pointee.message.map { String(cString: $0) } } ?? "unknown error"
            if let error { g_error_free(error) }
            return .failure(PeerError(.gstreamerUnavailable, "GStreamer could not be initialised: \(detail); check the installation (gst-inspect-1.0 --version)"))
        }
        for element in ["webrtcbin", "nicesrc", "dtlsdec", "srtpenc", "sctpenc", "opusenc", "opusdec", "rtpopuspay", "rtpopusdepay", "audiotestsrc", "audiomixer"]
        where gst_element_factory_find(element).map({ gst_object_unref(UnsafeMutableRawPointer($0)); return true }) != true {
            return .failure(PeerError(.gstreamerUnavailable, "GStreamer element '\(element)' is missing; install gstreamer1.0-plugins-base, -good, -bad and gstreamer1.0-nice"))
        }
        return .success(())
    }()

    /// Initialises GStreamer and checks the WebRTC elements exist; throws the same error every time if not.
    static func initialize() throws {
        try initialization.get()
    }

    /// GStreamer's DTLS elements generate one self-signed certificate per process, when the first
    /// one is created (RSA key generation: 0.1–0.3 s measured here, up to 1 s on slower machines);
    /// creating one here takes that cost up front.
    static let certificate: Result<Void, PeerError> = {
        do { try initialize() } catch let error as PeerError { return .failure(error) } catch { return .failure(PeerError(.gstreamerUnavailable, "\(error)")) }
        guard let element = gst_element_factory_make("dtlsdec", nil) else {
            return .failure(PeerError(.gstreamerUnavailable, "GStreamer element 'dtlsdec' is missing; install gstreamer1.0-plugins-bad"))
        }
        gst_object_unref(UnsafeMutableRawPointer(element))
        return .success(())
    }()

    static let uint64Type = g_type_from_name("guint64")
    static let stringType = g_type_from_name("gchararray")
    static let structureType = gst_structure_get_type()
    /// Caps of the reference-timestamp meta rtpjitterbuffer adds after RTCP synchronisation.
    static let ntpReferenceCaps: UnsafeMutablePointer<GstCaps>? = gst_caps_from_string("timestamp/x-ntp")
}

// MARK: - Casts and small helpers

@inline(__always) func gpointerOf<T>(_ pointer: UnsafeMutablePointer<T>) -> gpointer { UnsafeMutableRawPointer(pointer) }
@inline(__always) func gpointerOf(_ pointer: OpaquePointer) -> gpointer { UnsafeMutableRawPointer(pointer) }

@inline(__always) func asBin(_ element: UnsafeMutablePointer<GstElement>) -> UnsafeMutablePointer<GstBin> {
    UnsafeMutableRawPointer(element).assumingMemoryBound(to: GstBin.self)
}

@inline(__always) func asElement(_ pointer: gpointer) -> UnsafeMutablePointer<GstElement> {
    pointer.assumingMemoryBound(to: GstElement.self)
}

/// A GLib-allocated string as Swift, freeing it.
func takeString(_ pointer: UnsafeMutablePointer<gchar>?) -> String? {
    guard let pointer else { return nil }
    defer { g_free(pointer) }
    return String(cString: pointer)
}

/// Sets a guint64 property (the C shim has no typed setter for it).
func setUInt64(_ object: gpointer, _ property: String, _ value: UInt64) {
    var gvalue = GValue()
    g_value_init(&gvalue, CallGStreamer.uint64Type)
    g_value_set_uint64(&gvalue, guint64(value))
    g_object_set_property(object.assumingMemoryBound(to: GObject.self), property, &gvalue)
    g_value_unset(&gvalue)
}

/// The RTP timestamp of an RTP packet; nil for a buffer that is not one.
func rtpTimestamp(of buffer: UnsafeMutablePointer<GstBuffer>) -> UInt32? {
    var rtp = GstRTPBuffer()
    guard gst_rtp_buffer_map(buffer, GST_MAP_READ, &rtp) != 0 else { return nil }
    defer { gst_rtp_buffer_unmap(&rtp) }
    return gst_rtp_buffer_get_timestamp(&rtp)
}

/// The factory name of an element ("rtpsession", "nicesrc", …), or "".
func factoryName(_ element: UnsafeMutablePointer<GstElement>) -> String {
    guard let factory = gst_element_get_factory(element) else { return "" }
    return takeString(gst_object_get_name(UnsafeMutableRawPointer(factory).assumingMemoryBound(to: GstObject.self))) ?? ""
}

/// Current time of GStreamer's system clock (CLOCK_MONOTONIC) in nanoseconds.
func monotonicNanoseconds() -> UInt64 {
    UInt64(g_get_monotonic_time()) &* 1000
}

/// A GValue as text: strings verbatim, everything else as GStreamer serialises it.
func text(of value: UnsafePointer<GValue>) -> String? {
    if value.pointee.g_type == CallGStreamer.stringType {
        return g_value_get_string(value).map { String(cString: $0) }
    }
    return takeString(gst_value_serialize(value))
}

/// A get-stats reply as entries (each a structure with `type` = its name).
func statsEntries(_ reply: UnsafePointer<GstStructure>) -> [StatsEntry] {
    let collector = StatsCollector()
    _ = gst_structure_foreach(reply, { _, value, data in
        guard let value, let data, value.pointee.g_type == CallGStreamer.structureType,
              let structure = gst_value_get_structure(value) else { return 1 }
        let fields = StatsFields()
        _ = gst_structure_foreach(structure, { quark, value, data in
            guard let value, let data, let name = g_quark_to_string(quark),
                  value.pointee.g_type != CallGStreamer.structureType else { return 1 }
            Unmanaged<StatsFields>.fromOpaque(data).takeUnretainedValue().values[String(cString: name)] = text(of: value)
            return 1
        }, Unmanaged.passUnretained(fields).toOpaque())
        let type = String(cString: gst_structure_get_name(structure))
        Unmanaged<StatsCollector>.fromOpaque(data).takeUnretainedValue().entries.append(StatsEntry(type: type, fields: fields.values))
        return 1
    }, Unmanaged.passUnretained(collector).toOpaque())
    return collector.entries
}

private final class StatsCollector { var entries: [StatsEntry] = [] }
private final class StatsFields { var values: [String: String] = [:] }

// MARK: - Callback trampolines (retained box as user data, released by the destroy notify)

final class CallbackBox<T> {
    let value: T
    init(_ value: T) { self.value = value }
}

private let releaseBox: GDestroyNotify = { data in
    if let data { Unmanaged<AnyObject>.fromOpaque(data).release() }
}

@inline(__always) private func unbox<T>(_ data: gpointer?) -> T? {
    guard let data else { return nil }
    return Unmanaged<CallbackBox<T>>.fromOpaque(data).takeUnretainedValue().value
}

@inline(__always) private func retain<T>(_ value: T) -> gpointer {
    Unmanaged.passRetained(CallbackBox(value)).toOpaque()
}

/// A promise whose reply (or interruption) calls `body`, on a webrtcbin thread. The caller owns
/// the returned reference and passes it to an action signal, then unrefs it.
func makePromise(_ body: @escaping @Sendable (UnsafeMutablePointer<GstPromise>) -> Void) -> UnsafeMutablePointer<GstPromise> {
    typealias F = @Sendable (UnsafeMutablePointer<GstPromise>) -> Void
    return gst_promise_new_with_change_func({ promise, data in
        if let promise, let body: F = unbox(data) { body(promise) }
    }, retain(body as F), releaseBox)
}

/// The reply of a promise that was replied to; nil when it was interrupted or expired.
func reply(of promise: UnsafeMutablePointer<GstPromise>) -> UnsafePointer<GstStructure>? {
    guard gst_promise_wait(promise) == GST_PROMISE_RESULT_REPLIED else { return nil }
    return gst_promise_get_reply(promise)
}

/// The error message a promise reply carries in its "error" field, if any.
func replyError(_ reply: UnsafePointer<GstStructure>?) -> String? {
    guard let reply, gst_structure_has_field(reply, "error") != 0, let value = gst_structure_get_value(reply, "error") else { return nil }
    if let boxed = g_value_get_boxed(value) {
        let error = boxed.assumingMemoryBound(to: GError.self)
        return error.pointee.message.map { String(cString: $0) } ?? "unknown error"
    }
    return "unknown error"
}

/// Adds a pad probe; `body` gets the pad and the probe info on the streaming thread and returns
/// what GStreamer should do.
@discardableResult
func addProbe(_ pad: UnsafeMutablePointer<GstPad>, _ mask: GstPadProbeType,
              _ body: @escaping @Sendable (UnsafeMutablePointer<GstPad>, UnsafeMutablePointer<GstPadProbeInfo>) -> GstPadProbeReturn) -> UInt {
    typealias F = @Sendable (UnsafeMutablePointer<GstPad>, UnsafeMutablePointer<GstPadProbeInfo>) -> GstPadProbeReturn
    return UInt(gst_pad_add_probe(pad, mask, { pad, info, data in
        guard let pad, let info, let body: F = unbox(data) else { return GST_PAD_PROBE_OK }
        return body(pad, info)
    }, retain(body as F), releaseBox))
}

/// Calls `body` with every sample an appsink receives and the latency (ns) the sink renders it
/// with, on its streaming thread.
func setNewSampleCallback(_ appsink: UnsafeMutablePointer<GstElement>,
                          _ body: @escaping @Sendable (OpaquePointer, UInt64) -> Void) {
    typealias F = @Sendable (OpaquePointer, UInt64) -> Void
    var callbacks = GstAppSinkCallbacks()
    callbacks.new_sample = { sink, data in
        guard let sink, let sample = gst_app_sink_pull_sample(sink) else { return GST_FLOW_EOS }
        let latency = UInt64(gst_base_sink_get_latency(UnsafeMutableRawPointer(sink).assumingMemoryBound(to: GstBaseSink.self)))
        if let body: F = unbox(data) { body(sample, latency) }
        gst_sample_unref(sample)
        return GST_FLOW_OK
    }
    gst_app_sink_set_callbacks(UnsafeMutableRawPointer(appsink).assumingMemoryBound(to: GstAppSink.self),
                               &callbacks, retain(body as F), releaseBox)
}

/// Watches a bus on the calling thread's default main context (call it on the loop).
func addBusWatch(_ bus: UnsafeMutablePointer<GstBus>, _ body: @escaping @Sendable (UnsafeMutablePointer<GstMessage>) -> Void) {
    typealias F = @Sendable (UnsafeMutablePointer<GstMessage>) -> Void
    _ = gst_bus_add_watch_full(bus, G_PRIORITY_DEFAULT, { _, message, data in
        if let message, let body: F = unbox(data) { body(message) }
        return 1
    }, retain(body as F), releaseBox)
}

/// GstBin "deep-element-added": `void (*)(GstBin *self, GstBin *sub_bin, GstElement *element, gpointer)`.
func onDeepElementAdded(_ bin: UnsafeMutablePointer<GstElement>, _ body: @escaping @Sendable (UnsafeMutablePointer<GstElement>) -> Void) {
    typealias F = @Sendable (UnsafeMutablePointer<GstElement>) -> Void
    let trampoline: @convention(c) (gpointer?, gpointer?, gpointer?, gpointer?) -> Void = { _, _, element, data in
        if let element, let body: F = unbox(data) { body(asElement(element)) }
    }
    _ = g_signal_connect_data(gpointerOf(bin), "deep-element-added", unsafeBitCast(trampoline, to: GCallback.self),
                          retain(body as F), { data, _ in if let data { Unmanaged<AnyObject>.fromOpaque(data).release() } },
                          GConnectFlags(rawValue: 0))
}
