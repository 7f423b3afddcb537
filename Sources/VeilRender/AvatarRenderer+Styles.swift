import VeilCore
import VeilVision

extension AvatarRenderer {
    // MARK: sketch

    func drawSketch(_ style: SketchStyle, into c: some Canvas, expression: Expression) {
        let s = pose.scale
        guard s > 0.5 else { return }
        let lw = max(1, style.lineWidth * 2 * s)
        let ink = style.lineColor
        let line = StrokeStyle(width: lw), fine = StrokeStyle(width: max(1, lw * 0.8))

        addOutline(c)
        c.strokePath(ink, style: line)

        c.save()
        if !featuresInsideOutline(cheekRadius: 0) {
            addOutline(c)
            c.clipToPath() // at strong turns, features on the far side stay inside the head
        }
        for side in FaceSide.allCases {
            addBrowLine(c, side)
            c.strokePath(ink, style: StrokeStyle(width: lw * 1.35))

            c.save()
            addEye(c, side)
            c.clipToPath()
            let iris = pose.irisCenter(side), r = pose.irisRadius
            c.addEllipse(in: circleRect(iris, r))
            c.strokePath(ink, style: fine)
            c.addEllipse(in: circleRect(iris, r * 0.45))
            c.fillPath(ink)
            c.restore()
            addEye(c, side)
            c.strokePath(ink, style: line)
        }
        addNoseSide(c)
        c.strokePath(ink.withAlpha(ink.alpha * 0.8), style: fine)
        addNoseBottom(c)
        c.strokePath(ink, style: line)

        addOuterLips(c)
        c.strokePath(ink, style: line)
        if pose.mouthOpening > lw && style.mouthFillOpacity > 0 {
            addMouthOpening(c)
            c.fillAndStrokePath(fill: .color(ink.withAlpha(ink.alpha * style.mouthFillOpacity)), stroke: ink, style: fine)
        } else {
            addMouthOpening(c)
            c.strokePath(ink, style: fine)
        }
        if expression[.tongueOut] > 0.02 { addTongue(c); c.strokePath(ink, style: fine) }
        c.restore()
    }

    /// Whether every feature (plus a margin) lies inside the silhouette, so that drawing them needs
    /// no clip: path clips make every later fill several times slower in Cairo. The silhouette is
    /// star-shaped around the head's centre; a feature is inside when it is nearer the centre than
    /// the outline points around its direction.
    func featuresInsideOutline(cheekRadius: Float) -> Bool {
        let p = pose.points, o = pose.outline
        let c = p[RigPoint.headCenter]
        let margin = pose.scale * 0.06
        let cosLimit: Float = 0.978 // 12°
        for i in 0..<RigPoint.ear(.right) {
            let isCheek = i == RigPoint.cheek(.left) || i == RigPoint.cheek(.right)
            let d = p[i] - c
            let r = (d * d).sum().squareRoot()
            let needed = r + (isCheek ? cheekRadius : 0) + margin
            guard r > 1e-3 else { continue }
            var limit = Float.greatestFiniteMagnitude
            for v in o {
                let e = v - c
                let re = (e * e).sum().squareRoot()
                if re > 1e-3 && (e * d).sum() > cosLimit * re * r { limit = min(limit, re) }
            }
            if !(needed < limit * 0.98) { return false }
        }
        return true
    }

    // MARK: mask

    func drawMask(_ m: MaskStyle, into c: some Canvas, rect: Rect, expression: Expression) {
        let s = pose.scale
        guard s > 0.5 else { return }
        let p = pose.points
        let px = max(s * 0.01, 0.5) // a hairline that still shows at thumbnail size

        if let shirt = m.shirt { drawBody(c, shirt: shirt, neck: m.skinShade, rect: rect) }
        drawEars(c, m, facingViewer: false)
        // Flat colours and one translucent shadow crescent: gradient fills cost 0.2–0.4 ms each in
        // pixman, flat ones a tenth of that.
        if let hair = m.hair {
            // Hair: the volume over the top of the head, then the head beyond the skin loop.
            let h = pose.hairOutline
            c.addSmoothCurve(count: h.count, closed: true) { h[$0] }
            c.fillPath(hair)
            // Rectangular clips first keep the path clips head-sized.
            let head = Rect(bounding: pose.outline).expanded(by: 2)
            c.save()
            c.clip(to: head)
            c.addRect(head)
            addSkinLoop(c)
            c.clipToPath(rule: .evenOdd)
            addOutline(c)
            c.fillPath(hair)
            c.restore()
            c.save()
            c.clip(to: head)
            addSkinLoop(c)
            c.clipToPath()
            addOutline(c)
            c.fillPath(m.skin)
            addShadowCrescent(c, color: m.shadow)
            c.restore()
        } else {
            addOutline(c)
            c.fillPath(m.skin)
            addShadowCrescent(c, color: m.shadow)
        }

        c.save()
        if !featuresInsideOutline(cheekRadius: s * 0.22) {
            addOutline(c)
            c.clipToPath()
        }
        for side in FaceSide.allCases {
            let cheek = p[RigPoint.cheek(side)]
            let radius = s * (0.17 + 0.05 * expression[.cheekPuff])
            c.addEllipse(in: circleRect(cheek, radius))
            c.fillPath(.radial(RadialGradient(center: cheek, radius: radius, from: m.blush, to: m.blush.withAlpha(0))))
        }
        // Nose: a soft shadow down the turned side and under the tip, then the nostril line.
        addNoseSide(c)
        c.strokePath(m.skinShade.withAlpha(0.55), style: StrokeStyle(width: s * 0.035))
        addNoseBottom(c)
        c.strokePath(m.skinShade.mixed(with: m.lashes, 0.25), style: StrokeStyle(width: max(1, s * 0.024)))

        drawMouth(c, m, expression: expression, px: px)
        for side in FaceSide.allCases { drawEye(c, m, side) }
        for side in FaceSide.allCases {
            addBrowShape(c, side, thickness: s * 0.062)
            c.fillPath(m.brows)
        }
        c.restore()
        drawEars(c, m, facingViewer: true)
    }

