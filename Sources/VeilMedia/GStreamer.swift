import CGStreamer

// Everything that touches GStreamer's C API directly lives in this file and in the readers and
// writer that own a pipeline. No C type leaves VeilMedia.

/// One-time initialisation of GStreamer and the helpers shared by Veil's pipelines.
enum GStreamer {
    /// Swift runs a static initialiser exactly once, even under concurrent first use.
    private static let initialization: Result<Void, MediaError> = {
        var error: UnsafeMutablePointer<GError>?
        if gst_init_check(nil, nil, &error) == 0 {
            return .failure(mediaError(consuming: error, kind: .gstreamerUnavailable,
                                       context: "GStreamer could not be initialised",
                                       advice: "check the GStreamer installation (gst-inspect-1.0 --version) and GST_* environment variables"))
        }
        return .success(())
    }()

    /// Initialises GStreamer on first use; throws the same error on every call if that failed.
    static func initialize() throws {
        try initialization.get()
    }

    /// Converts a `GError` (transfer full, may be nil) into a `MediaError` and frees it.
    static func mediaError(consuming error: UnsafeMutablePointer<GError>?, kind: MediaError.Kind,
                           context: String, advice: String) -> MediaError {
        var detail = "unknown error"
        if let error {
            if let message = error.pointee.message { detail = String(cString: message) }
            g_error_free(error)
        }
        return MediaError(kind, "\(context): \(detail); \(advice)")
    }

    /// Sets a string property through a `GValue`, so any value (paths with spaces, quotes, `NULL`)
    /// arrives verbatim: pipeline descriptions and `gst_util_set_object_arg` would parse it.
    static func setString(_ object: UnsafeMutablePointer<GstElement>, _ property: String, _ value: String) throws {
        let gobject = UnsafeMutableRawPointer(object).assumingMemoryBound(to: GObject.self)
        guard let klass = gobject.pointee.g_type_instance.g_class,
              let pspec = g_object_class_find_property(UnsafeMutableRawPointer(klass).assumingMemoryBound(to: GObjectClass.self), property),
              pspec.pointee.value_type == g_type_from_name("gchararray") else {
            throw MediaError(.gstreamerUnavailable, "GStreamer element has no string property '\(property)'; check the GStreamer installation")
        }
        var gvalue = GValue()
        g_value_init(&gvalue, pspec.pointee.value_type)
        g_value_set_string(&gvalue, value)
        g_object_set_property(gobject, property, &gvalue)
        g_value_unset(&gvalue)
    }

    /// True when an element factory called `name` is installed (e.g. `avenc_aac`), so a pipeline
    /// can pick among alternatives before it is built. False when GStreamer is unusable.
    static func hasElement(_ name: String) -> Bool {
        guard (try? initialize()) != nil, let factory = gst_element_factory_find(name) else { return false }
        gst_object_unref(UnsafeMutableRawPointer(factory))
        return true
    }

    /// `value` as a fraction GStreamer caps accept (29.97 → 2997/100).
    static func fraction(_ value: Double) -> (numerator: Int32, denominator: Int32) {
        var numerator: gint = 0, denominator: gint = 1
        gst_util_double_to_fraction(value, &numerator, &denominator)
        return (numerator, denominator)
    }

    /// Nanoseconds for a timeout in seconds, as `GstClockTime` (0 for "do not wait").
    static func clockTime(seconds: Double) -> GstClockTime {
        guard seconds > 0 else { return 0 }
        return GstClockTime(min(seconds, maximumTimeout) * 1e9)
    }

    /// The longest timeout accepted: one day.
    static let maximumTimeout: Double = 86_400

    /// Throws unless `seconds` is a usable timeout (more than 0, at most a day).
    static func validate(timeout seconds: Double) throws {
        guard seconds > 0, seconds <= maximumTimeout else {
            throw MediaError(.invalidArgument, "timeout \(seconds) s is out of range; give more than 0 and at most \(Int(maximumTimeout)) seconds")
        }
    }
}

