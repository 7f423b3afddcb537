import Foundation
import VeilConsole
import VeilCore
import VeilVision

/// A face-mesh model: the face's landmarks inside a rotated square region of a frame.
protocol LandmarkModel: AnyObject {
    /// Runs the model on `region` and writes the landmarks in image pixels into `mesh` (reused).
    /// Returns the face-presence probability.
    func run(_ image: RGBImage, region: RotatedRect, into mesh: inout [Point3]) throws -> Float
    /// Of the last run: how long cutting the crop out of the frame took, and custom operations (ms).
    var lastCropMilliseconds: Double { get }
    var lastCustomOperationMilliseconds: Double { get }
    /// How far (a fraction of its size) the face may move before the tracker moves the region this
    /// model reads (`MediaPipeFaceTracker.stabilized`).
    var regionTolerance: Float { get }
}

extension LandmarkModel {
    var lastCustomOperationMilliseconds: Double { 0 }
    var regionTolerance: Float { 0.012 }
}

extension InferenceModel {
    /// Cuts `region` of `image` into the input as a `side`×`side` crop in 0…1 and runs the model.
    /// Returns how long the crop took (ms).
    func run(cropping image: RGBImage, region: RotatedRect, side: Int, flipHorizontally: Bool = false) throws -> Double {
        let start = monotonicMilliseconds()
        sample(image, region: region, into: input(), side: side, range: 0...1, flipHorizontally: flipHorizontally)
        let crop = monotonicMilliseconds() - start
        try run()
        return crop
    }
}

/// MediaPipe's face_landmark model on LiteRT: 468 3-D points and a face-presence score for the
/// face inside a rotated square region.
final class FaceMeshModel: LandmarkModel {
    private let model: InferenceModel
    private let points: UnsafeBufferPointer<Float>
    private let presence: UnsafeBufferPointer<Float>
    static let side = 192
    private(set) var lastCropMilliseconds = 0.0

    init(runtime: LiteRtRuntime) throws {
        model = try InferenceModel(runtime: runtime, url: try VeilResources.file("models", "face_landmark.tflite"))
        points = try model.output(count: MeshTopology.pointCount * 3)
        presence = try model.output(count: 1)
    }

    func run(_ image: RGBImage, region: RotatedRect, into mesh: inout [Point3]) throws -> Float {
        lastCropMilliseconds = try model.run(cropping: image, region: region, side: Self.side)
        if mesh.count != MeshTopology.pointCount { mesh = [Point3](repeating: .zero, count: MeshTopology.pointCount) }
        for i in 0..<MeshTopology.pointCount {
            mesh[i] = region.imagePoint(inCrop: Point3(points[3 * i], points[3 * i + 1], points[3 * i + 2]), side: Self.side)
        }
        return 1 / (1 + expf(-presence[0]))
    }
}

/// MediaPipe's iris_landmark model: the iris centre inside a 64×64 crop around one eye. The model
/// knows right eyes; left eyes are mirrored on the way in and out.
final class IrisModel {
    private let model: InferenceModel
    private let iris: UnsafeBufferPointer<Float>
    private let contour: UnsafeBufferPointer<Float>
    static let side = 64
    /// How long the last `irisCenter` took to cut its crop out of the frame (ms).
    private(set) var lastCropMilliseconds = 0.0

    /// Mesh indices of the iris model's 71 eye-contour points, for the person's right eye (the
    /// model's native eye) and left eye (mirrored crop): lids, four halos around the eye, and brow.
    static let rightEyeMeshIndices = [
        33, 7, 163, 144, 145, 153, 154, 155, 133, 246, 161, 160, 159, 158, 157, 173,
        130, 25, 110, 24, 23, 22, 26, 112, 243, 247, 30, 29, 27, 28, 56, 190,
        226, 31, 228, 229, 230, 231, 232, 233, 244, 113, 225, 224, 223, 222, 221, 189,
        35, 124, 46, 53, 52, 65, 143, 111, 117, 118, 119, 120, 121, 128, 245,
        156, 70, 63, 105, 66, 107, 55, 193,
    ]
    /// The first points of each list are the eyelids (lower lid corner to corner, then the upper).
    static let lidPointCount = 16
    static let leftEyeMeshIndices = [
        263, 249, 390, 373, 374, 380, 381, 382, 362, 466, 388, 387, 386, 385, 384, 398,
        359, 255, 339, 254, 253, 252, 256, 341, 463, 467, 260, 259, 257, 258, 286, 414,
        446, 261, 448, 449, 450, 451, 452, 453, 464, 342, 445, 444, 443, 442, 441, 413,
        265, 353, 276, 283, 282, 295, 372, 340, 346, 347, 348, 349, 350, 357, 465,
        383, 300, 293, 334, 296, 336, 285, 417,
    ]

