import Foundation
import VeilCore
import VeilVision

/// Hermite smoothstep: 0 below `e0`, 1 above `e1`, smooth in between.
@inline(__always)
func smoothstep(_ e0: Float, _ e1: Float, _ x: Float) -> Float {
    let t = min(max((x - e0) / (e1 - e0), 0), 1)
    return t * t * (3 - 2 * t)
}

/// The face's own axes in the photo: `up` from chin to forehead top, `right` towards image right
/// for an upright face, origin at the centre of the face oval.
struct FaceFrame: Sendable {
    let centre: Point2, up: Point2, right: Point2

    init(centre: Point2, chin: Point2, foreheadTop: Point2) {
        self.centre = centre
        let axis = foreheadTop - chin
        let length = (axis * axis).sum().squareRoot()
        up = length > 0 ? axis / length : Point2(0, -1)
        right = Point2(-up.y, up.x)
    }

    /// Lateral coordinate (towards image right).
    @inline(__always) func u(_ p: Point2) -> Float { ((p - centre) * right).sum() }
    /// Vertical coordinate (towards the forehead).
    @inline(__always) func v(_ p: Point2) -> Float { ((p - centre) * up).sum() }
    @inline(__always) func point(u: Float, v: Float) -> Point2 { centre + right * u + up * v }
}

/// A point partway along a chain: segment index and fraction.
struct ChainPosition: Sendable { let segment: Int, t: Float }

/// Two chains of mesh indices that run between the same two corners, e.g. upper and lower lid.
/// Both run from the corner on image left (smaller `u`) to the one on image right.
struct ChainPair: Sendable {
    let upper: [Int], lower: [Int]
    /// For each upper point, the point at the same arc-length fraction on `lower`, and vice versa.
    let upperPartners: [ChainPosition], lowerPartners: [ChainPosition]

    /// Splits a closed loop at its leftmost and rightmost points (in the face frame); the upper
    /// chain is the one lying higher on the face.
    init?(loop: [Int], points: [Point2], frame: FaceFrame) {
        guard loop.count >= 4, loop.allSatisfy({ $0 < points.count }) else { return nil }
        let us = loop.map { frame.u(points[$0]) }
        guard let a = us.indices.min(by: { us[$0] < us[$1] }), let b = us.indices.max(by: { us[$0] < us[$1] }), a != b
        else { return nil }
        let n = loop.count
        var forward: [Int] = [], backward: [Int] = []
        var k = a
        while true { forward.append(loop[k]); if k == b { break }; k = (k + 1) % n }
        k = a
        while true { backward.append(loop[k]); if k == b { break }; k = (k + n - 1) % n }
        guard forward.count >= 2, backward.count >= 2 else { return nil }
        func meanV(_ c: [Int]) -> Float { c.map { frame.v(points[$0]) }.reduce(0, +) / Float(c.count) }
        let forwardIsUpper = meanV(forward) >= meanV(backward)
        upper = forwardIsUpper ? forward : backward
        lower = forwardIsUpper ? backward : forward
        upperPartners = ChainPair.partners(of: upper, on: lower, points: points)
        lowerPartners = ChainPair.partners(of: lower, on: upper, points: points)
    }

    /// Arc-length fraction of each point along `chain`.
    static func fractions(_ chain: [Int], _ points: [Point2]) -> [Float] {
        var acc: [Float] = [0]
        for k in 1..<chain.count {
            let d = points[chain[k]] - points[chain[k - 1]]
            acc.append(acc[k - 1] + (d * d).sum().squareRoot())
        }
        let total = acc.last ?? 0
        return total > 0 ? acc.map { $0 / total } : chain.indices.map { Float($0) / Float(max(chain.count - 1, 1)) }
    }

    static func partners(of chain: [Int], on other: [Int], points: [Point2]) -> [ChainPosition] {
        // Equal counts (MediaPipe's lids and inner lips): pair by index, so that 159 meets 145.
        if chain.count == other.count {
            return chain.indices.map { k in
                k < chain.count - 1 ? ChainPosition(segment: k, t: 0) : ChainPosition(segment: k - 1, t: 1)
            }
        }
        let f = fractions(chain, points), g = fractions(other, points)
        return f.map { x in
            var s = 0
            while s < other.count - 2 && g[s + 1] < x { s += 1 }
            let span = g[s + 1] - g[s]
            return ChainPosition(segment: s, t: span > 0 ? min(max((x - g[s]) / span, 0), 1) : 0)
        }
    }

    @inline(__always)
    static func position(_ p: ChainPosition, on chain: [Int], _ points: [Point2]) -> Point2 {
        let a = points[chain[p.segment]], b = points[chain[p.segment + 1]]
        return a + (b - a) * p.t
    }

