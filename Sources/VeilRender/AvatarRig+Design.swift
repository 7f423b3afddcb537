import Foundation
import VeilCore

/// The canonical face's design: rest positions and each blendshape's displacements, in rig units
/// (head ≈ 2 units tall; x to the viewer's right = the person's left, y up, z towards the viewer).
struct RigBuilder {
    // Head: an ellipsoid, narrower towards the chin.
    static let headA: Float = 0.80, headUp: Float = 1.0, headDown: Float = 0.97, headC: Float = 0.74
    static let chinTaper: Float = 0.28
    // Gaze: iris travel at |gaze| = 1, and how far the upper lid follows a downward look.
    static let gazeX: Float = 0.075, gazeY: Float = 0.05, lidFollow: Float = 0.03
    /// Shape of lid motion across the three lid points (strongest in the middle).
    static let lidProfile: [Float] = [0.75, 1, 0.75]

    var base = [SIMD3<Float>](repeating: .zero, count: RigPoint.count)
    var deltas = [[AvatarRig.Delta]](repeating: [], count: BlendShape.allCases.count)
    var outlineDirections: [SIMD3<Float>] = []
    var hairDirections: [SIMD3<Float>] = []

    static func sign(_ side: FaceSide) -> Float { side == .left ? 1 : -1 }

    static func taper(_ y: Float) -> Float {
        guard y < 0 else { return 1 }
        let t = y / headDown
        return 1 - chinTaper * t * t
    }

    /// Depth of the head's front surface at (x, y), 0 outside it.
    static func surfaceZ(_ x: Float, _ y: Float) -> Float {
        let b = y >= 0 ? headUp : headDown
        let xn = x / (headA * taper(y)), yn = y / b
        return headC * max(0, 1 - xn * xn - yn * yn).squareRoot()
    }

    /// A point on the face at (x, y), `lift` in front of the head surface.
    static func onFace(_ x: Float, _ y: Float, lift: Float = 0) -> SIMD3<Float> {
        SIMD3(x, y, surfaceZ(x, y) + lift)
    }

    static func smoothstep(_ e0: Float, _ e1: Float, _ x: Float) -> Float { AvatarRig.smoothstep(e0, e1, x) }

    /// Angles (radians) from the front at which each meridian is sampled.
    static func depthAngle(_ j: Int) -> Float {
        let lo: Float = 20, hi: Float = 160
        return (lo + (hi - lo) * Float(j) / Float(RigPoint.depthSamples - 1)) * .pi / 180
    }

    // MARK: rest shape