    init(runtime: LiteRtRuntime) throws {
        model = try InferenceModel(runtime: runtime, url: try VeilResources.file("models", "iris_landmark.tflite"))
        iris = try model.output(count: 15)
        contour = try model.output(count: 71 * 3)
    }

    /// The eye-contour points of the last `irisCenter` call, in image pixels.
    func lastContour(region: RotatedRect, mirrored: Bool) -> [Point2] {
        (0..<71).map { i in
            var u = contour[3 * i] / Float(Self.side)
            if mirrored { u = 1 - u }
            return region.imagePoint(u: u, v: contour[3 * i + 1] / Float(Self.side))
        }
    }

    /// The eye's region from its two corners: centred between them, 2.3× their distance, rotated by
    /// the line through them (as MediaPipe's iris graph crops it).
    static func region(corner a: Point2, corner b: Point2) -> RotatedRect {
        let d = b - a
        let distance = (d.x * d.x + d.y * d.y).squareRoot()
        return RotatedRect(center: (a + b) / 2, size: distance * 2.3, rotation: atan2f(d.y, d.x))
    }

    /// Iris centre in image pixels for the eye in `region`; afterwards `lastContour` holds the eye's
    /// contour points.
    func irisCenter(_ image: RGBImage, region: RotatedRect, mirrored: Bool) throws -> Point2 {
        lastCropMilliseconds = try model.run(cropping: image, region: region, side: Self.side, flipHorizontally: mirrored)
        var u = iris[0] / Float(Self.side)
        let v = iris[1] / Float(Self.side)
        if mirrored { u = 1 - u }
        return region.imagePoint(u: u, v: v)
    }
}

/// MediaPipe's attention face mesh (`face_landmark_with_attention.tflite`, what its
/// `refine_landmarks` runs): one model for the 468 points, the lips and eyelids refined in
/// high-resolution patches of its own feature map, and ten iris points, 478 in all, on the three
/// custom operations of `AttentionMeshKernels`. Assembled as MediaPipe's refinement does: the lips
/// and eye points replace x and y at the mesh indices the crop operations take them from (their
/// options name them), each iris goes to 468–472 (the person's right eye) and 473–477 with the mean
/// depth of its eye's 16 lid points.
final class AttentionMeshModel: LandmarkModel {
    static let side = 192
    /// Its refined lips move with the crop more than the 468-point mesh does (see `stabilized`).
    let regionTolerance: Float = 0.006
    static let pointCount = 478
    private(set) var lastCropMilliseconds = 0.0
    var lastCustomOperationMilliseconds: Double { kernels.lastInferenceMilliseconds }
    private let kernels: AttentionMeshKernels
    private let model: InferenceModel
    private let points: UnsafeBufferPointer<Float>
    private let presence: UnsafeBufferPointer<Float>
    /// Refined point sets and the mesh indices they replace; the person's right eye first (the
    /// model's "left": the eye on the image's left).
    private let lips: (points: UnsafeBufferPointer<Float>, indices: [Int])
    private let eyes: [(points: UnsafeBufferPointer<Float>, indices: [Int])]
    private let irises: [UnsafeBufferPointer<Float>]

