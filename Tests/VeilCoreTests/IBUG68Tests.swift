import Foundation
import XCTest
@testable import VeilCore
@testable import VeilVision

/// The landmark error every tracker is measured with (tests and `veil bench`).
final class IBUG68Tests: XCTestCase {
    /// A 68-point shape with the outer eye corners (36, 45) 100 px apart.
    private let truth: [Point2] = (0..<68).map { k in
        switch k {
        case 36: return Point2(100, 200)
        case 45: return Point2(200, 200)
        default: return Point2(Float(k), Float(2 * k))
        }
    }

    func testErrorIsTheMeanInnerDistanceOverTheEyeCornerDistance() throws {
        XCTAssertEqual(try XCTUnwrap(IBUG68.normalizedError(points68: truth, truth: truth)), 0)
        // Every point 5 px off: 5 / 100.
        let shifted = truth.map { $0 + Point2(3, 4) }
        XCTAssertEqual(try XCTUnwrap(IBUG68.normalizedError(points68: shifted, truth: truth)), 0.05, accuracy: 1e-6)
        // The jaw line (0…16) does not count.
        var jawOff = truth
        for k in 0..<17 { jawOff[k] += Point2(50, 50) }
        XCTAssertEqual(try XCTUnwrap(IBUG68.normalizedError(points68: jawOff, truth: truth)), 0)
    }

    func testMeshPointsStandForTheInnerPoints() throws {
        // A mesh whose mapped points (brows: the mean of two) land exactly on the annotation.
        var mesh = [Point3](repeating: Point3(-1000, -1000, 0), count: 468)
        for (k, indices) in IBUG68.innerMeshIndices.enumerated() {
            for i in indices { mesh[i] = Point3(truth[17 + k].x, truth[17 + k].y, 7) }
        }
        XCTAssertEqual(IBUG68.innerMeshIndices.count, IBUG68.innerRange.count)
        XCTAssertEqual(try XCTUnwrap(IBUG68.normalizedError(mesh: mesh, truth: truth)), 0, accuracy: 1e-6)
        XCTAssertNil(IBUG68.normalizedError(mesh: Array(mesh.prefix(100)), truth: truth), "too few mesh points")
        XCTAssertNil(IBUG68.normalizedError(points68: Array(truth.prefix(67)), truth: truth), "not 68 points")
    }

    func testReadsMenpoPtsFilesAsZeroBasedPoints() throws {
        let body = (0..<68).map { "\($0 + 1).5 \($0 + 2)" }.joined(separator: "\n")
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("ibug68-\(UUID().uuidString).pts")
        defer { try? FileManager.default.removeItem(at: url) }
        try Data("version: 1\nn_points: 68\n{\n\(body)\n}\n".utf8).write(to: url)
        let points = try IBUG68.annotation(contentsOf: url)
        XCTAssertEqual(points.count, 68)
        XCTAssertEqual(points[0], Point2(0.5, 1))
        XCTAssertEqual(points[67], Point2(67.5, 68))

        try Data("version: 1\nn_points: 2\n{\n1 2\n3 4\n}\n".utf8).write(to: url)
        XCTAssertThrowsError(try IBUG68.annotation(contentsOf: url)) { error in
            XCTAssertTrue("\(error)".contains("2 points, not 68"), "\(error)")
        }
    }
}