    /// The head's outline minus a copy shrunk and moved towards the light (upper left): a shadow
    /// along the lower and far edges, filled even-odd.
    private func addShadowCrescent(_ c: some Canvas, color: Color) {
        let o = pose.outline
        let center = pose.points[RigPoint.headCenter]
        let shift = Point2(-0.06, -0.07) * pose.scale
        c.addSmoothCurve(count: o.count, closed: true) { o[$0] }
        c.addSmoothCurve(count: o.count, closed: true) { center + (o[$0] - center) * 0.9 + shift }
        c.fillPath(.color(color), rule: .evenOdd)
    }

    private func addSkinLoop(_ c: some Canvas) {
        let loop = pose.skinLoop
        c.addSmoothCurve(count: loop.count, closed: true) { loop[$0] }
    }

    private func drawBody(_ c: some Canvas, shirt: Color, neck: Color, rect: Rect) {
        let s = pose.scale, o = pose.center
        func at(_ x: Float, _ y: Float) -> Point2 { Point2(o.x + x * s, o.y + y * s) }
        let bottom = max(rect.y + rect.height, o.y + 1.9 * s) + 1
        c.move(to: at(-0.30, 0.35)); c.line(to: at(0.30, 0.35)); c.line(to: at(0.34, 1.4)); c.line(to: at(-0.34, 1.4))
        c.closePath()
        c.fillPath(neck)
        c.move(to: Point2(o.x - 1.6 * s, bottom))
        c.line(to: at(-1.6, 1.8))
        c.curve(to: at(-0.45, 1.2), control1: at(-1.55, 1.32), control2: at(-0.9, 1.22))
        c.line(to: at(0.45, 1.2))
        c.curve(to: at(1.6, 1.8), control1: at(0.9, 1.22), control2: at(1.55, 1.32))
        c.line(to: Point2(o.x + 1.6 * s, bottom))
        c.closePath()
        c.fillPath(shirt)
        c.move(to: at(-0.36, 1.19))
        c.curve(to: at(0.36, 1.19), control1: at(-0.3, 1.52), control2: at(0.3, 1.52))
        c.closePath()
        c.fillPath(neck)
    }

    /// Ears turned towards the viewer are drawn over the head; the others behind it.
    private func drawEars(_ c: some Canvas, _ m: MaskStyle, facingViewer: Bool) {
        let s = pose.scale
        let roll = pose.headPose.roll * .pi / 180
        for side in FaceSide.allCases {
            let sx: Float = side == .left ? 1 : -1
            let facing = sx * pose.rotation.2.x // view-space z of the ear's outward normal
            guard (facing > 0.2) == facingViewer else { continue }
            let ear = pose.points[RigPoint.ear(side)]
            let inward = pose.screenDirection(SIMD3(-sx, 0, 0)) * s
            let rx = s * (0.065 + 0.05 * abs(facing))
            c.save()
            c.translate(x: ear.x, y: ear.y)
            c.rotate(radians: roll)
            c.addEllipse(in: Rect(x: -rx, y: -0.15 * s, width: 2 * rx, height: 0.30 * s))
            c.restore()
            c.fillPath(m.skin.mixed(with: m.skinShade, 0.55))
            c.save()
            c.translate(x: ear.x + inward.x * 0.02, y: ear.y + inward.y * 0.02)
            c.rotate(radians: roll)
            c.addEllipse(in: Rect(x: -rx * 0.5, y: -0.09 * s, width: rx, height: 0.18 * s))
            c.restore()
            c.fillPath(m.skinShade.withAlpha(0.75))
        }
    }