/// What a bus message said, in Swift terms.
enum BusEvent {
    /// An element failed.
    case error(GStreamerFailure)
    /// An element warned; the pipeline goes on.
    case warning(GStreamerFailure)
    /// The whole pipeline reached end of stream.
    case endOfStream
    /// The pipeline finished an asynchronous state change (e.g. prerolled).
    case asyncDone
    /// An application message: VeilMedia's "a sample is ready" wake-up.
    case wakeUp
    /// Anything else asked for.
    case other
}

/// An error posted on a bus: GStreamer's message, debugging detail and the failing element.
struct GStreamerFailure {
    enum Domain { case core, library, resource, stream, parse, other }
    let domain: Domain
    let code: Int32
    let message: String
    let debugInfo: String?
    let element: String?

    /// True for failures that mean "this input is not something GStreamer can decode".
    var isUnsupportedInput: Bool {
        switch domain {
        case .stream:
            return code == GST_STREAM_ERROR_TYPE_NOT_FOUND.rawValue || code == GST_STREAM_ERROR_WRONG_TYPE.rawValue
                || code == GST_STREAM_ERROR_CODEC_NOT_FOUND.rawValue || code == GST_STREAM_ERROR_DEMUX.rawValue
                || code == GST_STREAM_ERROR_DECODE.rawValue || code == GST_STREAM_ERROR_FORMAT.rawValue
        case .core:
            return code == GST_CORE_ERROR_MISSING_PLUGIN.rawValue
        default:
            return false
        }
    }

    /// True for failures to open or find a resource (file, device).
    var isResourceMissing: Bool {
        domain == .resource && (code == GST_RESOURCE_ERROR_NOT_FOUND.rawValue || code == GST_RESOURCE_ERROR_OPEN_READ.rawValue
            || code == GST_RESOURCE_ERROR_OPEN_READ_WRITE.rawValue || code == GST_RESOURCE_ERROR_BUSY.rawValue
            || code == GST_RESOURCE_ERROR_SETTINGS.rawValue)
    }

    /// True for the warning a pipeline description posts when a `decodebin ! element` link never
    /// happened: the input had no stream of the kind the element takes (no audio, no video).
    var isUnresolvedLink: Bool {
        domain == .parse && code == GST_PARSE_ERROR_DELAYED_LINK.rawValue
    }

    /// True for failures to create or write output.
    var isNotWritable: Bool {
        domain == .resource && (code == GST_RESOURCE_ERROR_OPEN_WRITE.rawValue || code == GST_RESOURCE_ERROR_WRITE.rawValue
            || code == GST_RESOURCE_ERROR_NO_SPACE_LEFT.rawValue || code == GST_RESOURCE_ERROR_CLOSE.rawValue
            || code == GST_RESOURCE_ERROR_NOT_AUTHORIZED.rawValue)
    }

    /// A `MediaError` saying `context` failed with GStreamer's message, then `advice`.
    func mediaError(_ kind: MediaError.Kind, _ context: String, advice: String) -> MediaError {
        let message = self.message.hasSuffix(".") ? String(self.message.dropLast()) : self.message
        // Element names ("sink", "typefind") mean nothing to a user: they go to debugInfo only.
        let debug = [element.map { "element \($0)" }, debugInfo].compactMap { $0 }.joined(separator: ": ")
        return MediaError(kind, "\(context): \(message); \(advice)", debugInfo: debug.isEmpty ? nil : debug)
    }
}

/// Owns one GStreamer pipeline built from a description and its bus. `deinit` stops the pipeline
/// (state NULL) and releases every reference this object took.
final class MediaPipeline {
    let element: UnsafeMutablePointer<GstElement>
    let bus: UnsafeMutablePointer<GstBus>
    private var namedElements: [UnsafeMutablePointer<GstElement>] = []