    mutating func buildBase() {
        for side in FaceSide.allCases {
            let sx = RigBuilder.sign(side)
            // Eye: corners, lids bulging up 0.092 and down 0.052 at the middle.
            let inner = SIMD2<Float>(sx * 0.16, 0.01), outer = SIMD2<Float>(sx * 0.47, 0.03)
            func lid(_ u: Float, _ height: Float) -> SIMD3<Float> {
                let p = inner + (outer - inner) * u
                return RigBuilder.onFace(p.x, p.y + height * sin(.pi * u), lift: -0.03)
            }
            base[RigPoint.innerCorner(side)] = RigBuilder.onFace(inner.x, inner.y, lift: -0.035)
            base[RigPoint.outerCorner(side)] = RigBuilder.onFace(outer.x, outer.y, lift: -0.035)
            for (k, u) in [Float(0.25), 0.5, 0.75].enumerated() {
                base[RigPoint.upperLid(side, k)] = lid(u, 0.105)
                base[RigPoint.lowerLid(side, k)] = lid(u, -0.06)
            }
            let mid = (inner + outer) / 2
            base[RigPoint.iris(side)] = RigBuilder.onFace(mid.x, mid.y + 0.02, lift: -0.02)

            let browX: [Float] = [0.13, 0.225, 0.33, 0.43, 0.52], browY: [Float] = [0.225, 0.265, 0.282, 0.275, 0.24]
            for (k, i) in RigPoint.brow(side).enumerated() {
                base[i] = RigBuilder.onFace(sx * browX[k], browY[k], lift: 0.025)
            }
            base[RigPoint.alar(side)] = RigBuilder.onFace(sx * 0.088, -0.275, lift: 0.03)
            base[RigPoint.nostril(side)] = RigBuilder.onFace(sx * 0.045, -0.305, lift: 0.085)
            base[RigPoint.bridge(side)] = RigBuilder.onFace(sx * 0.05, -0.02, lift: 0.035)
            base[RigPoint.bridge(side) + 1] = RigBuilder.onFace(sx * 0.062, -0.17, lift: 0.11)
            base[RigPoint.corner(side)] = RigBuilder.onFace(sx * 0.21, -0.525, lift: 0.0)
            base[RigPoint.cheek(side)] = RigBuilder.onFace(sx * 0.45, -0.20)
            base[RigPoint.ear(side)] = SIMD3(sx * 0.82, -0.04, -0.08)
        }
        base[RigPoint.noseTip] = RigBuilder.onFace(0, -0.245, lift: 0.16)
        base[RigPoint.columella] = RigBuilder.onFace(0, -0.305, lift: 0.10)

        let uoX: [Float] = [-0.125, -0.047, 0, 0.047, 0.125], uoY: [Float] = [-0.495, -0.468, -0.478, -0.468, -0.495]
        for k in 0..<5 { base[RigPoint.upperOuter + k] = RigBuilder.onFace(uoX[k], uoY[k], lift: 0.035) }
        let inX: [Float] = [-0.09, 0, 0.09]
        let uiY: [Float] = [-0.530, -0.528, -0.530], liY: [Float] = [-0.534, -0.536, -0.534]
        let loX: [Float] = [-0.115, 0, 0.115], loY: [Float] = [-0.59, -0.612, -0.59]
        for k in 0..<3 {
            base[RigPoint.upperInner + k] = RigBuilder.onFace(inX[k], uiY[k], lift: 0.03)
            base[RigPoint.lowerInner + k] = RigBuilder.onFace(inX[k], liY[k], lift: 0.03)
            base[RigPoint.lowerOuter + k] = RigBuilder.onFace(loX[k], loY[k], lift: 0.035)
        }
        base[RigPoint.tongue] = RigBuilder.onFace(0, -0.545, lift: -0.02)

        base[RigPoint.headCenter] = .zero

        // Head surface samples; meridian m runs clockwise on screen from the viewer's right.
        for m in 0..<RigPoint.outlineMeridians {
            let theta = -2 * Float.pi * Float(m) / Float(RigPoint.outlineMeridians)
            outlineDirections.append(SIMD3(cos(theta), sin(theta), 0))
            for j in 0..<RigPoint.depthSamples {
                let phi = RigBuilder.depthAngle(j)
                let ny = sin(phi) * sin(theta)
                let y = ny * (ny >= 0 ? RigBuilder.headUp : RigBuilder.headDown)
                let x = RigBuilder.headA * sin(phi) * cos(theta) * RigBuilder.taper(y)
                base[RigPoint.headGrid + m * RigPoint.depthSamples + j] = SIMD3(x, y, RigBuilder.headC * cos(phi))
            }
        }
        buildSkinLoop()
        // Hair volume: the head's samples lifted off the surface, most on the top and at the back,
        // and sunk slightly inside it at the front and below (hidden there under the skin).
        // It thins out towards the skin loop, so that it meets the skin without a step.
        let loop = base[RigPoint.skinLoop..<(RigPoint.skinLoop + RigPoint.skinLoopCount)]
        for m in 0..<RigPoint.hairMeridians {
            hairDirections.append(outlineDirections[m])
            for j in 0..<RigPoint.depthSamples {
                let p = base[RigPoint.headGrid + m * RigPoint.depthSamples + j]
                let n = RigBuilder.headNormal(p)
                let v = n.y - 0.6 * n.z
                var nearest = Float.greatestFiniteMagnitude
                for q in loop { let d = p - q; nearest = min(nearest, (d * d).sum()) }
                let thickness = -0.04 + 0.135 * RigBuilder.smoothstep(0, 0.6, v)
                    * RigBuilder.smoothstep(0.05, 0.35, nearest.squareRoot())
                base[RigPoint.hairGrid + m * RigPoint.depthSamples + j] = p + n * thickness
            }
        }
    }