    private func drawEye(_ c: some Canvas, _ m: MaskStyle, _ side: FaceSide) {
        let s = pose.scale
        addEye(c, side)
        c.fillPath(m.eyeWhite)
        c.save()
        addEye(c, side)
        c.clipToPath()
        let iris = pose.irisCenter(side), r = pose.irisRadius
        c.addEllipse(in: circleRect(iris, r))
        c.fillPath(m.iris)
        c.addEllipse(in: circleRect(iris, r * 0.5))
        c.fillPath(m.pupil)
        c.addEllipse(in: circleRect(iris + Point2(-0.35 * r, -0.4 * r), r * 0.27))
        c.fillPath(Color.white.withAlpha(0.9))
        addUpperLid(c, side) // the lid's shadow on the eyeball
        c.strokePath(m.lashes.withAlpha(0.25), style: StrokeStyle(width: s * 0.05))
        c.restore()
        addLowerLid(c, side)
        c.strokePath(m.skinShade.mixed(with: m.lashes, 0.2), style: StrokeStyle(width: max(0.75, s * 0.012)))
        addUpperLid(c, side)
        c.strokePath(m.lashes, style: StrokeStyle(width: max(1, s * 0.03)))
    }

    private func drawMouth(_ c: some Canvas, _ m: MaskStyle, expression: Expression, px: Float) {
        let s = pose.scale
        let p = pose.points
        if pose.mouthOpening > 0.5 {
            addMouthOpening(c)
            c.fillPath(m.mouthInterior)
            c.save()
            addMouthOpening(c)
            c.clipToPath()
            let down = normalized(pose.screenDirection(SIMD3(0, -1, 0)))
            // Upper teeth hang below the upper lip; lower teeth rise above the lower lip; the tongue
            // lies behind them.
            c.addEllipse(in: Rect(x: p[RigPoint.lowerInner + 1].x - 0.11 * s, y: p[RigPoint.lowerInner + 1].y - 0.06 * s,
                                  width: 0.22 * s, height: 0.1 * s))
            c.fillPath(m.tongue.mixed(with: m.mouthInterior, 0.35))
            addTeeth(c, first: RigPoint.upperInner, offset: down * (0.055 * s))
            c.fillPath(m.teeth)
            addTeeth(c, first: RigPoint.lowerInner, offset: down * (-0.035 * s))
            c.fillPath(m.teeth.mixed(with: m.mouthInterior, 0.12))
            c.restore()
        }
        // Lower lip, the tongue when out, then the upper lip over both.
        addLipEdge(c, first: RigPoint.lowerInner, count: 3, reversed: false, continuing: false)
        addLipEdge(c, first: RigPoint.lowerOuter, count: 3, reversed: true, continuing: true)
        c.closePath()
        c.fillPath(m.lips.mixed(with: .white, 0.08))
        if expression[.tongueOut] > 0.02 {
            addTongue(c)
            c.fillPath(m.tongue)
        }
        addLipEdge(c, first: RigPoint.upperOuter, count: 5, reversed: false, continuing: false)
        addLipEdge(c, first: RigPoint.upperInner, count: 3, reversed: true, continuing: true)
        c.closePath()
        c.fillPath(m.lips)
        addLipEdge(c, first: RigPoint.upperInner, count: 3, reversed: false, continuing: false)
        c.strokePath(m.mouthInterior.withAlpha(0.85), style: StrokeStyle(width: max(px * 1.6, s * 0.016)))
    }

    private func addTeeth(_ c: some Canvas, first: Int, offset: Point2) {
        let p = pose.points
        addLipEdge(c, first: first, count: 3, reversed: false, continuing: false)
        c.addSmoothCurve(count: 5, closed: false, continuing: true) { i in
            let j = 4 - i
            let q = p[j == 0 ? RigPoint.cornerRight : j == 4 ? RigPoint.cornerLeft : first + j - 1]
            return q + offset
        }
        c.closePath()
    }

    func addTongue(_ c: some Canvas) {
        let p = pose.points
        let a = p[RigPoint.lowerInner], b = p[RigPoint.lowerInner + 2], tip = p[RigPoint.tongue]
        let mid = (a + b) / 2
        let bottom = Point2(tip.x, max(tip.y, mid.y))
        c.move(to: a)
        c.curve(to: bottom, control1: Point2(a.x, bottom.y), control2: Point2(bottom.x - (b.x - a.x) * 0.35, bottom.y))
        c.curve(to: b, control1: Point2(bottom.x + (b.x - a.x) * 0.35, bottom.y), control2: Point2(b.x, bottom.y))
        c.closePath()
    }

    private func normalized(_ v: Point2) -> Point2 {
        let len = (v * v).sum().squareRoot()
        return len > 1e-6 ? v / len : Point2(0, 1)
    }
}

extension Rect {
    func expanded(by margin: Float) -> Rect {
        Rect(x: x - margin, y: y - margin, width: width + 2 * margin, height: height + 2 * margin)
    }
}
