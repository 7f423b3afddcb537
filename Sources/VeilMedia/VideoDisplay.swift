import CGStreamer
import Foundation
import Synchronization
import VeilCore
import VeilVision

/// A window that shows RGB frames, e.g. a call's avatars, through the first of GStreamer's video
/// sinks that opens on this display: `waylandsink` or `glimagesink` under Wayland; `xvimagesink`,
/// `ximagesink` or `glimagesink` under X11 (the X sinks title the window, glimagesink (1.22) calls
/// every window "OpenGL renderer"). Not `autovideosink`: when no display answers, it goes on to
/// kmssink and DirectFB, which take over the console or crash the process.
///
/// ``show(_:)`` never waits for the screen: the window keeps only the newest two frames and draws
/// them as they come (no clock), so a slow display drops frames instead of slowing the call. Call
/// it from any thread. A window the user closes makes the next `show` throw `.displayUnavailable`.
///
/// Without a display (no `DISPLAY` or `WAYLAND_DISPLAY`, as on servers and in CI) `init` throws
/// `.displayUnavailable` at once; write the frames to a file with ``VideoWriter`` instead.
///
/// `@unchecked Sendable`: the GStreamer objects are thread-safe and only touched by the window state,
/// which sits behind a `Mutex`. Everything else is immutable.
public final class VideoDisplay: @unchecked Sendable {
    /// The window's title.
    public let title: String
    /// Width every frame must have.
    public let width: Int
    /// Height every frame must have.
    public let height: Int
    /// The GStreamer sink showing the window, e.g. "glimagesink", for logs.
    public let sinkName: String

    private let window: Mutex<DisplayWindow?>

    /// Opens a window titled `title` for `width` × `height` frames. Throws `.displayUnavailable`
    /// when there is no display or no video sink can open a window on it.
    public convenience init(title: String, width: Int, height: Int) throws {
        try self.init(title: title, width: width, height: height, environment: ProcessInfo.processInfo.environment)
    }

    /// `environment` decides whether there is a display; GStreamer's sinks read the process's own.
    init(title: String, width: Int, height: Int, environment: [String: String]) throws {
        guard (1...16384).contains(width), (1...16384).contains(height) else {
            throw MediaError(.invalidArgument, "window size \(width)×\(height) is out of range; give 1…16384 pixels per side")
        }
        let x11 = environment["DISPLAY"].flatMap { $0.isEmpty ? nil : $0 }
        let wayland = environment["WAYLAND_DISPLAY"].flatMap { $0.isEmpty ? nil : $0 }
        guard x11 != nil || wayland != nil else {
            throw MediaError(.displayUnavailable, "no display: use --out FILE.mp4 (neither DISPLAY nor WAYLAND_DISPLAY is set, so the window '\(title)' cannot open)")
        }
        let displayName = [wayland.map { "Wayland display \($0)" }, x11.map { "X display \($0)" }]
            .compactMap { $0 }.joined(separator: " or ")
        var candidates = wayland == nil ? [] : ["waylandsink", "glimagesink"]
        if x11 != nil { candidates += ["xvimagesink", "ximagesink", "glimagesink"].filter { !candidates.contains($0) } }
        var attempts: [String] = []
        var opened: (DisplayWindow, String)?
        for sink in candidates where GStreamer.hasElement(sink) {
            do {
                // The X sinks draw into a window of Veil's own, which can be kept on top.
                let own = x11 != nil && (sink == "ximagesink" || sink == "xvimagesink") ? x11 : nil
                opened = (try DisplayWindow(title: title, width: width, height: height, sink: sink, x11Display: own), sink)
                break
            } catch let error as MediaError {
                attempts.append("\(sink): \(error.message)")
            }
        }
        guard let (window, sink) = opened else {
            let tried = attempts.isEmpty ? "no video sink is installed (gstreamer1.0-plugins-base/good/bad, gstreamer1.0-gl)" : attempts.joined(separator: "; ")
            throw MediaError(.displayUnavailable, "cannot open the window '\(title)' on the \(displayName) (\(tried)); check that the display is reachable (xdpyinfo), or use --out FILE.mp4")
        }
        self.title = title
        self.width = width
        self.height = height
        self.sinkName = sink
        self.window = Mutex(window)
    }

    /// True until ``close()``, or until the window failed or was closed.
    public var isOpen: Bool {
        window.withLock { $0?.isOpen ?? false }
    }