    /// Triangles filling the region between the chains (corners shared, no degenerate triangles).
    func stripTriangles(points: [Point2]) -> [(Int, Int, Int)] {
        let f = ChainPair.fractions(upper, points), g = ChainPair.fractions(lower, points)
        var out: [(Int, Int, Int)] = []
        var i = 0, j = 0
        while i < upper.count - 1 || j < lower.count - 1 {
            let tri: (Int, Int, Int)
            if j == lower.count - 1 || (i < upper.count - 1 && f[i + 1] <= g[j + 1]) {
                tri = (upper[i], upper[i + 1], lower[j]); i += 1
            } else {
                tri = (upper[i], lower[j + 1], lower[j]); j += 1
            }
            if tri.0 != tri.1 && tri.1 != tri.2 && tri.0 != tri.2 { out.append(tri) }
        }
        return out
    }
}

/// A quantity sampled along the face's lateral axis `u` (a lid's height, its displacement),
/// interpolated linearly between samples and held beyond the ends.
struct ProfileAlongU: Sendable {
    private let us: [Float]
    private let values: [Point2]

    init(_ samples: [(u: Float, value: Point2)]) {
        let sorted = samples.sorted { $0.u < $1.u }
        us = sorted.map(\.u); values = sorted.map(\.value)
    }

    /// A profile of heights (`v`) along `u`.
    init(heights samples: [(u: Float, v: Float)]) {
        self.init(samples.map { ($0.u, Point2($0.v, 0)) })
    }

    /// The sampled `u` range.
    var range: ClosedRange<Float> { (us.first ?? 0)...(us.last ?? 0) }

    /// The value at `u`.
    func callAsFunction(_ u: Float) -> Point2 {
        guard let first = us.first, let last = us.last else { return .zero }
        if u <= first { return values[0] }
        if u >= last { return values[values.count - 1] }
        var k = 0
        while k < us.count - 2 && us[k + 1] < u { k += 1 }
        let span = us[k + 1] - us[k]
        let t = span > 0 ? (u - us[k]) / span : 0
        return values[k] + (values[k + 1] - values[k]) * t
    }

    /// The height at `u`, for a profile made with `init(heights:)`.
    func height(at u: Float) -> Float { self(u).x }
}

/// The photo's face as the displacement model sees it: points in the face frame, the outlines split
/// into chains, and the sizes every action is scaled by.
struct FaceLayout {
    let points: [Point2]
    let frame: FaceFrame
    /// Lateral and vertical face-frame coordinates of every mesh point.
    let us: [Float], vs: [Float]
    let oval: [Int]
    let chin: Int
    let outerLips: ChainPair, innerLips: ChainPair, leftEye: ChainPair, rightEye: ChainPair
    /// Brow chains: the upper edge, and every brow point.
    let leftBrow: (upper: [Int], all: [Int]), rightBrow: (upper: [Int], all: [Int])
    /// Forehead top to chin, pixels.
    let faceHeight: Float
    /// Mouth corner to mouth corner, pixels.
    let mouthWidth: Float
    /// Eye (upper lid) to brow (upper edge) distance per side, pixels.
    let leftEyeToBrow: Float, rightEyeToBrow: Float

    var count: Int { points.count }
    /// Outer mouth corners: image left (the person's right), image right.
    var mouthCorners: (left: Int, right: Int) { (outerLips.upper.first ?? 0, outerLips.upper.last ?? 0) }