    /// Moves `p` along the ray from the head's centre onto the head surface.
    static func snapToHead(_ p: SIMD3<Float>) -> SIMD3<Float> {
        var q = p
        for _ in 0..<6 {
            let b = q.y >= 0 ? headUp : headDown
            let x = q.x / (headA * taper(q.y)), y = q.y / b, z = q.z / headC
            let r = (x * x + y * y + z * z).squareRoot()
            guard r > 1e-6 else { return q }
            q /= r
        }
        return q
    }

    /// Outward surface normal of the head near `p` (the taper's slope is ignored).
    static func headNormal(_ p: SIMD3<Float>) -> SIMD3<Float> {
        let b = p.y >= 0 ? headUp : headDown
        let a = headA * taper(p.y)
        let n = SIMD3(p.x / (a * a), p.y / (b * b), p.z / (headC * headC))
        let len = (n * n).sum().squareRoot()
        return len > 1e-9 ? n / len : SIMD3(0, 0, 1)
    }

    var skinLoopNormals: [SIMD3<Float>] = []

    /// The loop between skin and hair: control points resampled with a closed Catmull-Rom spline
    /// and snapped onto the head.
    mutating func buildSkinLoop() {
        var control: [SIMD3<Float>] = []
        let hairX: [Float] = [-0.79, -0.66, -0.42, -0.14, 0.14, 0.42, 0.66, 0.79]
        let hairY: [Float] = [0.16, 0.42, 0.58, 0.64, 0.61, 0.57, 0.42, 0.16]
        for k in 0..<hairX.count { control.append(RigBuilder.onFace(hairX[k], hairY[k])) }
        let back: [SIMD3<Float>] = [SIMD3(0.80, 0.12, -0.2), SIMD3(0.76, -0.1, -0.4), SIMD3(0.4, -0.45, -0.65),
                                    SIMD3(0, -0.55, -0.74), SIMD3(-0.4, -0.45, -0.65), SIMD3(-0.76, -0.1, -0.4),
                                    SIMD3(-0.80, 0.12, -0.2)]
        control += back
        let n = control.count
        let perSegment = RigPoint.skinLoopCount / n
        var index = RigPoint.skinLoop
        for i in 0..<n {
            let p0 = control[(i + n - 1) % n], p1 = control[i], p2 = control[(i + 1) % n], p3 = control[(i + 2) % n]
            let steps = i < RigPoint.skinLoopCount % n ? perSegment + 1 : perSegment
            for k in 0..<steps {
                let t = Float(k) / Float(steps)
                let t2 = t * t, t3 = t2 * t
                var p = 2 * p1 + (p2 - p0) * t
                p += (2 * p0 - 5 * p1 + 4 * p2 - p3) * t2
                p += (3 * p1 - p0 - 3 * p2 + p3) * t3
                let q = RigBuilder.snapToHead(p * 0.5)
                base[index] = q
                skinLoopNormals.append(RigBuilder.headNormal(q))
                index += 1
            }
        }
    }

    // MARK: displacements

    private mutating func add(_ shape: BlendShape, _ index: Int, _ x: Float, _ y: Float, _ z: Float = 0) {
        deltas[shape.rawValue].append(AvatarRig.Delta(index: index, offset: SIMD3(x, y, z)))
    }

    /// A displacement field over the head's surface samples (the outline follows the jaw, cheeks).
    private mutating func field(_ shape: BlendShape, _ f: (SIMD3<Float>) -> SIMD3<Float>) {
        for i in RigPoint.headGrid..<RigPoint.hairGrid {
            let d = f(base[i])
            if (d * d).sum() > 1e-10 { deltas[shape.rawValue].append(AvatarRig.Delta(index: i, offset: d)) }
        }
    }