    /// Shows `image`, which must be `width` × `height`, without waiting for the screen. Throws
    /// `.displayUnavailable` once the window is closed or its sink failed, `.invalidState` after
    /// ``close()``.
    public func show(_ image: RGBImage) throws {
        guard image.width == width, image.height == height, image.pixels.count == width * height * 3 else {
            throw MediaError(.invalidArgument, "frame is \(image.width)×\(image.height) but the window '\(title)' shows \(width)×\(height); resize the frame or open another window")
        }
        try window.withLock { window in
            guard let window else {
                throw MediaError(.invalidState, "the window '\(title)' was closed with close(); open a new VideoDisplay")
            }
            try window.show(image)
        }
    }

    /// Whether the window is in its compact mode (``setCompact(_:)``).
    public var isCompact: Bool {
        window.withLock { $0?.isCompact ?? false }
    }

    /// The compact mode, as call apps have it for working beside a call: the window at half its
    /// size and kept above other windows (on X11, where Veil owns the window; elsewhere only the
    /// picture's size changes). Returns whether the window was asked to stay on top.
    @discardableResult
    public func setCompact(_ compact: Bool) throws -> Bool {
        try window.withLock { window in
            guard let window else {
                throw MediaError(.invalidState, "the window '\(title)' was closed with close(); open a new VideoDisplay")
            }
            return window.setCompact(compact)
        }
    }

    /// Closes the window. Calling it again does nothing.
    public func close() {
        // Releasing the pipeline stops it (state NULL), which closes the window.
        window.withLock { $0 = nil }
    }
}

/// Owns the display pipeline: appsrc (newest two frames) → videoconvert → videoscale to the
/// window's size → a video sink (no sync), drawing into Veil's own X window where there is one.
private final class DisplayWindow {
    private let pipeline: MediaPipeline
    private let source: UnsafeMutablePointer<GstElement>
    private let size: UnsafeMutablePointer<GstElement>
    private let videoInfo: GstVideoInfo
    private let title: String
    /// Veil's own window, for the X sinks; released after the pipeline has stopped (`deinit`).
    private let x11: X11Window?
    private(set) var isCompact = false
    private let start = DispatchTime.now().uptimeNanoseconds
    private var lastPTS: GstClockTime?
    private var failure: MediaError?

    /// Starts the pipeline with `sink`; throws (with GStreamer's reason) when it cannot open a window.
    /// `x11Display`: the X display on which Veil opens the window the sink draws into.
    init(title: String, width: Int, height: Int, sink: String, x11Display: String?) throws {
        self.title = title
        // leaky-type=downstream drops the oldest queued frame, so `show` never blocks.
        pipeline = try MediaPipeline(description: """
            appsrc name=src format=time is-live=true do-timestamp=false block=false max-buffers=2 max-bytes=0 leaky-type=downstream \
            ! videoconvert ! videoscale ! capsfilter name=size caps=video/x-raw,width=\(width),height=\(height) \
            ! \(sink) name=sink sync=false
            """)
        source = try pipeline.element(named: "src")
        size = try pipeline.element(named: "size")
        if let x11Display {
            let window = try X11Window(title: title, width: width, height: height, displayName: x11Display)
            // Before the sink makes a window of its own (on its first frame).
            gst_video_overlay_set_window_handle(OpaquePointer(try pipeline.element(named: "sink")), guintptr(window.id))
            x11 = window
        } else {
            x11 = nil
        }
        var info = GstVideoInfo()
        guard gst_video_info_set_format(&info, GST_VIDEO_FORMAT_RGB, guint(width), guint(height)) != 0 else {
            throw MediaError(.invalidArgument, "GStreamer rejected the window size \(width)×\(height); pick another size")
        }
        info.fps_n = 0  // frames come when the call renders them
        info.fps_d = 1
        videoInfo = info
        guard let caps = gst_video_info_to_caps(&info) else {
            throw MediaError(.gstreamerUnavailable, "GStreamer could not describe RGB frames; check the GStreamer installation")
        }
        gst_app_src_set_caps(appSource, caps)
        gst_caps_unref(caps)

        // Sinks connect to the display on their way to READY, so a failure shows here.
        if pipeline.setState(GST_STATE_PLAYING) == GST_STATE_CHANGE_FAILURE {
            if case .error(let failure)? = pipeline.next(GST_MESSAGE_ERROR, timeout: 1) {
                throw MediaError(.displayUnavailable, failure.message, debugInfo: failure.debugInfo)
            }
            throw MediaError(.displayUnavailable, "it did not start")
        }
        if case .error(let failure)? = pipeline.next(GST_MESSAGE_ERROR, timeout: 0) {
            throw MediaError(.displayUnavailable, failure.message, debugInfo: failure.debugInfo)
        }
        // The sinks name their window after the stream's title tag.
        sendTitle(title)
    }

