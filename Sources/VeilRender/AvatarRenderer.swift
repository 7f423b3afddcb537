import VeilCore
import VeilVision

/// Draws the canonical avatar for an `Expression` into a view of a canvas.
///
/// The expression is the only per-frame input: two people at rest render the same image. A renderer
/// keeps its last pose and scratch buffers so that steady-state frames do not allocate in the rig;
/// use one renderer per thread (it is not `Sendable`).
public final class AvatarRenderer {
    /// The face being posed.
    public let rig: AvatarRig
    /// The pose of the last rendered frame (empty before the first).
    public private(set) var pose = AvatarPose()
    var scratch: [Point2] = []

    /// A renderer of `rig` (the canonical face by default).
    public init(rig: AvatarRig = .canonical) {
        self.rig = rig
        scratch.reserveCapacity(32)
    }

    /// Renders `expression` into `rect` of `canvas`: the background, then the avatar in `style`.
    /// Nothing is drawn outside `rect`.
    public func render(_ expression: Expression, into canvas: some Canvas, rect: Rect,
                       style: AvatarStyle = .mask, background: AvatarBackground = .none) {
        rig.solve(expression, in: rect, into: &pose)
        canvas.save()
        canvas.clip(to: rect)
        AvatarRenderer.drawBackground(background, into: canvas, rect: rect)
        switch style {
        case .sketch(let sketch): drawSketch(sketch, into: canvas, expression: expression)
        case .mask(let mask): drawMask(mask, into: canvas, rect: rect, expression: expression)
        }
        canvas.restore()
    }

    /// Fills `rect` with `background` (replacing what was there).
    public static func drawBackground(_ background: AvatarBackground, into canvas: some Canvas, rect: Rect) {
        canvas.save()
        canvas.clip(to: rect)
        switch background {
        case .none:
            canvas.clear(.clear)
        case .solid(let color):
            canvas.clear(color)
        case .verticalGradient(let top, let bottom):
            canvas.clear(.clear)
            canvas.addRect(rect)
            canvas.fillPath(.linear(LinearGradient(start: Point2(rect.x, rect.y), end: Point2(rect.x, rect.y + rect.height),
                                                   from: top, to: bottom)))
        case .image(let image):
            canvas.clear(.black)
            if image.width > 0 && image.height > 0 {
                canvas.drawImage(image, in: coverRect(imageWidth: image.width, imageHeight: image.height, in: rect))
            }
        }
        canvas.restore()
    }

    /// The rectangle an image of the given size is drawn into so that it covers `rect` with its
    /// aspect ratio kept, centred (the parts outside `rect` are cropped by the clip).
    public static func coverRect(imageWidth: Int, imageHeight: Int, in rect: Rect) -> Rect {
        guard imageWidth > 0, imageHeight > 0 else { return rect }
        let scale = max(rect.width / Float(imageWidth), rect.height / Float(imageHeight))
        let w = Float(imageWidth) * scale, h = Float(imageHeight) * scale
        let c = rect.center
        return Rect(x: c.x - w / 2, y: c.y - h / 2, width: w, height: h)
    }

    // MARK: paths of the posed face (add to the canvas's current path)

    func addOutline(_ c: some Canvas) {
        let o = pose.outline
        c.addSmoothCurve(count: o.count, closed: true) { o[$0] }
    }

    func addEye(_ c: some Canvas, _ side: FaceSide) {
        addUpperLid(c, side)
        let p = pose.points
        let inner = RigPoint.innerCorner(side), outer = RigPoint.outerCorner(side)
        c.addSmoothCurve(count: 5, closed: false, continuing: true) { i in
            p[i == 0 ? outer : i == 4 ? inner : RigPoint.lowerLid(side, 3 - i)]
        }
        c.closePath()
    }

    func addUpperLid(_ c: some Canvas, _ side: FaceSide) {
        let p = pose.points
        let inner = RigPoint.innerCorner(side), outer = RigPoint.outerCorner(side)
        c.addSmoothCurve(count: 5, closed: false) { i in
            p[i == 0 ? inner : i == 4 ? outer : RigPoint.upperLid(side, i - 1)]
        }
    }

