import Foundation
import VeilCore

/// Scale-, position- and roll-free measurements of a face, taken from `FaceLandmarks` regions only
/// (so any landmark source that fills the regions can drive Veil). Lengths are in units of the
/// distance between the eye centres; y points down, x from the person's right eye to their left.
public struct FaceMeasurements: Sendable, Equatable {
    /// Eye opening: eye outline area over squared eye width (person's left / right).
    public var eyeOpenLeft: Float, eyeOpenRight: Float
    /// Height of the lower lid below the eye centre line.
    public var lowerLidLeft: Float, lowerLidRight: Float
    /// Mean gap between the inner lips.
    public var lipGap: Float
    /// Mouth width (outer corners) and the mouth's horizontal offset from the midline.
    public var mouthWidth: Float, mouthOffset: Float
    /// Height of each mouth corner relative to the middle of the upper lip (positive: raised).
    public var cornerLiftLeft: Float, cornerLiftRight: Float
    /// Horizontal distance of each corner from the mouth centre.
    public var cornerSpreadLeft: Float, cornerSpreadRight: Float
    /// Distance from the nose tip to the chin.
    public var chinDrop: Float
    /// Height of the inner and outer brow above the eye centre line.
    public var browInnerLeft: Float, browInnerRight: Float, browOuterLeft: Float, browOuterRight: Float
    /// Pupil position relative to the middle of the eye corners, over half the eye width; both
    /// eyes weighted by `pupilResolution` of their width (nil without pupils).
    public var pupilX: Float?, pupilY: Float?
    /// The wider eye's width (corner to corner) in the landmarks' own units, image pixels for a
    /// tracker: the one measurement that is not scale-free, since it says how finely the pupils
    /// can be located at all.
    public var eyeWidthPixels: Float

    /// Eye widths (pixels) over which a pupil's position goes from meaningless to trusted: in an
    /// eye 8 pixels wide a full gaze moves the pupil by about 2.5 pixels, about the iris model's
    /// error there.
    public static let pupilResolutionPixels: ClosedRange<Float> = 8...14

    /// How far a pupil in an eye `width` pixels wide can be trusted, 0…1.
    public static func pupilResolution(_ width: Float) -> Float {
        let r = pupilResolutionPixels
        return min(max((width - r.lowerBound) / (r.upperBound - r.lowerBound), 0), 1)
    }

    /// All values as one vector (pupils last, 0 when absent), for calibration and filtering.
    var vector: [Float] {
        [eyeOpenLeft, eyeOpenRight, lowerLidLeft, lowerLidRight, lipGap, mouthWidth, mouthOffset,
         cornerLiftLeft, cornerLiftRight, cornerSpreadLeft, cornerSpreadRight, chinDrop,
         browInnerLeft, browInnerRight, browOuterLeft, browOuterRight, pupilX ?? 0, pupilY ?? 0]
    }
}

/// The face's own frame: origin between the eye centres, x towards the person's left eye, unit =
/// inter-eye distance. Removes position, scale and in-plane roll.
struct FaceFrame {
    let origin: Point2
    let axisX: Point2
    let axisY: Point2
    let unit: Float

    init?(landmarks: FaceLandmarks) {
        let left = landmarks[.leftEye], right = landmarks[.rightEye]
        guard left.count >= 3, right.count >= 3 else { return nil }
        // Eye centres from the eye corners (the extreme points along the eye line), which stay put
        // when the lids move; the outlines' means would sink with every blink.
        let provisional = mean(left) - mean(right)
        func centre(_ eye: [Point2]) -> Point2 {
            let key = { (p: Point2) in p.x * provisional.x + p.y * provisional.y }
            guard let lo = eye.min(by: { key($0) < key($1) }), let hi = eye.max(by: { key($0) < key($1) }) else { return mean(eye) }
            return (lo + hi) / 2
        }
        let l = centre(left), r = centre(right)
        let d = l - r
        let length = (d.x * d.x + d.y * d.y).squareRoot()
        guard length > 1e-3, length.isFinite else { return nil }
        origin = (l + r) / 2
        axisX = d / length
        axisY = Point2(-axisX.y, axisX.x)
        unit = length
    }

    /// In-plane roll in degrees (positive: clockwise on screen).
    var rollDegrees: Float { atan2f(axisX.y, axisX.x) * 180 / .pi }

    func local(_ p: Point2) -> Point2 {
        let q = p - origin
        return Point2((q.x * axisX.x + q.y * axisX.y) / unit, (q.x * axisY.x + q.y * axisY.y) / unit)
    }
    func local(_ points: [Point2]) -> [Point2] { points.map(local) }
}

func mean(_ points: [Point2]) -> Point2 {
    guard !points.isEmpty else { return .zero }
    return points.reduce(.zero, +) / Float(points.count)
}

/// Area of a closed polygon (absolute value, shoelace formula).
func polygonArea(_ points: [Point2]) -> Float {
    guard points.count >= 3 else { return 0 }
    var sum: Float = 0
    for i in points.indices {
        let a = points[i], b = points[(i + 1) % points.count]
        sum += a.x * b.y - b.x * a.y
    }
    return abs(sum) / 2
}