    /// How much a surface point belongs to the jaw: below the mouth and on the front half.
    static func jawWeight(_ p: SIMD3<Float>) -> Float {
        smoothstep(-0.36, -0.72, p.y) * smoothstep(-0.45, 0.25, p.z)
    }

    mutating func buildDeltas() {
        let profile = RigBuilder.lidProfile
        for side in FaceSide.allCases {
            let sx = RigBuilder.sign(side)
            let blink: BlendShape = side == .left ? .eyeBlinkLeft : .eyeBlinkRight
            let wide: BlendShape = side == .left ? .eyeWideLeft : .eyeWideRight
            let squint: BlendShape = side == .left ? .eyeSquintLeft : .eyeSquintRight
            let lookUp: BlendShape = side == .left ? .eyeLookUpLeft : .eyeLookUpRight
            let lookDown: BlendShape = side == .left ? .eyeLookDownLeft : .eyeLookDownRight
            let lookIn: BlendShape = side == .left ? .eyeLookInLeft : .eyeLookInRight
            let lookOut: BlendShape = side == .left ? .eyeLookOutLeft : .eyeLookOutRight
            let cheekSquint: BlendShape = side == .left ? .cheekSquintLeft : .cheekSquintRight
            let smile: BlendShape = side == .left ? .mouthSmileLeft : .mouthSmileRight
            let frown: BlendShape = side == .left ? .mouthFrownLeft : .mouthFrownRight
            let stretch: BlendShape = side == .left ? .mouthStretchLeft : .mouthStretchRight
            let dimple: BlendShape = side == .left ? .mouthDimpleLeft : .mouthDimpleRight
            let press: BlendShape = side == .left ? .mouthPressLeft : .mouthPressRight
            let upperUp: BlendShape = side == .left ? .mouthUpperUpLeft : .mouthUpperUpRight
            let lowerDown: BlendShape = side == .left ? .mouthLowerDownLeft : .mouthLowerDownRight
            let browDown: BlendShape = side == .left ? .browDownLeft : .browDownRight
            let browOuterUp: BlendShape = side == .left ? .browOuterUpLeft : .browOuterUpRight
            let sneer: BlendShape = side == .left ? .noseSneerLeft : .noseSneerRight

            // Eyes. A blink lays the upper lid onto the lower one (a closed eye is the lower lid's arc).
            for k in 0..<3 {
                let u = RigPoint.upperLid(side, k), l = RigPoint.lowerLid(side, k)
                let onto = base[l] - base[u] + SIMD3(0, 0.004, 0.006)
                add(blink, u, onto.x, onto.y, onto.z)
                add(wide, u, 0, 0.045 * profile[k]); add(wide, l, 0, -0.012 * profile[k])
                add(squint, l, 0, 0.036 * profile[k]); add(squint, u, 0, -0.014 * profile[k])
                add(cheekSquint, l, 0, 0.02 * profile[k])
                add(smile, l, 0, 0.012 * profile[k])
                add(lookUp, u, 0, 0.012 * profile[k])
                add(lookDown, u, 0, -RigBuilder.lidFollow * profile[k]); add(lookDown, l, 0, -0.005 * profile[k])
            }
            let iris = RigPoint.iris(side)
            add(lookUp, iris, 0, RigBuilder.gazeY); add(lookDown, iris, 0, -RigBuilder.gazeY)
            add(lookIn, iris, -sx * RigBuilder.gazeX, 0); add(lookOut, iris, sx * RigBuilder.gazeX, 0)
            add(cheekSquint, RigPoint.cheek(side), 0, 0.045, 0.01)

            // Brows, inner → outer.
            let downW: [Float] = [1.0, 0.9, 0.75, 0.6, 0.45], outerW: [Float] = [0, 0.2, 0.5, 0.8, 1.0]
            let innerW: [Float] = [1.0, 0.75, 0.4, 0.15, 0]
            for (k, i) in RigPoint.brow(side).enumerated() {
                add(browDown, i, -sx * 0.025 * (1 - Float(k) / 4), -0.065 * downW[k])
                add(browOuterUp, i, 0, 0.075 * outerW[k])
                add(.browInnerUp, i, -sx * 0.01 * innerW[k], 0.085 * innerW[k])
            }
            add(sneer, RigPoint.brow(side).lowerBound, 0, -0.015)
            add(sneer, RigPoint.alar(side), 0, 0.03); add(sneer, RigPoint.nostril(side), 0, 0.02)
            add(sneer, RigPoint.bridge(side) + 1, 0, 0.01)

            // Mouth, this side's points: corner, upper outer (outer, inner), upper inner, lower inner, lower outer.
            let corner = RigPoint.corner(side)
            let uoOut = RigPoint.upperOuter + (side == .left ? 4 : 0), uoIn = RigPoint.upperOuter + (side == .left ? 3 : 1)
            let ui = RigPoint.upperInner + (side == .left ? 2 : 0), li = RigPoint.lowerInner + (side == .left ? 2 : 0)
            let lo = RigPoint.lowerOuter + (side == .left ? 2 : 0)
            let uoC = RigPoint.upperOuter + 2, uiC = RigPoint.upperInner + 1
            let liC = RigPoint.lowerInner + 1, loC = RigPoint.lowerOuter + 1

            add(smile, corner, sx * 0.05, 0.10, -0.01)
            add(smile, uoOut, sx * 0.03, 0.05); add(smile, uoIn, sx * 0.01, 0.015)
            add(smile, ui, sx * 0.025, 0.055); add(smile, li, sx * 0.025, 0.05); add(smile, lo, sx * 0.02, 0.04)
            add(smile, RigPoint.cheek(side), sx * 0.01, 0.04, 0.02)

            add(frown, corner, sx * 0.005, -0.07)
            for i in [uoOut, ui, li] { add(frown, i, 0, -0.03) }
            add(frown, lo, 0, -0.025)

            add(stretch, corner, sx * 0.05, -0.025)
            add(stretch, li, sx * 0.02, -0.015); add(stretch, lo, sx * 0.02, -0.02)
            add(stretch, uoOut, sx * 0.025, -0.005); add(stretch, ui, sx * 0.02, -0.01)

            add(dimple, corner, sx * 0.025, 0.008, -0.02)
            add(press, uoOut, 0, -0.012); add(press, uoIn, 0, -0.012); add(press, lo, 0, 0.015)

            add(upperUp, ui, 0, 0.045); add(upperUp, uoOut, 0, 0.04); add(upperUp, uoIn, 0, 0.05)
            add(upperUp, uiC, 0, 0.02); add(upperUp, uoC, 0, 0.02)
            add(lowerDown, li, 0, -0.05); add(lowerDown, lo, 0, -0.05)
            add(lowerDown, liC, 0, -0.025); add(lowerDown, loC, 0, -0.025)

            // Both-sided shapes, this side's half.
            add(.jawOpen, corner, -sx * 0.015, -0.08)
            add(.jawOpen, li, 0, -0.21); add(.jawOpen, lo, 0, -0.22)
            add(.mouthClose, corner, 0, 0.06)
            add(.mouthClose, li, 0, 0.19); add(.mouthClose, lo, 0, 0.19)
            add(.mouthFunnel, corner, -sx * 0.075, -0.005, 0.04)
            add(.mouthFunnel, ui, -sx * 0.03, 0.03, 0.05); add(.mouthFunnel, li, -sx * 0.03, -0.035, 0.05)
            add(.mouthFunnel, uoOut, -sx * 0.045, 0.02, 0.05); add(.mouthFunnel, uoIn, -sx * 0.01, 0.03, 0.05)
            add(.mouthFunnel, lo, -sx * 0.03, -0.03, 0.05)
            add(.mouthPucker, corner, -sx * 0.095, 0, 0.05)
            add(.mouthPucker, uoOut, -sx * 0.06, 0.012, 0.05); add(.mouthPucker, uoIn, -sx * 0.02, 0.012, 0.05)
            add(.mouthPucker, ui, -sx * 0.05, 0, 0.05); add(.mouthPucker, li, -sx * 0.05, 0, 0.05)
            add(.mouthPucker, lo, -sx * 0.055, -0.015, 0.05)
            add(.mouthRollLower, lo, 0, 0.025); add(.mouthRollUpper, uoOut, 0, -0.015); add(.mouthRollUpper, uoIn, 0, -0.025)
            add(.cheekPuff, RigPoint.cheek(side), sx * 0.08, -0.02, 0.05)
            add(.cheekPuff, corner, -sx * 0.015, 0, 0.02)
        }
        // Centre points of both-sided shapes.
        let uoC = RigPoint.upperOuter + 2, uiC = RigPoint.upperInner + 1
        let liC = RigPoint.lowerInner + 1, loC = RigPoint.lowerOuter + 1
        add(.jawOpen, liC, 0, -0.245); add(.jawOpen, loC, 0, -0.255); add(.jawOpen, uiC, 0, 0.01)
        add(.jawOpen, RigPoint.tongue, 0, -0.19, -0.03)
        add(.mouthClose, liC, 0, 0.23); add(.mouthClose, loC, 0, 0.23); add(.mouthClose, uiC, 0, -0.012)
        add(.mouthFunnel, uiC, 0, 0.045, 0.05); add(.mouthFunnel, liC, 0, -0.055, 0.05)
        add(.mouthFunnel, uoC, 0, 0.03, 0.05); add(.mouthFunnel, loC, 0, -0.045, 0.05)
        add(.mouthPucker, uoC, 0, 0.012, 0.05); add(.mouthPucker, uiC, 0, 0, 0.05)
        add(.mouthPucker, liC, 0, 0, 0.05); add(.mouthPucker, loC, 0, -0.02, 0.05)
        add(.mouthRollLower, loC, 0, 0.03); add(.mouthRollUpper, uoC, 0, -0.025)
        for k in 0..<3 {
            add(.mouthShrugLower, RigPoint.lowerInner + k, 0, 0.02); add(.mouthShrugLower, RigPoint.lowerOuter + k, 0, 0.025)
            add(.mouthShrugUpper, RigPoint.upperInner + k, 0, 0.015)
            // Seen from the front, a jaw pushed forward mostly shows as a lower lip pushed up.
            add(.jawForward, RigPoint.lowerInner + k, 0, 0.004, 0.05); add(.jawForward, RigPoint.lowerOuter + k, 0, 0.02, 0.05)
        }
        for k in 0..<5 { add(.mouthShrugUpper, RigPoint.upperOuter + k, 0, 0.015) }
        add(.tongueOut, RigPoint.tongue, 0, -0.17, 0.1)

        // Sideways mouth and jaw: the whole mouth moves, the corner on the leading side a little more.
        let mouth = [RigPoint.cornerRight, RigPoint.cornerLeft] + Array(RigPoint.upperOuter..<RigPoint.tongue + 1)
        for i in mouth {
            add(.mouthLeft, i, i == RigPoint.cornerLeft ? 0.08 : 0.065, 0)
            add(.mouthRight, i, i == RigPoint.cornerRight ? -0.08 : -0.065, 0)
        }
        for i in [RigPoint.lowerInner, RigPoint.lowerInner + 1, RigPoint.lowerInner + 2,
                  RigPoint.lowerOuter, RigPoint.lowerOuter + 1, RigPoint.lowerOuter + 2, RigPoint.tongue] {
            add(.jawLeft, i, 0.05, 0); add(.jawRight, i, -0.05, 0)
        }

        // The head's outline: the jaw drops and swings, the cheeks puff.
        field(.jawOpen) { SIMD3(0, -0.27, -0.05) * RigBuilder.jawWeight($0) }
        field(.jawLeft) { SIMD3(0.07, 0, 0) * RigBuilder.jawWeight($0) }
        field(.jawRight) { SIMD3(-0.07, 0, 0) * RigBuilder.jawWeight($0) }
        field(.jawForward) { SIMD3(0, 0.025, 0.06) * RigBuilder.jawWeight($0) }
        field(.cheekPuff) { p in
            let dx = abs(p.x) - 0.55, dy = p.y + 0.32
            let g = exp(-(dx * dx + dy * dy) / (2 * 0.22 * 0.22)) * RigBuilder.smoothstep(-0.2, 0.3, p.z)
            return SIMD3(p.x > 0 ? 0.14 : -0.14, 0, 0.05) * g
        }
    }
}

