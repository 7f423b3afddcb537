import VeilCore
import VeilVision

/// How the ends of open stroked lines look.
public enum LineCap: Sendable, Equatable {
    /// The line stops exactly at its end point.
    case butt
    /// A half disc centred on the end point.
    case round
    /// A half square centred on the end point.
    case square
}

/// How stroked lines look where two segments meet.
public enum LineJoin: Sendable, Equatable {
    /// Sharp corner (up to the backend's miter limit).
    case miter
    /// Rounded corner.
    case round
    /// Corner cut off.
    case bevel
}

/// Which points a self-intersecting or multi-part path covers when filled or used as a clip.
public enum FillRule: Sendable, Equatable {
    /// Non-zero winding number.
    case winding
    /// Odd number of crossings: inner sub-paths become holes.
    case evenOdd
}

/// Width, caps and joins of a stroke. Widths are in canvas units (pixels unless transformed).
public struct StrokeStyle: Sendable, Equatable {
    /// Line width.
    public var width: Float
    /// End caps of open sub-paths.
    public var cap: LineCap
    /// Joins between segments.
    public var join: LineJoin

    /// A stroke style; round caps and joins by default, which suit drawn faces.
    public init(width: Float, cap: LineCap = .round, join: LineJoin = .round) {
        self.width = width; self.cap = cap; self.join = join
    }
}

/// One colour of a gradient at `offset` (0 at the gradient's start, 1 at its end).
public struct GradientStop: Sendable, Equatable {
    /// Position along the gradient, 0…1.
    public var offset: Float
    /// Colour at that position.
    public var color: Color
    /// A stop.
    public init(_ offset: Float, _ color: Color) { self.offset = offset; self.color = color }
}

/// A gradient along the line from `start` to `end`; beyond the ends the end colours continue.
public struct LinearGradient: Sendable, Equatable {
    /// Where offset 0 lies.
    public var start: Point2
    /// Where offset 1 lies.
    public var end: Point2
    /// Colour stops in increasing offset order.
    public var stops: [GradientStop]
    /// A linear gradient.
    public init(start: Point2, end: Point2, stops: [GradientStop]) {
        self.start = start; self.end = end; self.stops = stops
    }
    /// A two-colour gradient.
    public init(start: Point2, end: Point2, from: Color, to: Color) {
        self.init(start: start, end: end, stops: [GradientStop(0, from), GradientStop(1, to)])
    }
}

/// A gradient from a circle around `center` with radius 0 (offset 0) outwards to `radius`
/// (offset 1); beyond it the last colour continues.
public struct RadialGradient: Sendable, Equatable {
    /// Centre of the circles.
    public var center: Point2
    /// Radius at which offset 1 lies.
    public var radius: Float
    /// Colour stops in increasing offset order.
    public var stops: [GradientStop]
    /// A radial gradient.
    public init(center: Point2, radius: Float, stops: [GradientStop]) {
        self.center = center; self.radius = radius; self.stops = stops
    }
    /// A two-colour gradient.
    public init(center: Point2, radius: Float, from: Color, to: Color) {
        self.init(center: center, radius: radius, stops: [GradientStop(0, from), GradientStop(1, to)])
    }
}

/// What a fill paints with.
public enum Paint: Sendable, Equatable {
    /// One colour.
    case color(Color)
    /// A linear gradient.
    case linear(LinearGradient)
    /// A radial gradient.
    case radial(RadialGradient)
}

/// An immutable image that a canvas may keep converted to its own format between calls: use it for
/// pictures drawn frame after frame (a virtual background). Frames that change every time (video)
/// go through `Canvas.drawImage(_:in:)` with an `RGBImage` instead.
public final class CanvasImage: Sendable {
    /// The pixels; never change.
    public let image: RGBImage
    /// Wraps `image`.
    public init(_ image: RGBImage) { self.image = image }
    /// Width in pixels.
    public var width: Int { image.width }
    /// Height in pixels.
    public var height: Int { image.height }
}

/// A 2-D drawing surface with a current path, in the model shared by Cairo and CoreGraphics.
///
/// Coordinates are in pixels with the origin at the top left and y pointing down, transformed by
/// the current transformation (`translate`, `scale`, `rotate`; saved and restored with the clip).
/// Path construction (`move`, `line`, `curve`, `closePath`) adds to the current path; `fill`,
/// `stroke` and `clip` consume it. A backend draws anti-aliased and composites with source-over.
public protocol Canvas: AnyObject {
    /// Width of the surface in pixels.
    var width: Int { get }
    /// Height of the surface in pixels.
    var height: Int { get }

    /// Replaces every pixel inside the current clip with `color` (no blending), e.g. `.clear`.
    func clear(_ color: Color)

    /// Pushes the transformation, clip and path-independent state; pair with `restore()`.
    func save()
    /// Pops the state pushed by the matching `save()`.
    func restore()
    /// Moves the origin by (x, y) in current units.
    func translate(x: Float, y: Float)
    /// Scales the axes.
    func scale(x: Float, y: Float)
    /// Rotates the axes clockwise (as seen on screen, y down) by `radians`.
    func rotate(radians: Float)

    /// Discards the current path.
    func beginPath()
    /// Starts a new sub-path at `point`.
    func move(to point: Point2)
    /// Adds a straight segment to `point`.
    func line(to point: Point2)
    /// Adds a cubic Bézier segment to `point` with the two control points.
    func curve(to point: Point2, control1: Point2, control2: Point2)
    /// Closes the current sub-path with a straight segment to its start.
    func closePath()
    /// Adds a closed ellipse inscribed in `rect` as a new sub-path.
    func addEllipse(in rect: Rect)
    /// Adds the rectangle as a new closed sub-path.
    func addRect(_ rect: Rect)

