import VeilCore
import VeilVision

/// A corner of the canvas.
public enum Corner: Sendable, Equatable, CaseIterable {
    /// Top left.
    case topLeft
    /// Top right.
    case topRight
    /// Bottom left.
    case bottomLeft
    /// Bottom right.
    case bottomRight
}

/// How the views of a call are arranged on the canvas.
public enum CompositorLayout: Sendable, Equatable {
    /// The first view fills the canvas; the others are small insets stacked from `corner` (down or
    /// up the side, then inwards). `insetFraction` is the inset width as a fraction of the canvas
    /// width (insets keep the canvas's aspect ratio); `margin` is in pixels.
    case pictureInPicture(corner: Corner, insetFraction: Float, margin: Float)
    /// Equal cells: 1 → full, 2 → side by side, 3–4 → 2×2, 5–6 → 3×2, 7–9 → 3×3 (more keep
    /// growing the square grid). A last row with fewer views is widened to fill the canvas.
    /// `spacing` is the gap between cells in pixels.
    case grid(spacing: Float)

    /// An inset of a quarter of the width in the bottom-right corner, 12 px from the edges.
    public static let pictureInPicture = CompositorLayout.pictureInPicture(corner: .bottomRight, insetFraction: 0.25, margin: 12)
    /// A grid without gaps.
    public static let grid = CompositorLayout.grid(spacing: 0)
}

/// One view to compose: its avatar input and an optional label.
public struct CompositorView: Sendable {
    /// The expression to render.
    public var expression: Expression
    /// Shown in the view's bottom-left corner when the canvas supports text.
    public var label: String?
    /// How the avatar is drawn.
    public var style: AvatarStyle
    /// What is drawn behind it.
    public var background: AvatarBackground

    /// A view.
    public init(expression: Expression, label: String? = nil, style: AvatarStyle = .mask,
                background: AvatarBackground = .verticalGradient(top: Color(rgb8: 0x3A, 0x4A, 0x6B), bottom: Color(rgb8: 0x1B, 0x22, 0x33))) {
        self.expression = expression; self.label = label; self.style = style; self.background = background
    }
}

/// Arranges several views on one canvas (picture-in-picture or a grid) and draws them with thin
/// borders and labels.
public struct Compositor: Sendable {
    /// The arrangement.
    public var layout: CompositorLayout
    /// Colour of the border drawn around insets and grid cells; nil for none.
    public var borderColor: Color?
    /// Border width in pixels.
    public var borderWidth: Float
    /// Label text size in pixels.
    public var labelSize: Float
    /// Label text colour (drawn on a translucent dark plate).
    public var labelColor: Color
    /// Colour behind the views (visible in grid gaps).
    public var backdrop: Color

    /// A compositor.
    public init(layout: CompositorLayout = .pictureInPicture, borderColor: Color? = Color(white: 1, alpha: 0.85),
                borderWidth: Float = 1.5, labelSize: Float = 13, labelColor: Color = .white,
                backdrop: Color = Color(rgb8: 0x10, 0x12, 0x18)) {
        self.layout = layout; self.borderColor = borderColor; self.borderWidth = borderWidth
        self.labelSize = labelSize; self.labelColor = labelColor; self.backdrop = backdrop
    }

    /// The rectangle of each of `count` views in `bounds`, in drawing order (later views are drawn
    /// over earlier ones: the picture-in-picture insets come after the main view).
    public func viewRects(in bounds: Rect, count: Int) -> [Rect] {
        guard count > 0, bounds.width > 0, bounds.height > 0 else { return [] }
        switch layout {
        case .pictureInPicture(let corner, let fraction, let margin):
            return Compositor.pictureInPictureRects(in: bounds, count: count, corner: corner, fraction: fraction, margin: margin)
        case .grid(let spacing):
            return Compositor.gridRects(in: bounds, count: count, spacing: spacing)
        }
    }

    /// The rectangle of each of `count` views on a canvas of `width` × `height` pixels.
    public func viewRects(width: Int, height: Int, count: Int) -> [Rect] {
        viewRects(in: Rect(x: 0, y: 0, width: Float(width), height: Float(height)), count: count)
    }

    /// Columns and rows of the grid for `count` views.
    public static func gridShape(count: Int) -> (columns: Int, rows: Int) {
        guard count > 0 else { return (0, 0) }
        var columns = 1
        while columns * columns < count { columns += 1 }
        let rows = (count + columns - 1) / columns
        return (columns, rows)
    }

