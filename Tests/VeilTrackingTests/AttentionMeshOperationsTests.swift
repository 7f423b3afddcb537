import XCTest
@testable import VeilTracking

/// The attention mesh's custom operations on cases worked out by hand (the derivations are in the
/// comments), independent of the model.
final class AttentionMeshOperationsTests: XCTestCase {
    typealias Ops = AttentionMeshOperations

    /// Points 0–3: the corners of the box x 10…30, y 10…40; 4 and 5: the rotation landmarks (10, 25)
    /// and (30, 25), level. Turned by `quarterTurns` × 90° about the origin: (x, y) → (−y, x) each.
    static func landmarks(quarterTurns: Int) -> [Float] {
        var points: [(Float, Float)] = [(10, 10), (30, 10), (10, 40), (30, 40), (10, 25), (30, 25)]
        for _ in 0..<quarterTurns { points = points.map { (-$0.1, $0.0) } }
        return points.flatMap { [$0.0, $0.1, 7] }  // z is not used
    }

    static let options = Ops.TransformMatrixOptions(leftRotationIndex: 4, rightRotationIndex: 5, subset: [0, 1, 2, 3])

    static func assertMatrix(_ matrix: [Float]?, rows: [[Float]], file: StaticString = #filePath, line: UInt = #line) {
        guard let matrix else { return XCTFail("no matrix", file: file, line: line) }
        let lastRows: [Float] = [0, 0, 1, 0, 0, 0, 0, 1]
        let expected: [Float] = rows.flatMap { $0 } + lastRows
        for (index, (got, want)) in zip(matrix, expected).enumerated() {
            XCTAssertEqual(got, want, accuracy: 1e-4, "element \(index)", file: file, line: line)
        }
    }

    func testALevelBoxGivesScaleAndTranslationOnly() {
        // w = 20, h = 30, centre (20, 25); scale 1.5·20/16 = 1.875 and 1.5·30/16 = 2.8125;
        // x′ = 1.875·(x − 8) + 20 = 1.875x + 5, y′ = 2.8125·(y − 8) + 25 = 2.8125y + 2.5.
        let points = Self.landmarks(quarterTurns: 0)
        let matrix = points.withUnsafeBufferPointer { Ops.landmarksToTransformMatrix($0, options: Self.options) }
        Self.assertMatrix(matrix, rows: [[1.875, 0, 0, 5], [0, 2.8125, 0, 2.5]])
    }

    func testATurnedFaceIsTurnedLevelAndTheBoxFollowsIt() {
        // The same points turned 90°: left → right now points down (+y), rotation −90°. Turned level the box is
        // the same; its centre (20, 25) turned back is (−25, 20). The linear part R(90°)·S is
        // [[0, −2.8125], [1.875, 0]]; translation: −25 + 2.8125·8 = −2.5 and 20 − 1.875·8 = 5.
        let points = Self.landmarks(quarterTurns: 1)
        let matrix = points.withUnsafeBufferPointer { Ops.landmarksToTransformMatrix($0, options: Self.options) }
        Self.assertMatrix(matrix, rows: [[0, -2.8125, 0, -2.5], [1.875, 0, 0, 5]])
        // The grid's centre (8, 8) lands on the box's centre.
        if let m = matrix {
            XCTAssertEqual(m[0] * 8 + m[1] * 8 + m[3], -25, accuracy: 1e-4)
            XCTAssertEqual(m[4] * 8 + m[5] * 8 + m[7], 20, accuracy: 1e-4)
        }
    }

    func testAnIndexOutsideTheLandmarksGivesNoMatrix() {
        var options = Self.options
        options.subset = [0, 6]
        let points = Self.landmarks(quarterTurns: 0)
        XCTAssertNil(points.withUnsafeBufferPointer { Ops.landmarksToTransformMatrix($0, options: options) })
        options.subset = []
        XCTAssertNil(points.withUnsafeBufferPointer { Ops.landmarksToTransformMatrix($0, options: options) })
    }

    /// A 4×4 map with two channels: v = 10y + x, and 100 + that.
    static let ramp: [Float] = {
        var values: [Float] = []
        for y in 0..<4 {
            for x in 0..<4 {
                let v = Float(10 * y + x)
                values += [v, 100 + v]
            }
        }
        return values
    }()

    static func sample(_ matrix: [Float]) -> [Float] {
        var output = [Float](repeating: -1, count: 4 * 4 * 2)
        ramp.withUnsafeBufferPointer { input in
            output.withUnsafeMutableBufferPointer { out in
                Ops.transformTensorBilinear(input, height: 4, width: 4, channels: 2, matrix: matrix, into: out, outputHeight: 4, outputWidth: 4)
            }
        }
        return output
    }

    static func matrix(a: Float, b: Float = 0, tx: Float = 0, d: Float = 0, e: Float, ty: Float = 0) -> [Float] {
        [a, b, 0, tx, d, e, 0, ty, 0, 0, 1, 0, 0, 0, 0, 1]
    }

    func testTheIdentityCopiesTheMapExactly() {
        XCTAssertEqual(Self.sample(Self.matrix(a: 1, e: 1)), Self.ramp)
    }

    func testHalfScaleSamplesBetweenPixelCentres() {
        // Output (x, y) reads 0.5·(x + ½) − ½ = 0.5x − 0.25: (0, 0) falls outside (−0.25) and is zero in
        // both channels; (1, 1) reads (0.25, 0.25): 10·0.25 + 0.25 = 2.75, and 102.75.
        let output = Self.sample(Self.matrix(a: 0.5, e: 0.5))
        XCTAssertEqual(output[0], 0); XCTAssertEqual(output[1], 0)
        let pixel = (1 * 4 + 1) * 2
        XCTAssertEqual(output[pixel], 2.75, accuracy: 1e-5)
        XCTAssertEqual(output[pixel + 1], 102.75, accuracy: 1e-5)
    }

    func testASampleBeyondTheLastPixelIsZero() {
        // Shifted half a pixel right: (2, 0) reads 2.5 (between 2 and 3); (3, 0) reads 3.5, beyond 3: zero.
        let output = Self.sample(Self.matrix(a: 1, tx: 0.5, e: 1))
        XCTAssertEqual(output[2 * 2], 2.5, accuracy: 1e-5)
        XCTAssertEqual(output[3 * 2], 0); XCTAssertEqual(output[3 * 2 + 1], 0)
        // The last row and column themselves are inside: the identity reads (3, 3) = 33.
        XCTAssertEqual(Self.sample(Self.matrix(a: 1, e: 1))[(3 * 4 + 3) * 2], 33)
    }

    func testLandmarksGoThroughTheAffinePartAndKeepTheirDepth() {
        // x′ = 0·1 − 2·2 + 5 = 1, y′ = 3·1 + 0·2 + 1 = 4; z (9) is copied; the matrix's z column is not used.
        var matrix = Self.matrix(a: 0, b: -2, tx: 5, d: 3, e: 0, ty: 1)
        matrix[2] = 50; matrix[6] = 50
        let points: [Float] = [1, 2, 9, 0, 0, -3]
        var output = [Float](repeating: 0, count: 6)
        points.withUnsafeBufferPointer { input in
            output.withUnsafeMutableBufferPointer { Ops.transformLandmarks(input, dimensions: 3, matrix: matrix, into: $0) }
        }
        XCTAssertEqual(output, [1, 4, 9, 5, 1, -3])
    }
}