// MARK: - The design as data

extension AvatarRigData {
    /// The canonical face as designed here: the data both renderers draw from. `veil rig` writes it
    /// to `web/avatar-rig.json` for the browser; a test keeps that file equal to this.
    public static let design: AvatarRigData = RigBuilder.designData()
}

extension RigBuilder {
    static let irisRadius: Float = 0.062
    /// Largest head rotations drawn, in degrees; larger poses are clamped (the rig shows its front).
    static let maxYaw: Float = 60, maxPitch: Float = 45
    /// The head turns about a point behind and below its centre (towards the neck).
    static let pivot = SIMD3<Float>(0, -0.15, -0.3)
    /// The head's scale is min(0.33 × height, 0.40 × width), its centre 0.45 of the way down.
    static let placement = AvatarRigData.Placement(heightScale: 0.33, widthScale: 0.40, centerY: 0.45)
    /// Lids and lips never cross: the gaps and thicknesses the solve keeps.
    static let limits = AvatarRigData.Limits(maxYaw: maxYaw, maxPitch: maxPitch, lidGap: 0.003, lipGap: 0.002,
                                             lowerLipThickness: 0.03, upperLipThickness: 0.015)
    /// Skin loop points facing away (normal z from 0.05 down to -0.25) go out by up to 1.6 units.
    static let skinLoopHiding = AvatarRigData.SkinLoopHiding(from: 0.05, to: -0.25, push: 1.6)

