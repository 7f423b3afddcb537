import VeilCore
import VeilVision

/// One of the person's own sides (as in ARKit): the left side is drawn on the viewer's right,
/// as when the person faces you.
public enum FaceSide: Sendable, Equatable, CaseIterable {
    /// The person's left: the viewer's right.
    case left
    /// The person's right: the viewer's left.
    case right
}

/// A named group of the canonical face's control points, as projected into the view.
public enum AvatarFeature: Sendable, Equatable, CaseIterable {
    /// The head's silhouette, a closed loop (clockwise on screen, starting at the viewer's right).
    case faceOutline
    /// The eye opening of the person's left eye (viewer's right): inner corner, upper lid, outer
    /// corner, lower lid.
    case leftEye
    /// The eye opening of the person's right eye (viewer's left).
    case rightEye
    /// The left brow from its inner to its outer end.
    case leftBrow
    /// The right brow from its inner to its outer end.
    case rightBrow
    /// Nose tip, columella, alae, nostrils and the bridge lines.
    case nose
    /// The outer lip contour: the upper lip from the viewer's left corner, then the lower lip back.
    case outerLips
    /// The inner lip contour (the mouth opening), in the same order.
    case innerLips
}

/// The canonical face posed by one `Expression` and projected into a view rectangle: what a style
/// draws. Built by `AvatarRig.solve(_:in:into:)`; nothing in it comes from anyone's face shape.
public struct AvatarPose: Sendable {
    /// Pixels per rig unit (the head is about 2 units tall).
    public internal(set) var scale: Float = 1
    /// Where the head's centre is projected.
    public internal(set) var center: Point2 = .zero
    /// The head pose used, in degrees (clamped to the rig's range).
    public internal(set) var headPose: HeadPose = .frontal

    // Projected control points in `RigPoint` order, their depths (larger is nearer the viewer), and
    // the silhouettes extracted from the surface samples. Internal buffers reused frame after frame.
    var points: [Point2] = []
    var depth: [Float] = []
    var outline: [Point2] = []
    var hairOutline: [Point2] = []
    /// The skin loop, with the parts hidden behind the head pushed out beyond the silhouette.
    var skinLoop: [Point2] = []
    var work: [SIMD3<Float>] = []
    /// The rig's iris radius in rig units.
    var irisRadiusUnits: Float = 0
    /// Rows of the head rotation (rig → view, y up), for directions and normals.
    var rotation: (SIMD3<Float>, SIMD3<Float>, SIMD3<Float>) = (SIMD3(1, 0, 0), SIMD3(0, 1, 0), SIMD3(0, 0, 1))

    /// An empty pose; fill it with `AvatarRig.solve(_:in:into:)`.
    public init() {}

    /// The projected points of `feature` (a new array; renderers read the internal buffers).
    public func points(_ feature: AvatarFeature) -> [Point2] {
        switch feature {
        case .faceOutline: return outline
        case .leftEye: return RigPoint.eyeLoop(.left).map { points[$0] }
        case .rightEye: return RigPoint.eyeLoop(.right).map { points[$0] }
        case .leftBrow: return RigPoint.brow(.left).map { points[$0] }
        case .rightBrow: return RigPoint.brow(.right).map { points[$0] }
        case .nose: return RigPoint.nose.map { points[$0] }
        case .outerLips: return RigPoint.outerLipsLoop.map { points[$0] }
        case .innerLips: return RigPoint.innerLipsLoop.map { points[$0] }
        }
    }

    /// The projected centre of the iris of the eye on `side`.
    public func irisCenter(_ side: FaceSide) -> Point2 { points[RigPoint.iris(side)] }

    /// The iris radius in pixels.
    public var irisRadius: Float { irisRadiusUnits * scale }

    /// The smallest rectangle holding the projected points of `feature`.
    public func bounds(of feature: AvatarFeature) -> Rect { Rect(bounding: points(feature)) }

    /// How open the mouth is: the largest inner-lip gap in pixels.
    public var mouthOpening: Float {
        var gap: Float = 0
        for k in 0..<3 {
            gap = max(gap, simd_distance(points[RigPoint.upperInner + k], points[RigPoint.lowerInner + k]))
        }
        return gap
    }

    /// Projects a direction of the rig (x to the viewer's right, y up) to the screen (y down), not
    /// normalised.
    func screenDirection(_ v: SIMD3<Float>) -> Point2 {
        Point2((rotation.0 * v).sum(), -(rotation.1 * v).sum())
    }
}

@inline(__always) func simd_distance(_ a: Point2, _ b: Point2) -> Float {
    let d = a - b
    return (d * d).sum().squareRoot()
}
