import Foundation
import VeilCore
import VeilVision

/// The canonical face: one fixed, designed 3-D head, the same for everybody, posed by an `Expression`.
///
/// Rig units: the head is about 2 units tall, centred on the origin; x points to the viewer's right
/// (the person's left), y up, z towards the viewer. Each blendshape coefficient moves control points
/// by a designed displacement (`coefficient × displacement`, summed over all coefficients); then the
/// head pose rotates the points (yaw about y, pitch about x, roll about the view axis) and a weak
/// perspective (orthographic, uniform scale) projection maps them into the view. The face outline
/// is the silhouette of the deformed head surface, found per frame from surface samples. Only the
/// `Expression` enters; no other input shapes the face.
public struct AvatarRig: Sendable {
    /// The one canonical face, from the design's data (`AvatarRigData.design`, the data
    /// `web/avatar-rig.json` holds).
    public static let canonical = AvatarRig(validated: AvatarRigData.design)

    /// Largest head rotations the canonical face draws, in degrees; larger poses are clamped.
    public static var maxYaw: Float { canonical.data.limits.maxYaw }
    /// See `maxYaw`.
    public static var maxPitch: Float { canonical.data.limits.maxPitch }

    struct Delta: Sendable {
        var index: Int
        var offset: SIMD3<Float>
    }

    /// The data this rig was made from: geometry, solve parameters, named styles and backgrounds.
    public let data: AvatarRigData
    /// Rest positions of all control points (`RigPoint` order).
    let base: [SIMD3<Float>]
    /// Per blendshape (raw value), the displacement at full strength of each point it moves.
    let deltas: [[Delta]]

    /// A rig from data (decoded from a rig file, or the design's).
    /// - Throws: `AvatarRigError.invalid` when the data does not fit this renderer.
    public init(data: AvatarRigData) throws {
        try data.validate()
        self.init(validated: data)
    }

    /// Reads a rig file (`veil rig` writes one; `web/avatar-rig.json` is the canonical face's).
    /// - Throws: `AvatarRigError`: the file is missing or unreadable, not a rig, of another
    ///   version, or invalid.
    public init(contentsOf url: URL) throws {
        self.init(validated: try AvatarRigData(contentsOf: url))
    }

    private init(validated data: AvatarRigData) {
        self.data = data
        base = data.points
        var deltas = [[Delta]](repeating: [], count: BlendShape.allCases.count)
        for (name, field) in data.blendShapes {
            guard let shape = BlendShape(name: name) else { continue }
            deltas[shape.rawValue] = zip(field.points, field.offsets).map { Delta(index: $0, offset: $1) }
        }
        self.deltas = deltas
    }

    /// The named style `name` of the rig's data (`mask`, `sketch`), or nil.
    public func style(named name: String) -> AvatarStyle? {
        data.styles[name].flatMap { try? AvatarStyle($0) }
    }

    /// The named background `name` of the rig's data (`gradient`, `dark`, `black`, `white`, `none`), or nil.
    public func background(named name: String) -> AvatarBackground? {
        data.backgrounds[name].flatMap { try? AvatarBackground($0) }
    }

    /// The head's projection centre and scale (pixels per rig unit) for a view rectangle: the head
    /// sits a little above the middle, leaving room below for an open jaw and the shoulders.
    public static func placement(in rect: Rect) -> (center: Point2, scale: Float) {
        canonical.placement(in: rect)
    }

    /// See `placement(in:)` (static); this rig's placement.
    public func placement(in rect: Rect) -> (center: Point2, scale: Float) {
        let w = rect.width.isFinite ? max(rect.width, 0) : 0
        let h = rect.height.isFinite ? max(rect.height, 0) : 0
        let p = data.placement
        let scale = min(h * p.heightScale, w * p.widthScale)
        let x = rect.x.isFinite ? rect.x : 0, y = rect.y.isFinite ? rect.y : 0
        return (Point2(x + w / 2, y + h * p.centerY), scale)
    }

    /// Poses the face for `expression` and projects it into `rect` (a new pose; renderers reuse one
    /// with `solve(_:in:into:)`).
    public func pose(for expression: VeilCore.Expression, in rect: Rect) -> AvatarPose {
        var pose = AvatarPose()
        solve(expression, in: rect, into: &pose)
        return pose
    }