    func addLowerLid(_ c: some Canvas, _ side: FaceSide) {
        let p = pose.points
        let inner = RigPoint.innerCorner(side), outer = RigPoint.outerCorner(side)
        c.addSmoothCurve(count: 5, closed: false) { i in
            p[i == 0 ? inner : i == 4 ? outer : RigPoint.lowerLid(side, i - 1)]
        }
    }

    /// One lip edge from the viewer's left corner to the right corner: `first` and `count` name the
    /// points between the corners; `reversed` runs it from right to left.
    func addLipEdge(_ c: some Canvas, first: Int, count: Int, reversed: Bool, continuing: Bool) {
        let p = pose.points
        let n = count + 2
        c.addSmoothCurve(count: n, closed: false, continuing: continuing) { i in
            let j = reversed ? n - 1 - i : i
            return p[j == 0 ? RigPoint.cornerRight : j == n - 1 ? RigPoint.cornerLeft : first + j - 1]
        }
    }

    func addMouthOpening(_ c: some Canvas) {
        addLipEdge(c, first: RigPoint.upperInner, count: 3, reversed: false, continuing: false)
        addLipEdge(c, first: RigPoint.lowerInner, count: 3, reversed: true, continuing: true)
        c.closePath()
    }

    func addOuterLips(_ c: some Canvas) {
        addLipEdge(c, first: RigPoint.upperOuter, count: 5, reversed: false, continuing: false)
        addLipEdge(c, first: RigPoint.lowerOuter, count: 3, reversed: true, continuing: true)
        c.closePath()
    }

    func addNoseBottom(_ c: some Canvas) {
        let p = pose.points
        let order = (RigPoint.alar(.right), RigPoint.nostril(.right), RigPoint.columella,
                     RigPoint.nostril(.left), RigPoint.alar(.left))
        c.addSmoothCurve(count: 5, closed: false) { i in
            switch i {
            case 0: return p[order.0]
            case 1: return p[order.1]
            case 2: return p[order.2]
            case 3: return p[order.3]
            default: return p[order.4]
            }
        }
    }

    /// The nose's side line on the side the face turns towards (the side seen in profile).
    func addNoseSide(_ c: some Canvas) {
        let side: FaceSide = pose.headPose.yaw >= 0 ? .left : .right
        let p = pose.points
        let b = RigPoint.bridge(side)
        c.addSmoothCurve(count: 3, closed: false) { i in p[i == 0 ? b : i == 1 ? b + 1 : RigPoint.noseTip] }
    }

    /// A brow as a filled shape, thick at the inner end and tapering outwards.
    func addBrowShape(_ c: some Canvas, _ side: FaceSide, thickness: Float) {
        let p = pose.points
        let r = RigPoint.brow(side)
        let taper: [Float] = [1.0, 1.0, 0.88, 0.68, 0.42]
        scratch.removeAll(keepingCapacity: true)
        for k in 0..<5 {
            let a = p[r.lowerBound + max(k - 1, 0)], b = p[r.lowerBound + min(k + 1, 4)]
            var n = Point2(a.y - b.y, b.x - a.x)
            let len = (n * n).sum().squareRoot()
            n = len > 1e-6 ? n / len : Point2(0, -1)
            scratch.append(p[r.lowerBound + k] + n * (thickness * taper[k] / 2))
        }
        for k in (0..<5).reversed() {
            let a = p[r.lowerBound + max(k - 1, 0)], b = p[r.lowerBound + min(k + 1, 4)]
            var n = Point2(a.y - b.y, b.x - a.x)
            let len = (n * n).sum().squareRoot()
            n = len > 1e-6 ? n / len : Point2(0, -1)
            scratch.append(p[r.lowerBound + k] - n * (thickness * taper[k] / 2))
        }
        let s = scratch
        c.addSmoothCurve(count: 5, closed: false) { s[$0] }
        c.addSmoothCurve(count: 5, closed: false, continuing: true) { s[5 + $0] }
        c.closePath()
    }

    func addBrowLine(_ c: some Canvas, _ side: FaceSide) {
        let p = pose.points
        let r = RigPoint.brow(side)
        c.addSmoothCurve(count: 5, closed: false) { p[r.lowerBound + $0] }
    }

    func circleRect(_ center: Point2, _ radius: Float) -> Rect {
        Rect(x: center.x - radius, y: center.y - radius, width: 2 * radius, height: 2 * radius)
    }
}