    static func designData() -> AvatarRigData {
        var builder = RigBuilder()
        builder.buildBase()
        builder.buildDeltas()
        var fields: [String: AvatarRigData.Displacements] = [:]
        for shape in BlendShape.allCases where !builder.deltas[shape.rawValue].isEmpty {
            let table = builder.deltas[shape.rawValue]
            fields[shape.name] = AvatarRigData.Displacements(points: table.map(\.index), offsets: table.map(\.offset))
        }
        var styles: [String: AvatarRigData.Style] = [:]
        for (name, style) in AvatarStyle.named { styles[name] = AvatarRigData.Style(style) }
        var backgrounds: [String: AvatarRigData.Background] = [:]
        for (name, background) in AvatarBackground.named { backgrounds[name] = AvatarRigData.Background(background) }
        return AvatarRigData(
            format: AvatarRigData.formatName, version: AvatarRigData.currentVersion,
            about: "The canonical Veil avatar, drawn by the Swift renderer and web/avatar.js. Written by `veil rig --out web/avatar-rig.json` from Sources/VeilRender/AvatarRig+Design.swift; do not edit by hand. Format: docs/avatar.md.",
            layout: .current, placement: placement, pivot: pivot, limits: limits, irisRadius: irisRadius,
            gaze: AvatarRigData.GazeMotion(irisTravelX: gazeX, irisTravelY: gazeY, lidFollow: lidFollow, lidProfile: lidProfile),
            points: builder.base, blendShapes: fields,
            outlineDirections: builder.outlineDirections, hairDirections: builder.hairDirections,
            skinLoopNormals: builder.skinLoopNormals, skinLoopHiding: skinLoopHiding,
            styles: styles, defaultStyle: AvatarStyle.named[0].name,
            backgrounds: backgrounds, defaultBackground: AvatarBackground.named[0].name)
    }
}