    /// Poses the face for `expression` and projects it into `rect`, reusing `pose`'s storage.
    public func solve(_ expression: VeilCore.Expression, in rect: Rect, into pose: inout AvatarPose) {
        let n = RigPoint.count
        if pose.work.count != n {
            pose.work = [SIMD3<Float>](repeating: .zero, count: n)
            pose.points = [Point2](repeating: .zero, count: n)
            pose.depth = [Float](repeating: 0, count: n)
            pose.outline = [Point2](repeating: .zero, count: RigPoint.outlineMeridians)
            pose.hairOutline = [Point2](repeating: .zero, count: RigPoint.hairMeridians)
            pose.skinLoop = [Point2](repeating: .zero, count: RigPoint.skinLoopCount)
        }
        let coefficients = expression.coefficients
        let useGaze = expression.gaze != nil
        pose.work.withUnsafeMutableBufferPointer { work in
            base.withUnsafeBufferPointer { base in
                for i in 0..<n { work[i] = base[i] }
            }
            for (shape, table) in deltas.enumerated() where shape < coefficients.count {
                let c = coefficients[shape]
                guard c > 0.0005, !(useGaze && AvatarRig.isEyeLook(shape)) else { continue }
                for d in table { work[d.index] += c * d.offset }
            }
            if let gaze = expression.gaze { applyGaze(gaze, to: work) }
            constrain(work)
        }
        project(expression.headPose, rect: rect, pose: &pose)
    }

    private static func isEyeLook(_ raw: Int) -> Bool {
        switch BlendShape(rawValue: raw) {
        case .eyeLookUpLeft, .eyeLookDownLeft, .eyeLookInLeft, .eyeLookOutLeft,
             .eyeLookUpRight, .eyeLookDownRight, .eyeLookInRight, .eyeLookOutRight: return true
        default: return false
        }
    }

    /// Gaze turns both irises; looking down lowers the upper lids a little, as real lids follow.
    private func applyGaze(_ gaze: Gaze, to work: UnsafeMutableBufferPointer<SIMD3<Float>>) {
        let gx = gaze.x.isFinite ? min(max(gaze.x, -1), 1) : 0
        let gy = gaze.y.isFinite ? min(max(gaze.y, -1), 1) : 0
        let motion = data.gaze
        for side in FaceSide.allCases {
            work[RigPoint.iris(side)] += SIMD3(gx * motion.irisTravelX, gy * motion.irisTravelY, 0)
            if gy < 0 {
                for k in 0..<3 { work[RigPoint.upperLid(side, k)].y += gy * motion.lidFollow * motion.lidProfile[k] }
            }
        }
    }

    /// Keeps summed displacements physically plausible: lids and lips never cross.
    private func constrain(_ work: UnsafeMutableBufferPointer<SIMD3<Float>>) {
        let limits = data.limits
        for side in FaceSide.allCases {
            for k in 0..<3 {
                let lower = work[RigPoint.lowerLid(side, k)]
                let u = RigPoint.upperLid(side, k)
                if work[u].y < lower.y + limits.lidGap { work[u].y = lower.y + limits.lidGap }
            }
        }
        for k in 0..<3 {
            let ui = RigPoint.upperInner + k, li = RigPoint.lowerInner + k, lo = RigPoint.lowerOuter + k
            if work[li].y > work[ui].y - limits.lipGap { work[li].y = work[ui].y - limits.lipGap }
            if work[lo].y > work[li].y - limits.lowerLipThickness { work[lo].y = work[li].y - limits.lowerLipThickness }
        }
        for k in 0..<5 {
            let uo = RigPoint.upperOuter + k
            let ui = RigPoint.upperInner + min(max(k - 1, 0), 2)
            if work[uo].y < work[ui].y + limits.upperLipThickness { work[uo].y = work[ui].y + limits.upperLipThickness }
        }
    }