    init(runtime: LiteRtRuntime) throws {
        let kernels = AttentionMeshKernels()
        let model = try InferenceModel(runtime: runtime, url: try VeilResources.file("models", "face_landmark_with_attention.tflite"),
                                       kernels: kernels)
        self.kernels = kernels
        self.model = model
        points = try model.output(named: "output_mesh_identity")
        presence = try model.output(named: "conv_faceflag")
        // The crop operations' subsets, by the landmarks they turn level: the mouth's corners (61)
        // and each eye's (33 on the image's left, 362 on its right).
        let options = kernels.kernel(.landmarksToTransformMatrix).matrixOptions.compactMap { $0 }
        func subset(_ left: Int, _ output: String, size: Int) throws -> (UnsafeBufferPointer<Float>, [Int]) {
            guard let indices = options.first(where: { $0.leftRotationIndex == left })?.subset else {
                throw TrackingError("the attention mesh has no crop around landmark \(left)")
            }
            let points = try model.output(named: output)
            guard indices.count == size, points.count == 2 * size, indices.allSatisfy({ (0..<MeshTopology.pointCount).contains($0) }) else {
                throw TrackingError("the attention mesh's \(output) has \(points.count / 2) points for \(indices.count) indices")
            }
            return (points, indices)
        }
        lips = try subset(61, "output_lips", size: 80)
        eyes = [try subset(33, "output_left_eye", size: 71), try subset(362, "output_right_eye", size: 71)]
        irises = [try model.output(named: "output_left_iris"), try model.output(named: "output_right_iris")]
        guard points.count == MeshTopology.pointCount * 3, irises.allSatisfy({ $0.count == 10 }) else {
            throw TrackingError("the attention mesh's outputs are not 468 points and two irises")
        }
    }

    /// Eye distances (image pixels, between the centres of the eyes' corners) below which the
    /// refined lips are not used, and above which they are used whole, blended in between. In a
    /// face this small the lips' 16×16 patch of the 48×48 feature map resolves no lip: on a face
    /// 17 pixels between the eyes the refined lips rise wholesale with a smile, so that the corners
    /// sink against the upper lip and every smile reads as a frown, while the mesh's own lips
    /// follow the corners.
    static let lipRefinementEyeDistances: ClosedRange<Float> = 18...24

    /// How much of the refined lips to take for a face `eyeDistance` pixels between the eyes, 0…1.
    static func lipRefinementWeight(eyeDistance: Float) -> Float {
        let r = lipRefinementEyeDistances
        return min(max((eyeDistance - r.lowerBound) / (r.upperBound - r.lowerBound), 0), 1)
    }

    /// The distance between the eyes' centres (each the middle of its two corners,
    /// `MeshTopology.PoseAnchors`) of `mesh`, in its own units.
    static func eyeDistance(_ mesh: [Point3]) -> Float {
        func centre(_ corners: [Int]) -> Point2 {
            corners.reduce(Point2.zero) { $0 + Point2(mesh[$1].x, mesh[$1].y) } / Float(corners.count)
        }
        return simd_distance(centre(MeshTopology.PoseAnchors.leftSide), centre(MeshTopology.PoseAnchors.rightSide))
    }

    /// Moves the mesh's points at `set.indices` towards the refined ones in `set.points` (x and y),
    /// by `weight` (1: replaced).
    private static func refine(_ mesh: inout [Point3], with set: (points: UnsafeBufferPointer<Float>, indices: [Int]), weight: Float) {
        guard weight > 0 else { return }
        for (k, index) in set.indices.enumerated() {
            mesh[index].x += weight * (set.points[2 * k] - mesh[index].x)
            mesh[index].y += weight * (set.points[2 * k + 1] - mesh[index].y)
        }
    }

    /// Writes the 478 points.
    func run(_ image: RGBImage, region: RotatedRect, into mesh: inout [Point3]) throws -> Float {
        lastCropMilliseconds = try model.run(cropping: image, region: region, side: Self.side)
        if mesh.count != Self.pointCount { mesh = [Point3](repeating: .zero, count: Self.pointCount) }
        // In crop pixels first: x, y, z.
        for i in 0..<MeshTopology.pointCount {
            mesh[i] = Point3(points[3 * i], points[3 * i + 1], points[3 * i + 2])
        }
        Self.refine(&mesh, with: lips, weight: Self.lipRefinementWeight(eyeDistance: Self.eyeDistance(mesh) * region.size / Float(Self.side)))
        for eye in eyes { Self.refine(&mesh, with: eye, weight: 1) }
        for (eye, iris) in irises.enumerated() {
            let lids = eyes[eye].indices.prefix(IrisModel.lidPointCount)
            let depth = lids.reduce(Float(0)) { $0 + mesh[$1].z } / Float(lids.count)
            for k in 0..<5 {
                mesh[MeshTopology.pointCount + 5 * eye + k] = Point3(iris[2 * k], iris[2 * k + 1], depth)
            }
        }
        for i in 0..<Self.pointCount { mesh[i] = region.imagePoint(inCrop: mesh[i], side: Self.side) }
        return 1 / (1 + expf(-presence[0]))
    }
}