    init(mesh all: [Point3], topology: MeshTopology) throws {
        let n = MeshTopology.pointCount
        // The attention mesh's ten iris points, after the 468, are not part of the rig.
        guard all.count == n || all.count == n + 10 else {
            throw VeilError.invalidInput("the face mesh has \(all.count) points; MediaPipe's mesh has \(n) (\(n + 10) with irises)")
        }
        let mesh = Array(all.prefix(n))
        guard mesh.allSatisfy({ $0.x.isFinite && $0.y.isFinite && $0.z.isFinite }) else {
            throw VeilError.invalidInput("the face mesh has non-finite coordinates")
        }
        let points = mesh.map { Point2($0.x, $0.y) }
        self.points = points
        let regions = topology.regionIndices
        func region(_ r: FaceRegion) throws -> [Int] {
            guard let idx = regions[r], idx.count >= 3, idx.allSatisfy({ $0 < n }) else {
                throw VeilError.invalidResource("mesh topology lacks the \(r.rawValue) outline")
            }
            return idx
        }
        oval = try region(.faceContour)
        guard let top = MeshTopology.medianLine.first, let bottom = MeshTopology.medianLine.last else {
            throw VeilError.invalidResource("mesh topology lacks the median line")
        }
        chin = bottom
        let centre = oval.map { points[$0] }.reduce(.zero, +) / Float(oval.count)
        let frame = FaceFrame(centre: centre, chin: points[bottom], foreheadTop: points[top])
        self.frame = frame
        let height = points[top] - points[bottom]
        faceHeight = (height * height).sum().squareRoot()
        guard faceHeight >= 8 else {
            throw VeilError.invalidInput("the face mesh is \(faceHeight) px tall; a face needs at least 8 px")
        }
        let us = points.map { frame.u($0) }, vs = points.map { frame.v($0) }
        self.us = us; self.vs = vs

        func pair(_ r: FaceRegion) throws -> ChainPair {
            guard let p = ChainPair(loop: try region(r), points: points, frame: frame) else {
                throw VeilError.invalidResource("mesh topology's \(r.rawValue) outline is not a closed loop")
            }
            return p
        }
        outerLips = try pair(.outerLips); innerLips = try pair(.innerLips)
        leftEye = try pair(.leftEye); rightEye = try pair(.rightEye)
        let mouth = points[outerLips.upper.last ?? 0] - points[outerLips.upper.first ?? 0]
        mouthWidth = max((mouth * mouth).sum().squareRoot(), 1)

        func brow(_ name: String) throws -> (upper: [Int], all: [Int]) {
            guard let parts = topology.contours[name], !parts.isEmpty,
                  parts.allSatisfy({ !$0.isEmpty && $0.allSatisfy { $0 < n } })
            else { throw VeilError.invalidResource("mesh topology lacks the \(name) outline") }
            func meanV(_ c: [Int]) -> Float { c.map { vs[$0] }.reduce(0, +) / Float(c.count) }
            let upper = parts.max { meanV($0) < meanV($1) } ?? []
            return (upper, parts.flatMap { $0 })
        }
        leftBrow = try brow("left_eyebrow"); rightBrow = try brow("right_eyebrow")
        func mean(_ idx: [Int]) -> Point2 { idx.map { points[$0] }.reduce(.zero, +) / Float(max(idx.count, 1)) }
        func eyeToBrow(_ eye: ChainPair, _ brow: [Int]) -> Float {
            let d = mean(brow) - mean(eye.upper)
            return max((d * d).sum().squareRoot(), 1)
        }
        leftEyeToBrow = eyeToBrow(leftEye, leftBrow.upper)
        rightEyeToBrow = eyeToBrow(rightEye, rightBrow.upper)
    }
}

/// Everything the synthesiser derives once from the photo's mesh: the extra points and triangles
/// that close the mesh's holes and tie it to the background, and one displacement field per facial
/// action at full strength (see FaceRig+Actions.swift).
struct FaceRig: Sendable {
    let frame: FaceFrame
    /// Forehead top to chin, pixels.
    let faceHeight: Float
    /// Mouth corner to mouth corner, pixels.
    let mouthWidth: Float
    /// Depth of the head-turn axis: the mesh's mean depth.
    let pivotDepth: Float
    /// Depths beyond this (the sides of the face) turn as one piece, so the foreshortened strip
    /// along the outline, which may hold background, is not stretched over the cheek.
    let sideDepth: Float
    /// Mesh points then skirt points, in the photo.
    let basePoints: [Point2]
    /// Warp triangles, farthest first: skirt ring, then mesh and eyelid strips by depth.
    let warpTriangles: [(Int, Int, Int)]
    /// Triangles filling the inner-lip loop (drawn as the mouth's inside).
    let mouthTriangles: [(Int, Int, Int)]
    let innerLips: ChainPair
    /// The eyes (the person's left, then the right): lid chains and the triangles filling the
    /// opening between them, which the warp draws and the gaze turns.
    let eyes: [(lids: ChainPair, opening: [(Int, Int, Int)])]
    /// Displacement of each mesh point per unit of the action (jaw: per unit of `jawDrop`).
    let jaw: [Point2], blinkLeft: [Point2], blinkRight: [Point2], smile: [Point2], browRaise: [Point2]
    let frown: [Point2], pucker: [Point2]

    static let meshCount = MeshTopology.pointCount

