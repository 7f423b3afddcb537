import VeilCore
/// A point in image pixels (x right, y down).
public typealias Point2 = SIMD2<Float>
/// A mesh point: image pixels for x and y, and depth on the same scale (smaller is nearer the camera).
public typealias Point3 = SIMD3<Float>

/// An axis-aligned rectangle in image pixels.
public struct Rect: Equatable, Codable, Sendable {
    public var x: Float, y: Float, width: Float, height: Float
    public init(x: Float, y: Float, width: Float, height: Float) {
        self.x = x; self.y = y; self.width = width; self.height = height
    }
    public var center: Point2 { Point2(x + width / 2, y + height / 2) }
    public var area: Float { max(width, 0) * max(height, 0) }
    /// The smallest rectangle holding `points` (zero-sized at the origin when empty).
    public init(bounding points: [Point2]) {
        guard let first = points.first else { self.init(x: 0, y: 0, width: 0, height: 0); return }
        var lo = first, hi = first
        for p in points { lo = pointwiseMin(lo, p); hi = pointwiseMax(hi, p) }
        self.init(x: lo.x, y: lo.y, width: hi.x - lo.x, height: hi.y - lo.y)
    }
    /// Intersection area over union area, 0…1.
    public func iou(_ other: Rect) -> Float {
        let w = min(x + width, other.x + other.width) - max(x, other.x)
        let h = min(y + height, other.y + other.height) - max(y, other.y)
        let inter = max(w, 0) * max(h, 0)
        let union = area + other.area - inter
        return union > 0 ? inter / union : 0
    }
}

/// The named regions of a face, with Apple Vision's `VNFaceLandmarks2D` names so that a Vision
/// source can fill them directly. Left and right are the person's own (as in ARKit): `leftEye` is
/// the eye on the viewer's right in an unmirrored image.
public enum FaceRegion: String, CaseIterable, Codable, Sendable {
    case faceContour, leftEye, rightEye, leftEyebrow, rightEyebrow, nose, noseCrest, medianLine
    case outerLips, innerLips, leftPupil, rightPupil
}

/// One tracked face: named landmark regions in image pixels, its bounding rectangle and, from
/// sources that have one, the dense 3-D mesh the regions were taken from.
///
/// Landmarks describe a face's shape and so identify a person: they stay on the device. What
/// leaves it is an `Expression` estimated from them.
public struct FaceLandmarks: Sendable {
    /// Rectangle around the face in image pixels.
    public var boundingBox: Rect
    /// Points per region, in image pixels; contours are ordered along the outline.
    public var regions: [FaceRegion: [Point2]]
    /// The source's dense mesh, when it has one (MediaPipe: 468 points).
    public var mesh: [Point3]?
    /// How sure the source is that this is a face, 0…1.
    public var confidence: Float

    public init(boundingBox: Rect, regions: [FaceRegion: [Point2]], mesh: [Point3]? = nil, confidence: Float) {
        self.boundingBox = boundingBox; self.regions = regions; self.mesh = mesh; self.confidence = confidence
    }

    /// The points of `region`, empty when the source did not provide it.
    public subscript(region: FaceRegion) -> [Point2] { regions[region] ?? [] }

    /// Every landmark point, for drawing overlays.
    public var allPoints: [Point2] { FaceRegion.allCases.flatMap { self[$0] } }
}