    private var appSource: UnsafeMutablePointer<GstAppSrc> {
        UnsafeMutableRawPointer(source).assumingMemoryBound(to: GstAppSrc.self)
    }

    deinit {
        // The sink must stop drawing before its window goes.
        _ = pipeline.setState(GST_STATE_NULL)
    }

    var isOpen: Bool { failure == nil }

    /// Half size and on top, or back; returns whether the window was asked to stay on top.
    func setCompact(_ compact: Bool) -> Bool {
        isCompact = compact
        let width = compact ? max(Int(videoInfo.width) / 2, 1) : Int(videoInfo.width)
        let height = compact ? max(Int(videoInfo.height) / 2, 1) : Int(videoInfo.height)
        gst_util_set_object_arg(UnsafeMutableRawPointer(size).assumingMemoryBound(to: GObject.self), "caps",
                                "video/x-raw,width=\(width),height=\(height)")
        guard let x11 else { return false }
        x11.resize(width: width, height: height)
        x11.keepOnTop(compact)
        return true
    }

    func show(_ image: RGBImage) throws {
        if let failure { throw failure }
        if x11?.closed() == true {
            throw fail(MediaError(.displayUnavailable, "the window '\(title)' is gone: it was closed; open a new VideoDisplay, or use --out FILE.mp4"))
        }
        try checkBus()
        let size = Int(videoInfo.size)
        guard let buffer = gst_buffer_new_allocate(nil, gsize(size), nil) else {
            throw MediaError(.streamFailed, "no memory for a frame of the window '\(title)'")
        }
        var map = GstMapInfo()
        guard gst_buffer_map(buffer, &map, GST_MAP_WRITE) != 0, let target = map.data else {
            gst_buffer_unref(buffer)
            throw MediaError(.streamFailed, "a frame buffer for the window '\(title)' could not be mapped into memory")
        }
        let rowBytes = Int(videoInfo.width) * 3, stride = Int(videoInfo.stride.0), rows = Int(videoInfo.height)
        image.pixels.withUnsafeBytes { pixels in
            guard let source = pixels.baseAddress else { return }
            for row in 0..<rows {
                UnsafeMutableRawPointer(target + row * stride).copyMemory(from: source + row * rowBytes, byteCount: rowBytes)
            }
        }
        gst_buffer_unmap(buffer, &map)
        // Timestamps only have to increase: the sink draws without a clock.
        var pts = GstClockTime(DispatchTime.now().uptimeNanoseconds - start)
        if let lastPTS, pts <= lastPTS { pts = lastPTS + 1 }
        buffer.pointee.pts = pts
        lastPTS = pts
        // push_buffer takes the buffer; with a leaky queue it never blocks.
        guard gst_app_src_push_buffer(appSource, buffer) == GST_FLOW_OK else {
            if case .error(let failure)? = pipeline.next(GST_MESSAGE_ERROR, timeout: 0.5) { throw fail(shownError(failure)) }
            throw fail(MediaError(.displayUnavailable, "the window '\(title)' stopped taking frames; open a new VideoDisplay"))
        }
    }

    /// Throws an error GStreamer already reported, without waiting.
    private func checkBus() throws {
        if case .error(let failure)? = pipeline.next(GST_MESSAGE_ERROR, timeout: 0) { throw fail(shownError(failure)) }
    }

    private func fail(_ error: MediaError) -> MediaError {
        failure = error
        return error
    }

    private func shownError(_ failure: GStreamerFailure) -> MediaError {
        if failure.domain == .resource {
            // "Output window was closed", or a display that went away.
            return failure.mediaError(.displayUnavailable, "the window '\(title)' is gone", advice: "open a new VideoDisplay, or use --out FILE.mp4")
        }
        return failure.mediaError(.displayUnavailable, "showing frames in the window '\(title)' failed",
                                  advice: "check the display and the GStreamer installation (GST_DEBUG=3 shows details)")
    }

    /// Queues a title tag ahead of the first frame; appsrc sends it downstream in order.
    private func sendTitle(_ title: String) {
        guard let tags = gst_tag_list_new_empty() else { return }
        var value = GValue()
        g_value_init(&value, g_type_from_name("gchararray"))
        g_value_set_string(&value, title)
        gst_tag_list_add_value(tags, GST_TAG_MERGE_REPLACE, "title", &value)
        g_value_unset(&value)
        // gst_event_new_tag takes the tag list; send_event takes the event.
        if let event = gst_event_new_tag(tags) {
            _ = gst_element_send_event(source, event)
        }
    }
}
