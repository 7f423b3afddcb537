internal import CCairo
import VeilCore
import VeilVision
import VeilRender

/// A `Canvas` drawing with Cairo into an in-memory ARGB32 image of a fixed size.
///
/// It owns its surface and context (created in `init`, destroyed in `deinit`) and the surfaces
/// it converts images into; it is confined to one thread at a time and not `Sendable`. Read the
/// result with `copy(into:)` (no allocation once the destination has the right size) or `rgbImage()`;
/// partly transparent pixels read as if composited over black.
public final class CairoCanvas: Canvas {
    /// Width in pixels.
    public let width: Int
    /// Height in pixels.
    public let height: Int

    private let surface: OpaquePointer
    private let cr: OpaquePointer
    /// Reused for `RGBImage`s, which may change between calls (video).
    private var frameSurface: OpaquePointer?
    private var frameSize = (width: 0, height: 0)
    /// Conversions of immutable `CanvasImage`s, kept while the image lives.
    private var imageCache: [CachedImage] = []
    private static let imageCacheLimit = 4

    private final class CachedImage {
        weak var image: CanvasImage?
        let source: OpaquePointer
        var scaled: OpaquePointer?
        var scaledSize = (width: 0, height: 0)
        init(image: CanvasImage, source: OpaquePointer) { self.image = image; self.source = source }
        deinit {
            cairo_surface_destroy(source)
            if let scaled { cairo_surface_destroy(scaled) }
        }
    }