    static func gridRects(in bounds: Rect, count: Int, spacing: Float) -> [Rect] {
        let (columns, rows) = gridShape(count: count)
        let gap = spacing.isFinite ? max(spacing, 0) / 2 : 0
        var rects: [Rect] = []
        rects.reserveCapacity(count)
        // Edges on whole pixels (when the bounds are) so that cells tile exactly.
        func edge(_ start: Float, _ length: Float, _ i: Int, _ n: Int) -> Float {
            start + (length * Float(i) / Float(n)).rounded()
        }
        for row in 0..<rows {
            let inRow = row == rows - 1 ? count - columns * (rows - 1) : columns
            let y0 = edge(bounds.y, bounds.height, row, rows), y1 = edge(bounds.y, bounds.height, row + 1, rows)
            for col in 0..<inRow {
                let x0 = edge(bounds.x, bounds.width, col, inRow), x1 = edge(bounds.x, bounds.width, col + 1, inRow)
                rects.append(Rect(x: x0 + gap, y: y0 + gap, width: max(x1 - x0 - 2 * gap, 0), height: max(y1 - y0 - 2 * gap, 0)))
            }
        }
        return rects
    }

    static func pictureInPictureRects(in bounds: Rect, count: Int, corner: Corner, fraction: Float, margin: Float) -> [Rect] {
        var rects = [bounds]
        guard count > 1 else { return rects }
        let f = fraction.isFinite ? min(max(fraction, 0.05), 0.9) : 0.25
        let m = margin.isFinite ? max(margin, 0) : 0
        let w = (bounds.width * f).rounded(), h = (bounds.height * f).rounded()
        let perColumn = max(1, Int((bounds.height - m) / (h + m)))
        let right = corner == .topRight || corner == .bottomRight
        let bottom = corner == .bottomLeft || corner == .bottomRight
        for k in 0..<(count - 1) {
            let row = Float(k % perColumn), col = Float(k / perColumn)
            let x = right ? bounds.x + bounds.width - m - w - col * (w + m) : bounds.x + m + col * (w + m)
            let y = bottom ? bounds.y + bounds.height - m - h - row * (h + m) : bounds.y + m + row * (h + m)
            rects.append(Rect(x: x, y: y, width: w, height: h))
        }
        return rects
    }

    /// Draws `count` views into `bounds`: `content` draws view `index` into its rectangle (clipped
    /// to it), then the compositor adds the border and `labels[index]` when given.
    public func draw(into canvas: some Canvas, bounds: Rect, count: Int, labels: [String?] = [],
                     content: (_ index: Int, _ rect: Rect) -> Void) {
        canvas.save()
        canvas.clip(to: bounds)
        canvas.clear(backdrop)
        let rects = viewRects(in: bounds, count: count)
        for (index, rect) in rects.enumerated() {
            canvas.save()
            canvas.clip(to: rect)
            content(index, rect)
            if let label = index < labels.count ? labels[index] : nil, !label.isEmpty {
                drawLabel(label, in: rect, canvas: canvas)
            }
            canvas.restore()
            // Insets and grid cells get a border; a lone full-canvas view does not.
            let framed: Bool
            switch layout {
            case .pictureInPicture: framed = index > 0
            case .grid: framed = rects.count > 1
            }
            if framed, let color = borderColor, borderWidth > 0 {
                let half = borderWidth / 2
                canvas.addRect(Rect(x: rect.x + half, y: rect.y + half, width: rect.width - borderWidth, height: rect.height - borderWidth))
                canvas.strokePath(color, style: StrokeStyle(width: borderWidth, cap: .butt, join: .miter))
            }
        }
        canvas.restore()
    }

    /// Renders each view's avatar with `renderer` and composes them on `canvas`'s whole surface.
    public func render(_ views: [CompositorView], with renderer: AvatarRenderer, into canvas: some Canvas) {
        let bounds = Rect(x: 0, y: 0, width: Float(canvas.width), height: Float(canvas.height))
        draw(into: canvas, bounds: bounds, count: views.count, labels: views.map(\.label)) { index, rect in
            let v = views[index]
            renderer.render(v.expression, into: canvas, rect: rect, style: v.style, background: v.background)
        }
    }

    private func drawLabel(_ text: String, in rect: Rect, canvas: some Canvas) {
        guard canvas.supportsText, let textWidth = canvas.textWidth(text, size: labelSize) else { return }
        let size = min(labelSize, max(rect.height * 0.09, 7))
        let width = size == labelSize ? textWidth : (canvas.textWidth(text, size: size) ?? textWidth)
        let pad = size * 0.45
        let plate = Rect(x: rect.x + pad, y: rect.y + rect.height - pad - size * 1.5,
                         width: min(width + 2 * pad, rect.width - 2 * pad), height: size * 1.5)
        canvas.addRect(plate)
        canvas.fillPath(Color(white: 0, alpha: 0.5))
        canvas.save()
        canvas.clip(to: plate)
        canvas.drawText(text, at: Point2(plate.x + pad, plate.y + size * 1.1), size: size, color: labelColor)
        canvas.restore()
    }
}