    /// Builds the pipeline. `description` must not contain user input: set such values with
    /// `GStreamer.setString` on a named element instead.
    init(description: String) throws {
        try GStreamer.initialize()
        var error: UnsafeMutablePointer<GError>?
        let built = gst_parse_launch(description, &error)
        if let error {
            // A partially built pipeline (missing element) comes back together with an error.
            if let built { gst_object_unref(UnsafeMutableRawPointer(built)) }
            throw GStreamer.mediaError(consuming: error, kind: .gstreamerUnavailable,
                                       context: "GStreamer could not build the pipeline '\(description)'",
                                       advice: "install the missing GStreamer plugins (gstreamer1.0-plugins-base/good/ugly, gstreamer1.0-libav)")
        }
        guard let built else {
            throw MediaError(.gstreamerUnavailable, "GStreamer could not build the pipeline '\(description)'; check the GStreamer installation")
        }
        // gst_parse_launch returns a floating reference: take ownership of it.
        gst_object_ref_sink(UnsafeMutableRawPointer(built))
        guard let bus = gst_element_get_bus(built) else {
            gst_object_unref(UnsafeMutableRawPointer(built))
            throw MediaError(.gstreamerUnavailable, "GStreamer pipeline has no bus; check the GStreamer installation")
        }
        self.element = built
        self.bus = bus
    }

    deinit {
        gst_element_set_state(element, GST_STATE_NULL)
        gst_bus_set_sync_handler(bus, nil, nil, nil)
        for named in namedElements { gst_object_unref(UnsafeMutableRawPointer(named)) }
        gst_object_unref(UnsafeMutableRawPointer(bus))
        gst_object_unref(UnsafeMutableRawPointer(element))
    }

    /// Makes a push blocked on one of `sources` (appsrcs with a queue limit) return when the
    /// pipeline fails: a bus sync handler, on the thread that posts the error, lifts their limits.
    /// The appsrcs outlive the handler: `deinit` removes it (releasing its box) before the
    /// elements are released.
    func unblockOnError(_ sources: [UnsafeMutablePointer<GstElement>]) {
        gst_bus_set_sync_handler(bus, { _, message, box in
            if let message, let box, message.pointee.type == GST_MESSAGE_ERROR {
                Unmanaged<BlockingSources>.fromOpaque(box).takeUnretainedValue().unblock()
            }
            return GST_BUS_PASS
        }, Unmanaged.passRetained(BlockingSources(sources)).toOpaque(), { box in
            if let box { Unmanaged<BlockingSources>.fromOpaque(box).release() }
        })
    }

    /// The element called `name` in the pipeline description; the pipeline keeps the reference.
    func element(named name: String) throws -> UnsafeMutablePointer<GstElement> {
        let bin = UnsafeMutableRawPointer(element).assumingMemoryBound(to: GstBin.self)
        guard let found = gst_bin_get_by_name(bin, name) else {
            throw MediaError(.gstreamerUnavailable, "GStreamer pipeline lacks its element '\(name)'; check the GStreamer installation")
        }
        namedElements.append(found)
        return found
    }

    /// Requests a state change. On `GST_STATE_CHANGE_FAILURE` the reason is on the bus.
    @discardableResult
    func setState(_ state: GstState) -> GstStateChangeReturn {
        gst_element_set_state(element, state)
    }

    /// Waits up to `timeout` seconds (nil: forever, 0: do not wait) for a message of one of `types`,
    /// discarding other messages on the way. Returns nil on timeout.
    func next(_ types: GstMessageType, timeout: Double?) -> BusEvent? {
        let nanoseconds = timeout.map { GStreamer.clockTime(seconds: $0) } ?? GstClockTime.max  // max is GST_CLOCK_TIME_NONE
        guard let message = gst_bus_timed_pop_filtered(bus, nanoseconds, types) else { return nil }
        defer { gst_message_unref(message) }
        return BusEvent(message)
    }

    /// True when the pipeline has an element called `name` whose sink pad nothing is linked to.
    func hasUnlinkedInput(element name: String) -> Bool {
        let bin = UnsafeMutableRawPointer(element).assumingMemoryBound(to: GstBin.self)
        guard let found = gst_bin_get_by_name(bin, name) else { return false }
        defer { gst_object_unref(UnsafeMutableRawPointer(found)) }
        guard let pad = gst_element_get_static_pad(found, "sink") else { return false }
        defer { gst_object_unref(UnsafeMutableRawPointer(pad)) }
        return gst_pad_is_linked(pad) == 0
    }