extension FaceMeasurements {
    /// Measures `landmarks`; nil when the regions needed (eyes, lips, brows) are missing.
    public init?(_ landmarks: FaceLandmarks) {
        guard let frame = FaceFrame(landmarks: landmarks) else { return nil }
        let leftEye = frame.local(landmarks[.leftEye]), rightEye = frame.local(landmarks[.rightEye])
        let outer = frame.local(landmarks[.outerLips]), inner = frame.local(landmarks[.innerLips])
        let leftBrow = frame.local(landmarks[.leftEyebrow]), rightBrow = frame.local(landmarks[.rightEyebrow])
        guard outer.count >= 4, inner.count >= 4, leftBrow.count >= 2, rightBrow.count >= 2 else { return nil }

        func eyeOpen(_ eye: [Point2]) -> Float {
            let xs = eye.map(\.x)
            let width = (xs.max() ?? 0) - (xs.min() ?? 0)
            return width > 1e-4 ? polygonArea(eye) / (width * width) : 0
        }
        func lowerLid(_ eye: [Point2]) -> Float {
            let c = mean(eye)
            let below = eye.filter { $0.y > c.y }
            return below.isEmpty ? 0 : below.map { $0.y - c.y }.reduce(0, +) / Float(below.count)
        }
        eyeOpenLeft = eyeOpen(leftEye); eyeOpenRight = eyeOpen(rightEye)
        lowerLidLeft = lowerLid(leftEye); lowerLidRight = lowerLid(rightEye)

        // Corners: the outer-lip points furthest along x. The person's left is +x.
        let leftCorner = outer.max { $0.x < $1.x } ?? .zero
        let rightCorner = outer.min { $0.x < $1.x } ?? .zero
        let width = leftCorner.x - rightCorner.x
        let centre = (leftCorner + rightCorner) / 2
        mouthWidth = width
        let innerXs = inner.map(\.x)
        let innerWidth = max((innerXs.max() ?? 0) - (innerXs.min() ?? 0), 1e-3)
        lipGap = polygonArea(inner) / innerWidth
        // Corner height is taken against the middle of the upper lip, which barely moves when the
        // jaw opens (the lower lip would make every open mouth a smile) and sits close enough to
        // the corners that nodding hardly changes the difference.
        let middle = outer.filter { abs($0.x - centre.x) < width * 0.2 }
        let middleY = middle.isEmpty ? centre.y : middle.map(\.y).reduce(0, +) / Float(middle.count)
        let upper = middle.filter { $0.y < middleY }
        let upperLip = upper.isEmpty ? middleY : upper.map(\.y).reduce(0, +) / Float(upper.count)
        cornerLiftLeft = upperLip - leftCorner.y
        cornerLiftRight = upperLip - rightCorner.y
        cornerSpreadLeft = leftCorner.x - centre.x
        cornerSpreadRight = centre.x - rightCorner.x

        let median = frame.local(landmarks[.medianLine])
        let noseTip = frame.local(landmarks[.noseCrest]).last ?? Point2(0, 0.6)
        // Sideways mouth shift: against the midline from forehead to chin at the mouth's height
        // (both ends sit at about the mouth's depth, so a head turn moves them alike; the nose
        // tip, further forward, would swing more).
        if let top = median.first, let bottom = median.last, bottom.y - top.y > 1e-3 {
            let t = (centre.y - top.y) / (bottom.y - top.y)
            mouthOffset = centre.x - (top.x + (bottom.x - top.x) * t)
        } else {
            mouthOffset = centre.x - noseTip.x
        }
        chinDrop = (median.last?.y ?? (centre.y + 0.5)) - noseTip.y

        func brow(_ points: [Point2]) -> (inner: Float, outer: Float) {
            // Sort by distance from the midline; inner = nearest 40 %, outer = furthest 40 %.
            let sorted = points.sorted { abs($0.x) < abs($1.x) }
            let k = max(sorted.count * 2 / 5, 1)
            let innerY = sorted.prefix(k).map(\.y).reduce(0, +) / Float(k)
            let outerY = sorted.suffix(k).map(\.y).reduce(0, +) / Float(k)
            return (-innerY, -outerY)
        }
        let lb = brow(leftBrow), rb = brow(rightBrow)
        browInnerLeft = lb.inner; browOuterLeft = lb.outer
        browInnerRight = rb.inner; browOuterRight = rb.outer

        // Each eye's pupil against the middle of its corners, which stay put when the lids move
        // (the outline's mean would rise and fall with every blink and move the gaze with it),
        // over half the eye's width; weighted by how well the eye is resolved, so that the far
        // eye of a turned head, a few pixels wide, does not add its noise to the near one's.
        let eyes = [(landmarks[.leftPupil].first, leftEye), (landmarks[.rightPupil].first, rightEye)]
            .compactMap { pupil, eye -> (offset: Point2, width: Float)? in
                guard let inner = eye.min(by: { $0.x < $1.x }), let outer = eye.max(by: { $0.x < $1.x }) else { return nil }
                let half = (outer.x - inner.x) / 2
                guard let pupil, half > 1e-4 else { return nil }
                return ((frame.local(pupil) - (inner + outer) / 2) / half, 2 * half * frame.unit)
            }
        let widths = [leftEye, rightEye].map { eye -> Float in
            let xs = eye.map(\.x)
            return ((xs.max() ?? 0) - (xs.min() ?? 0)) * frame.unit
        }
        eyeWidthPixels = widths.max() ?? 0
        if eyes.isEmpty { pupilX = nil; pupilY = nil } else {
            let weights = eyes.map { Self.pupilResolution($0.width) }
            let total = weights.reduce(0, +)
            let w = total > 1e-6 ? weights.map { $0 / total } : eyes.map { _ in 1 / Float(eyes.count) }
            let m = zip(eyes, w).reduce(Point2.zero) { $0 + $1.0.offset * $1.1 }
            pupilX = m.x; pupilY = m.y
        }
    }
}