    /// Fills the current path and consumes it.
    func fillPath(_ paint: Paint, rule: FillRule)
    /// Strokes the current path and consumes it.
    func strokePath(_ color: Color, style: StrokeStyle)
    /// Fills, then strokes the same path, and consumes it.
    func fillAndStrokePath(fill: Paint, stroke: Color, style: StrokeStyle)
    /// Intersects the clip with the current path and consumes it.
    func clipToPath(rule: FillRule)
    /// Intersects the clip with `rect`.
    func clip(to rect: Rect)

    /// Draws `image` stretched to fill `rect` (smooth scaling); the pixels may change between calls.
    func drawImage(_ image: RGBImage, in rect: Rect)
    /// Draws an immutable image stretched to fill `rect`; the backend may cache its conversion.
    func drawImage(_ image: CanvasImage, in rect: Rect)

    /// Whether `drawText` draws anything on this backend.
    var supportsText: Bool { get }
    /// Draws one line of text with its baseline starting at `origin`; a no-op without text support.
    func drawText(_ text: String, at origin: Point2, size: Float, color: Color)
    /// The advance width of `text` at `size`, or nil without text support.
    func textWidth(_ text: String, size: Float) -> Float?
}

extension Canvas {
    /// Without a backend-specific override, text is not drawn.
    public var supportsText: Bool { false }
    /// Without a backend-specific override, text is not drawn.
    public func drawText(_ text: String, at origin: Point2, size: Float, color: Color) {}
    /// Without a backend-specific override, text cannot be measured.
    public func textWidth(_ text: String, size: Float) -> Float? { nil }

    /// Draws the wrapped `RGBImage` (no caching) unless the backend overrides this.
    public func drawImage(_ image: CanvasImage, in rect: Rect) { drawImage(image.image, in: rect) }

    /// Approximates the ellipse with four Bézier arcs unless the backend overrides this.
    public func addEllipse(in rect: Rect) {
        let k: Float = 0.5522847498 // control distance of a quarter circle
        let c = rect.center, rx = rect.width / 2, ry = rect.height / 2
        let ox = rx * k, oy = ry * k
        move(to: Point2(c.x + rx, c.y))
        curve(to: Point2(c.x, c.y + ry), control1: Point2(c.x + rx, c.y + oy), control2: Point2(c.x + ox, c.y + ry))
        curve(to: Point2(c.x - rx, c.y), control1: Point2(c.x - ox, c.y + ry), control2: Point2(c.x - rx, c.y + oy))
        curve(to: Point2(c.x, c.y - ry), control1: Point2(c.x - rx, c.y - oy), control2: Point2(c.x - ox, c.y - ry))
        curve(to: Point2(c.x + rx, c.y), control1: Point2(c.x + ox, c.y - ry), control2: Point2(c.x + rx, c.y - oy))
        closePath()
    }

    /// Adds the rectangle with four lines unless the backend overrides this.
    public func addRect(_ rect: Rect) {
        move(to: Point2(rect.x, rect.y))
        line(to: Point2(rect.x + rect.width, rect.y))
        line(to: Point2(rect.x + rect.width, rect.y + rect.height))
        line(to: Point2(rect.x, rect.y + rect.height))
        closePath()
    }

    /// Fills the current path with the non-zero winding rule.
    public func fillPath(_ paint: Paint) { fillPath(paint, rule: .winding) }
    /// Fills the current path with one colour.
    public func fillPath(_ color: Color) { fillPath(.color(color), rule: .winding) }
    /// Intersects the clip with the current path (non-zero winding).
    public func clipToPath() { clipToPath(rule: .winding) }

    /// Runs `body` between `save()` and `restore()`.
    public func withSavedState<R>(_ body: () throws -> R) rethrows -> R {
        save()
        defer { restore() }
        return try body()
    }

    /// Adds a smooth curve (Catmull-Rom, as cubic Béziers) through `count` points read by `point`.
    ///
    /// Open curves start with a `move` unless `continuing` is true (then they extend the current
    /// sub-path with a `line` to the first point, so that corners between curves stay sharp);
    /// closed curves start with a `move` and end with `closePath`. `point` is called with 0..<count
    /// and may read from a reused buffer, so that no array is built per frame.
    public func addSmoothCurve(count: Int, closed: Bool, continuing: Bool = false, tension: Float = 1,
                               _ point: (Int) -> Point2) {
        guard count > 0 else { return }
        if continuing && !closed { line(to: point(0)) } else { move(to: point(0)) }
        guard count > 1 else { if closed { closePath() }; return }
        let k = tension / 6
        func at(_ i: Int) -> Point2 {
            if closed { return point((i % count + count) % count) }
            return point(min(max(i, 0), count - 1))
        }
        let segments = closed ? count : count - 1
        for i in 0..<segments {
            let p0 = at(i - 1), p1 = at(i), p2 = at(i + 1), p3 = at(i + 2)
            curve(to: p2, control1: p1 + (p2 - p0) * k, control2: p2 - (p3 - p1) * k)
        }
        if closed { closePath() }
    }

    /// Adds a smooth curve through `points` (see `addSmoothCurve(count:closed:continuing:tension:_:)`).
    public func addSmoothCurve(through points: [Point2], closed: Bool, continuing: Bool = false) {
        addSmoothCurve(count: points.count, closed: closed, continuing: continuing) { points[$0] }
    }

    /// Adds a polygon through `points` (closed) or a polyline (open).
    public func addPolyline(_ points: [Point2], closed: Bool) {
        guard let first = points.first else { return }
        move(to: first)
        for p in points.dropFirst() { line(to: p) }
        if closed { closePath() }
    }
}