    /// A canvas of `width` × `height` pixels, cleared to transparent black.
    /// - Throws: `VeilError.invalidInput` for a size Cairo cannot allocate.
    public init(width: Int, height: Int) throws {
        guard width > 0, height > 0, width <= 32767, height <= 32767 else {
            throw VeilError.invalidInput("canvas size \(width)×\(height) is outside 1…32767 pixels per side")
        }
        guard let surface = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, Int32(width), Int32(height)) else {
            throw VeilError.invalidInput("cairo could not create a \(width)×\(height) surface")
        }
        let status = cairo_surface_status(surface)
        guard status == CAIRO_STATUS_SUCCESS else {
            cairo_surface_destroy(surface)
            throw CairoCanvas.error(status, "creating a \(width)×\(height) surface")
        }
        guard let cr = cairo_create(surface) else {
            cairo_surface_destroy(surface)
            throw VeilError.invalidInput("cairo could not create a drawing context")
        }
        let crStatus = cairo_status(cr)
        guard crStatus == CAIRO_STATUS_SUCCESS else {
            cairo_destroy(cr)
            cairo_surface_destroy(surface)
            throw CairoCanvas.error(crStatus, "creating a drawing context")
        }
        self.width = width
        self.height = height
        self.surface = surface
        self.cr = cr
        cairo_set_antialias(cr, CAIRO_ANTIALIAS_GOOD)
    }

    deinit {
        imageCache.removeAll()
        if let frameSurface { cairo_surface_destroy(frameSurface) }
        cairo_destroy(cr)
        cairo_surface_destroy(surface)
    }

    /// The one place Cairo statuses become Swift errors.
    private static func error(_ status: cairo_status_t, _ what: String) -> VeilError {
        let reason = cairo_status_to_string(status).map { String(cString: $0) } ?? "status \(status.rawValue)"
        return VeilError.io("cairo failed \(what): \(reason)")
    }

    // MARK: output

    /// Copies the canvas into `image` as packed RGB, resizing it if needed (no allocation when it
    /// already has the canvas's size). Transparent pixels come out black.
    public func copy(into image: inout RGBImage) {
        cairo_surface_flush(surface)
        if image.width != width || image.height != height { image.resize(width: width, height: height) }
        guard let data = cairo_image_surface_get_data(surface) else { return }
        let stride = Int(cairo_image_surface_get_stride(surface))
        let w = width, h = height
        image.pixels.withUnsafeMutableBufferPointer { dst in
            guard let out = dst.baseAddress else { return }
            for y in 0..<h {
                // ARGB32 is premultiplied: its colour channels already are the colour over black.
                let row = UnsafeRawPointer(data + y * stride).assumingMemoryBound(to: UInt32.self)
                var o = out + y * w * 3
                for x in 0..<w {
                    let v = row[x]
                    o[0] = UInt8(truncatingIfNeeded: v >> 16)
                    o[1] = UInt8(truncatingIfNeeded: v >> 8)
                    o[2] = UInt8(truncatingIfNeeded: v)
                    o += 3
                }
            }
        }
    }

    /// The canvas as a new packed RGB image (transparent pixels black).
    public func rgbImage() -> RGBImage {
        var image = RGBImage(width: width, height: height)
        copy(into: &image)
        return image
    }

    /// Writes the canvas (with alpha) as a PNG file. Slow (~15 ms at 640×480): keep it off the
    /// per-frame path.
    /// - Throws: `VeilError.io` when the file cannot be written.
    public func writePNG(to path: String) throws {
        cairo_surface_flush(surface)
        let status = cairo_surface_write_to_png(surface, path)
        guard status == CAIRO_STATUS_SUCCESS else { throw CairoCanvas.error(status, "writing PNG \(path)") }
    }

    // MARK: Canvas

    /// Replaces the pixels inside the clip with `color`.
    public func clear(_ color: Color) {
        cairo_save(cr)
        cairo_set_operator(cr, CAIRO_OPERATOR_SOURCE)
        setColor(color)
        cairo_paint(cr)
        cairo_restore(cr)
    }

    /// Pushes transformation and clip.
    public func save() { cairo_save(cr) }
    /// Pops transformation and clip.
    public func restore() { cairo_restore(cr) }
    /// Moves the origin.
    public func translate(x: Float, y: Float) { cairo_translate(cr, Double(x), Double(y)) }
    /// Scales the axes.
    public func scale(x: Float, y: Float) { cairo_scale(cr, Double(x), Double(y)) }
    /// Rotates the axes clockwise on screen.
    public func rotate(radians: Float) { cairo_rotate(cr, Double(radians)) }

    /// Discards the current path.
    public func beginPath() { cairo_new_path(cr) }
    /// Starts a sub-path.
    public func move(to point: Point2) { cairo_move_to(cr, Double(point.x), Double(point.y)) }
    /// Adds a straight segment.
    public func line(to point: Point2) { cairo_line_to(cr, Double(point.x), Double(point.y)) }
    /// Adds a cubic Bézier segment.
    public func curve(to point: Point2, control1: Point2, control2: Point2) {
        cairo_curve_to(cr, Double(control1.x), Double(control1.y), Double(control2.x), Double(control2.y),
                       Double(point.x), Double(point.y))
    }
    /// Closes the sub-path.
    public func closePath() { cairo_close_path(cr) }

    /// Adds an ellipse inscribed in `rect`.
    public func addEllipse(in rect: Rect) {
        guard rect.width > 0, rect.height > 0 else { return }
        let c = rect.center
        cairo_save(cr)
        cairo_translate(cr, Double(c.x), Double(c.y))
        cairo_scale(cr, Double(rect.width / 2), Double(rect.height / 2))
        cairo_new_sub_path(cr)
        cairo_arc(cr, 0, 0, 1, 0, 2 * Double.pi)
        cairo_close_path(cr)
        cairo_restore(cr)
    }

    /// Adds a rectangle.
    public func addRect(_ rect: Rect) {
        cairo_rectangle(cr, Double(rect.x), Double(rect.y), Double(rect.width), Double(rect.height))
    }

    /// Fills and consumes the current path.
    public func fillPath(_ paint: Paint, rule: FillRule) {
        setPaint(paint)
        cairo_set_fill_rule(cr, rule == .evenOdd ? CAIRO_FILL_RULE_EVEN_ODD : CAIRO_FILL_RULE_WINDING)
        cairo_fill(cr)
    }

    /// Strokes and consumes the current path.
    public func strokePath(_ color: Color, style: StrokeStyle) {
        setColor(color)
        setStroke(style)
        cairo_stroke(cr)
    }

    /// Fills, strokes and consumes the current path.
    public func fillAndStrokePath(fill: Paint, stroke: Color, style: StrokeStyle) {
        setPaint(fill)
        cairo_set_fill_rule(cr, CAIRO_FILL_RULE_WINDING)
        cairo_fill_preserve(cr)
        setColor(stroke)
        setStroke(style)
        cairo_stroke(cr)
    }

    /// Intersects the clip with the current path.
    public func clipToPath(rule: FillRule) {
        cairo_set_fill_rule(cr, rule == .evenOdd ? CAIRO_FILL_RULE_EVEN_ODD : CAIRO_FILL_RULE_WINDING)
        cairo_clip(cr)
    }

    /// Intersects the clip with `rect`.
    public func clip(to rect: Rect) {
        cairo_new_path(cr)
        cairo_rectangle(cr, Double(rect.x), Double(rect.y), Double(max(rect.width, 0)), Double(max(rect.height, 0)))
        cairo_clip(cr)
    }

    /// Converts `image` into a reused surface and draws it stretched into `rect` (bilinear).
    public func drawImage(_ image: RGBImage, in rect: Rect) {
        guard image.width > 0, image.height > 0, image.pixels.count == image.width * image.height * 3,
              let target = reusableFrameSurface(width: image.width, height: image.height) else { return }
        CairoCanvas.convert(image, into: target)
        paint(target, width: image.width, height: image.height, in: rect, filter: CAIRO_FILTER_BILINEAR)
    }

    /// Draws an immutable image; its conversion, and a copy scaled to `rect`'s size, are cached.
    public func drawImage(_ image: CanvasImage, in rect: Rect) {
        guard image.width > 0, image.height > 0, let entry = cached(image) else { return }
        let w = Int(rect.width.rounded()), h = Int(rect.height.rounded())
        var matrix = cairo_matrix_t()
        cairo_get_matrix(cr, &matrix)
        let translationOnly = matrix.xx == 1 && matrix.yy == 1 && matrix.xy == 0 && matrix.yx == 0
        guard translationOnly, w > 0, h > 0, w <= 8192, h <= 8192, rect.x.isFinite, rect.y.isFinite else {
            paint(entry.source, width: image.width, height: image.height, in: rect, filter: CAIRO_FILTER_GOOD)
            return
        }
        if entry.scaled == nil || entry.scaledSize != (w, h) {
            if let old = entry.scaled { cairo_surface_destroy(old); entry.scaled = nil }
            guard let scaled = cairo_image_surface_create(CAIRO_FORMAT_RGB24, Int32(w), Int32(h)),
                  cairo_surface_status(scaled) == CAIRO_STATUS_SUCCESS, let sc = cairo_create(scaled) else { return }
            cairo_scale(sc, Double(w) / Double(image.width), Double(h) / Double(image.height))
            cairo_set_source_surface(sc, entry.source, 0, 0)
            cairo_pattern_set_filter(cairo_get_source(sc), CAIRO_FILTER_GOOD)
            cairo_pattern_set_extend(cairo_get_source(sc), CAIRO_EXTEND_PAD)
            cairo_paint(sc)
            cairo_destroy(sc)
            cairo_surface_flush(scaled)
            entry.scaled = scaled
            entry.scaledSize = (w, h)
        }
        guard let scaled = entry.scaled else { return }
        // Whole-pixel placement lets pixman copy rows instead of resampling.
        cairo_set_source_surface(cr, scaled, rect.x.rounded().asDouble, rect.y.rounded().asDouble)
        cairo_rectangle(cr, rect.x.rounded().asDouble, rect.y.rounded().asDouble, Double(w), Double(h))
        cairo_fill(cr)
    }

    /// Text is drawn with Cairo's toy font API.
    public var supportsText: Bool { true }

    /// Draws `text` in a bold sans-serif face with its baseline at `origin`.
    public func drawText(_ text: String, at origin: Point2, size: Float, color: Color) {
        guard size > 0, size.isFinite else { return }
        setFont(size)
        setColor(color)
        cairo_move_to(cr, Double(origin.x), Double(origin.y))
        cairo_show_text(cr, text)
        cairo_new_path(cr)
    }

    /// The advance width of `text` in the face `drawText` uses.
    public func textWidth(_ text: String, size: Float) -> Float? {
        guard size > 0, size.isFinite else { return 0 }
        setFont(size)
        var extents = cairo_text_extents_t()
        cairo_text_extents(cr, text, &extents)
        return Float(extents.x_advance)
    }

    // MARK: helpers

    private func setFont(_ size: Float) {
        cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_BOLD)
        cairo_set_font_size(cr, Double(size))
    }

    private func setColor(_ c: Color) {
        cairo_set_source_rgba(cr, Double(c.red), Double(c.green), Double(c.blue), Double(c.alpha))
    }

    private func setStroke(_ style: StrokeStyle) {
        cairo_set_line_width(cr, Double(max(style.width, 0)))
        switch style.cap {
        case .butt: cairo_set_line_cap(cr, CAIRO_LINE_CAP_BUTT)
        case .round: cairo_set_line_cap(cr, CAIRO_LINE_CAP_ROUND)
        case .square: cairo_set_line_cap(cr, CAIRO_LINE_CAP_SQUARE)
        }
        switch style.join {
        case .miter: cairo_set_line_join(cr, CAIRO_LINE_JOIN_MITER)
        case .round: cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND)
        case .bevel: cairo_set_line_join(cr, CAIRO_LINE_JOIN_BEVEL)
        }
    }

    private func setPaint(_ paint: Paint) {
        let pattern: OpaquePointer?
        let stops: [GradientStop]
        switch paint {
        case .color(let c):
            setColor(c)
            return
        case .linear(let g):
            pattern = cairo_pattern_create_linear(Double(g.start.x), Double(g.start.y), Double(g.end.x), Double(g.end.y))
            stops = g.stops
        case .radial(let g):
            let r = Double(max(g.radius, 0))
            pattern = cairo_pattern_create_radial(Double(g.center.x), Double(g.center.y), 0,
                                                  Double(g.center.x), Double(g.center.y), r)
            stops = g.stops
        }
        guard let pattern else { return }
        for stop in stops {
            let c = stop.color
            cairo_pattern_add_color_stop_rgba(pattern, Double(stop.offset), Double(c.red), Double(c.green),
                                              Double(c.blue), Double(c.alpha))
        }
        cairo_pattern_set_extend(pattern, CAIRO_EXTEND_PAD)
        cairo_set_source(cr, pattern) // the context keeps its own reference
        cairo_pattern_destroy(pattern)
    }

    private func paint(_ source: OpaquePointer, width: Int, height: Int, in rect: Rect, filter: cairo_filter_t) {
        guard rect.width > 0, rect.height > 0, rect.width.isFinite, rect.height.isFinite,
              rect.x.isFinite, rect.y.isFinite else { return }
        cairo_save(cr)
        cairo_translate(cr, Double(rect.x), Double(rect.y))
        cairo_scale(cr, Double(rect.width) / Double(width), Double(rect.height) / Double(height))
        cairo_set_source_surface(cr, source, 0, 0)
        cairo_pattern_set_filter(cairo_get_source(cr), filter)
        cairo_pattern_set_extend(cairo_get_source(cr), CAIRO_EXTEND_PAD)
        cairo_new_path(cr)
        cairo_rectangle(cr, 0, 0, Double(width), Double(height))
        cairo_fill(cr)
        cairo_restore(cr)
    }

    private func reusableFrameSurface(width: Int, height: Int) -> OpaquePointer? {
        if let frameSurface, frameSize == (width, height) { return frameSurface }
        if let frameSurface { cairo_surface_destroy(frameSurface); self.frameSurface = nil }
        guard let s = cairo_image_surface_create(CAIRO_FORMAT_RGB24, Int32(width), Int32(height)) else { return nil }
        guard cairo_surface_status(s) == CAIRO_STATUS_SUCCESS else { cairo_surface_destroy(s); return nil }
        frameSurface = s
        frameSize = (width, height)
        return s
    }

    private func cached(_ image: CanvasImage) -> CachedImage? {
        imageCache.removeAll { $0.image == nil }
        if let hit = imageCache.first(where: { $0.image === image }) { return hit }
        guard image.width <= 32767, image.height <= 32767,
              let s = cairo_image_surface_create(CAIRO_FORMAT_RGB24, Int32(image.width), Int32(image.height)) else { return nil }
        guard cairo_surface_status(s) == CAIRO_STATUS_SUCCESS else { cairo_surface_destroy(s); return nil }
        CairoCanvas.convert(image.image, into: s)
        let entry = CachedImage(image: image, source: s)
        if imageCache.count >= CairoCanvas.imageCacheLimit { imageCache.removeFirst() }
        imageCache.append(entry)
        return entry
    }

    /// Packed RGB → Cairo RGB24 (native-endian 0xFFRRGGBB words).
    private static func convert(_ image: RGBImage, into target: OpaquePointer) {
        cairo_surface_flush(target)
        guard let data = cairo_image_surface_get_data(target) else { return }
        let stride = Int(cairo_image_surface_get_stride(target))
        let w = image.width, h = image.height
        image.pixels.withUnsafeBufferPointer { src in
            guard let input = src.baseAddress, src.count >= w * h * 3 else { return }
            for y in 0..<h {
                let row = UnsafeMutableRawPointer(data + y * stride).assumingMemoryBound(to: UInt32.self)
                var i = input + y * w * 3
                for x in 0..<w {
                    row[x] = 0xFF00_0000 | UInt32(i[0]) << 16 | UInt32(i[1]) << 8 | UInt32(i[2])
                    i += 3
                }
            }
        }
        cairo_surface_mark_dirty(target)
    }
}

private extension Float {
    var asDouble: Double { Double(self) }
}