    init(mesh: [Point3], topology: MeshTopology, imageWidth: Int, imageHeight: Int) throws {
        let face = try FaceLayout(mesh: mesh, topology: topology)
        let n = face.count
        frame = face.frame
        faceHeight = face.faceHeight
        mouthWidth = face.mouthWidth
        innerLips = face.innerLips
        eyes = [face.leftEye, face.rightEye].map { ($0, $0.stripTriangles(points: face.points)) }
        pivotDepth = mesh.map(\.z).reduce(0, +) / Float(n)
        let outerEyeCorners = [face.leftEye, face.rightEye].compactMap { eye -> Int? in
            guard let a = eye.upper.first, let b = eye.upper.last else { return nil }
            return abs(face.us[a]) > abs(face.us[b]) ? a : b
        }
        sideDepth = outerEyeCorners.map { mesh[$0].z }.reduce(0, +) / Float(max(outerEyeCorners.count, 1)) + 0.1 * faceHeight

        // Skirt: the oval pushed out from the face centre (further below, where the neck takes up
        // the jaw's travel), kept in the frame unless that would bring it too close to the face.
        // Beyond the skirt nothing moves, and uncovered pixels keep the photo's, so no triangles
        // to the frame's corners are needed.
        var base = face.points
        let centre = frame.centre
        let limits = Point2(Float(imageWidth), Float(imageHeight))
        var skirt: [Int] = []
        for i in face.oval {
            let d = face.points[i] - centre
            let length = (d * d).sum().squareRoot()
            let down = length > 0 ? max(0, -((d / length) * frame.up).sum()) : 0
            var k: Float = 1.35 + 0.25 * down
            for axis in 0..<2 {
                let c = centre[axis], dd = d[axis]
                if dd > 0, c + dd * k > limits[axis] { k = min(k, (limits[axis] - c) / dd) }
                if dd < 0, c + dd * k < 0 { k = min(k, -c / dd) }
            }
            skirt.append(base.count)
            base.append(centre + d * max(k, 1.12))
        }
        basePoints = base

        var triangles: [(tri: (Int, Int, Int), depth: Float)] = []
        for k in face.oval.indices {
            let k1 = (k + 1) % face.oval.count
            triangles.append(((face.oval[k], face.oval[k1], skirt[k1]), .infinity))
            triangles.append(((face.oval[k], skirt[k1], skirt[k]), .infinity))
        }
        for t in topology.triangles + eyes.flatMap(\.opening) where t.0 < n && t.1 < n && t.2 < n {
            triangles.append((t, (mesh[t.0].z + mesh[t.1].z + mesh[t.2].z) / 3))
        }
        // Far first, so that near parts (the nose when the head turns) cover what they fold over.
        warpTriangles = triangles.enumerated().sorted {
            $0.element.depth != $1.element.depth ? $0.element.depth > $1.element.depth : $0.offset < $1.offset
        }.map(\.element.tri)
        mouthTriangles = face.innerLips.stripTriangles(points: face.points)

        jaw = Self.jawField(face)
        blinkLeft = Self.blinkField(face, eye: face.leftEye, eyeToBrow: face.leftEyeToBrow)
        blinkRight = Self.blinkField(face, eye: face.rightEye, eyeToBrow: face.rightEyeToBrow)
        smile = Self.smileField(face)
        browRaise = Self.browField(face)
        frown = Self.frownField(face)
        pucker = Self.puckerField(face)
    }

    /// Mesh points (x, y, depth) for `state` (clamped to each action's range): expression
    /// displacements, then the head turn about the face's vertical axis through the oval's centre,
    /// then the nod about its horizontal axis.
    func mesh(at state: ScriptState, photoMesh: [Point3]) -> [Point3] {
        let n = Self.meshCount
        let state = state.clamped
        let jd = Float(state.jawDrop), bl = Float(state.blinkLeft), br = Float(state.blinkRight)
        let sm = Float(state.smile), rb = Float(state.browRaise)
        let fr = Float(state.frown), pk = Float(state.pucker)
        let theta = Float(state.headYaw) * .pi / 180
        let c = cos(theta), s = sin(theta)
        let phi = Float(state.headPitch) * .pi / 180
        let cp = cos(phi), sp = sin(phi)
        var out = [Point3](repeating: .zero, count: n)
        for i in 0..<n {
            var p = basePoints[i]
            p += jaw[i] * jd + blinkLeft[i] * bl + blinkRight[i] * br + smile[i] * sm + browRaise[i] * rb
            p += frown[i] * fr + pucker[i] * pk
            var z = photoMesh[i].z
            if theta != 0 {
                // Positive yaw (Veil's sign) brings near points (smaller z) towards image right.
                let u = frame.u(p), v = frame.v(p), dz = min(z, sideDepth) - pivotDepth
                p = frame.point(u: u * c - dz * s, v: v)
                z = pivotDepth + (z - pivotDepth) * c + u * s
            }
            if phi != 0 {
                // Positive pitch (chin up) brings near points upwards in the image.
                let u = frame.u(p), v = frame.v(p), dz = min(z, sideDepth) - pivotDepth
                p = frame.point(u: u, v: v * cp - dz * sp)
                z = pivotDepth + (z - pivotDepth) * cp + v * sp
            }
            out[i] = Point3(p.x, p.y, z)
        }
        return out
    }
}