    private func project(_ headPose: HeadPose, rect: Rect, pose: inout AvatarPose) {
        func finite(_ v: Float, _ limit: Float) -> Float { v.isFinite ? min(max(v, -limit), limit) : 0 }
        let clamped = HeadPose(yaw: finite(headPose.yaw, data.limits.maxYaw),
                               pitch: finite(headPose.pitch, data.limits.maxPitch),
                               roll: finite(headPose.roll, 180))
        let deg = Float.pi / 180
        let (cy, sy) = (cos(clamped.yaw * deg), sin(clamped.yaw * deg))
        let (cp, sp) = (cos(clamped.pitch * deg), sin(clamped.pitch * deg))
        let (cr, sr) = (cos(clamped.roll * deg), sin(clamped.roll * deg))
        // R = Roll · Pitch · Yaw. Yaw: front (+z) moves to +x. Pitch: front moves up (+y).
        // Roll: clockwise on screen, i.e. up (+y) moves to +x.
        let yawM = (SIMD3<Float>(cy, 0, sy), SIMD3<Float>(0, 1, 0), SIMD3<Float>(-sy, 0, cy))
        let pitchM = (SIMD3<Float>(1, 0, 0), SIMD3<Float>(0, cp, sp), SIMD3<Float>(0, -sp, cp))
        let rollM = (SIMD3<Float>(cr, sr, 0), SIMD3<Float>(-sr, cr, 0), SIMD3<Float>(0, 0, 1))
        let py = AvatarRig.multiply(pitchM, yawM)
        let r = AvatarRig.multiply(rollM, py)
        let (center, scale) = placement(in: rect)
        pose.rotation = r
        pose.scale = scale
        pose.center = center
        pose.headPose = clamped
        pose.irisRadiusUnits = data.irisRadius
        let n = RigPoint.count
        let pivot = data.pivot
        let pivotShift = pivot - SIMD3((r.0 * pivot).sum(), (r.1 * pivot).sum(), (r.2 * pivot).sum())
        pose.work.withUnsafeBufferPointer { work in
            pose.points.withUnsafeMutableBufferPointer { points in
                pose.depth.withUnsafeMutableBufferPointer { depth in
                    for i in 0..<n {
                        let p = work[i]
                        let x = (r.0 * p).sum() + pivotShift.x, y = (r.1 * p).sum() + pivotShift.y
                        let z = (r.2 * p).sum() + pivotShift.z
                        points[i] = Point2(center.x + scale * x, center.y - scale * y)
                        depth[i] = z
                    }
                }
            }
        }
        // Moved out and back so that the buffers stay uniquely owned (no copy) while the pose is read.
        var outline = pose.outline, hair = pose.hairOutline
        pose.outline = []; pose.hairOutline = []
        silhouette(pose, grid: RigPoint.headGrid, directions: data.outlineDirections, into: &outline)
        silhouette(pose, grid: RigPoint.hairGrid, directions: data.hairDirections, into: &hair)
        pose.outline = outline; pose.hairOutline = hair
        // The skin loop's hidden parts are pushed out beyond the silhouette, along their projected
        // surface normal (which points out across the silhouette), so that the region the loop
        // encloses is the visible skin once clipped to the outline.
        let headCenter = pose.points[RigPoint.headCenter]
        let hiding = data.skinLoopHiding
        for k in 0..<RigPoint.skinLoopCount {
            let n = data.skinLoopNormals[k]
            let normalZ = (r.2 * n).sum()
            var q = pose.points[RigPoint.skinLoop + k]
            let hidden = AvatarRig.smoothstep(hiding.from, hiding.to, normalZ)
            if hidden > 0 {
                var d = Point2((r.0 * n).sum(), -(r.1 * n).sum())
                var len = (d * d).sum().squareRoot()
                if len < 0.15 { d = q - headCenter; len = (d * d).sum().squareRoot() }
                if len > 1e-6 { q += d / len * (hiding.push * scale * hidden) }
            }
            pose.skinLoop[k] = q
        }
    }

    /// For each meridian, the projected surface sample farthest out along the meridian's projected
    /// outward direction, refined between neighbouring samples with a parabola.
    private func silhouette(_ pose: AvatarPose, grid: Int, directions: [SIMD3<Float>],
                            into out: inout [Point2]) {
        let samples = RigPoint.depthSamples
        let center = pose.points[RigPoint.headCenter]
        for (m, direction) in directions.enumerated() {
            var dir = pose.screenDirection(direction)
            let len = (dir * dir).sum().squareRoot()
            dir = len > 1e-6 ? dir / len : Point2(1, 0)
            let start = grid + m * samples
            var best = 0
            var bestValue = -Float.greatestFiniteMagnitude
            for j in 0..<samples {
                let v = ((pose.points[start + j] - center) * dir).sum()
                if v > bestValue { bestValue = v; best = j }
            }
            var p = pose.points[start + best]
            if best > 0 && best < samples - 1 {
                let a = ((pose.points[start + best - 1] - center) * dir).sum()
                let c = ((pose.points[start + best + 1] - center) * dir).sum()
                let denom = a - 2 * bestValue + c
                if denom < -1e-9 {
                    let delta = min(max(0.5 * (a - c) / denom, -0.5), 0.5)
                    let neighbour = pose.points[start + best + (delta > 0 ? 1 : -1)]
                    p += (neighbour - p) * abs(delta)
                }
            }
            out[m] = p
        }
    }

    static func smoothstep(_ e0: Float, _ e1: Float, _ x: Float) -> Float {
        let t = min(max((x - e0) / (e1 - e0), 0), 1)
        return t * t * (3 - 2 * t)
    }

    private typealias Matrix = (SIMD3<Float>, SIMD3<Float>, SIMD3<Float>)
    private static func multiply(_ a: Matrix, _ b: Matrix) -> Matrix {
        let bc0 = SIMD3<Float>(b.0.x, b.1.x, b.2.x)
        let bc1 = SIMD3<Float>(b.0.y, b.1.y, b.2.y)
        let bc2 = SIMD3<Float>(b.0.z, b.1.z, b.2.z)
        func row(_ r: SIMD3<Float>) -> SIMD3<Float> { SIMD3((r * bc0).sum(), (r * bc1).sum(), (r * bc2).sum()) }
        return (row(a.0), row(a.1), row(a.2))
    }
}