    /// Makes the appsink `sink` post an application message (a `.wakeUp`) on its bus after queueing
    /// each sample, so a reader waits in one place, the bus, for samples, the end and errors.
    static func postWakeUps(fromAppSink sink: UnsafeMutablePointer<GstElement>) {
        var callbacks = GstAppSinkCallbacks()
        callbacks.new_sample = { appSink, _ in
            // Runs on a streaming thread; posting on the bus is thread-safe and wakes the reader.
            guard let appSink, let structure = gst_structure_new_empty("veil-sample-ready") else { return GST_FLOW_OK }
            let object = UnsafeMutableRawPointer(appSink).assumingMemoryBound(to: GstObject.self)
            if let message = gst_message_new_application(object, structure) {
                gst_element_post_message(UnsafeMutableRawPointer(appSink).assumingMemoryBound(to: GstElement.self), message)
            }
            return GST_FLOW_OK
        }
        gst_app_sink_set_callbacks(UnsafeMutableRawPointer(sink).assumingMemoryBound(to: GstAppSink.self), &callbacks, nil, nil)
    }

    /// Total duration in nanoseconds, when the pipeline knows it.
    func durationNanoseconds() -> UInt64? {
        var duration: gint64 = -1
        guard gst_element_query_duration(element, GST_FORMAT_TIME, &duration) != 0, duration > 0 else { return nil }
        return UInt64(duration)
    }
}

extension BusEvent {
    init(_ message: UnsafeMutablePointer<GstMessage>) {
        let type = message.pointee.type
        if type == GST_MESSAGE_ERROR || type == GST_MESSAGE_WARNING {
            var error: UnsafeMutablePointer<GError>?
            var debug: UnsafeMutablePointer<gchar>?
            if type == GST_MESSAGE_ERROR {
                gst_message_parse_error(message, &error, &debug)
            } else {
                gst_message_parse_warning(message, &error, &debug)
            }
            var domain = GStreamerFailure.Domain.other
            var code: Int32 = 0
            var text = "unknown error"
            if let error {
                code = error.pointee.code
                switch error.pointee.domain {
                case gst_core_error_quark(): domain = .core
                case gst_library_error_quark(): domain = .library
                case gst_resource_error_quark(): domain = .resource
                case gst_stream_error_quark(): domain = .stream
                case gst_parse_error_quark(): domain = .parse
                default: domain = .other
                }
                if let m = error.pointee.message { text = String(cString: m) }
                g_error_free(error)
            }
            var debugInfo: String?
            if let debug { debugInfo = String(cString: debug); g_free(debug) }
            var elementName: String?
            if let source = message.pointee.src, let name = gst_object_get_name(source) {
                elementName = String(cString: name)
                g_free(name)
            }
            let failure = GStreamerFailure(domain: domain, code: code, message: text, debugInfo: debugInfo, element: elementName)
            self = type == GST_MESSAGE_ERROR ? .error(failure) : .warning(failure)
        } else if type == GST_MESSAGE_EOS {
            self = .endOfStream
        } else if type == GST_MESSAGE_ASYNC_DONE {
            self = .asyncDone
        } else if type == GST_MESSAGE_APPLICATION {
            self = .wakeUp
        } else {
            self = .other
        }
    }
}

extension GstMessageType {
    /// The union of message types, for `gst_bus_timed_pop_filtered`.
    static func | (a: GstMessageType, b: GstMessageType) -> GstMessageType {
        GstMessageType(rawValue: a.rawValue | b.rawValue)
    }
}

/// The appsrcs a failing pipeline must unblock, owned by the bus's sync handler (released by its
/// destroy notify); installed by `MediaPipeline.unblockOnError(_:)`. `@unchecked Sendable`: the
/// handler runs on streaming threads, the array never changes, and `gst_app_src_set_max_buffers` is
/// thread-safe.
private final class BlockingSources: @unchecked Sendable {
    private let sources: [UnsafeMutablePointer<GstElement>]

    init(_ sources: [UnsafeMutablePointer<GstElement>]) { self.sources = sources }

    /// Lifts every queue limit, so a blocked `push_buffer` returns.
    func unblock() {
        for source in sources {
            gst_app_src_set_max_buffers(UnsafeMutableRawPointer(source).assumingMemoryBound(to: GstAppSrc.self), 0)
        }
    }
}
