import Foundation
import VeilCore
import VeilVision

/// A face found by BlazeFace: box and six keypoints in image pixels, and a score.
struct FaceDetection {
    var box: Rect
    /// Person's right eye, left eye, nose tip, mouth centre, right ear tragion, left ear tragion.
    var keypoints: [Point2]
    var score: Float

    /// The landmark model's region for this face: rotated by the eye line, 1.5× the box, square.
    var landmarkRegion: RotatedRect {
        let eyes = keypoints[1] - keypoints[0]
        return RotatedRect(center: box.center, size: max(box.width, box.height) * 1.5, rotation: atan2f(eyes.y, eyes.x))
    }
}

/// MediaPipe's BlazeFace detectors on LiteRT: the short-range model (faces within ~2 m, 128×128
/// input) and the full-range sparse model (small and distant faces, 192×192 input). SSD anchors,
/// box decoding and weighted non-maximum suppression as in MediaPipe's calculators.
final class FaceDetector {
    enum Range { case short, full }

    private let model: InferenceModel
    private let side: Int
    private let anchors: [Point2]
    private let minScore: Float
    private var regressors: UnsafeBufferPointer<Float>
    private var scores: UnsafeBufferPointer<Float>

    init(runtime: LiteRtRuntime, range: Range) throws {
        switch range {
        case .short:
            model = try InferenceModel(runtime: runtime, url: try VeilResources.file("models", "face_detection_short_range.tflite"))
            side = 128
            anchors = Self.anchors(side: 128, strides: [8, 16, 16, 16], perLayer: 2)
            minScore = 0.5
        case .full:
            model = try InferenceModel(runtime: runtime, url: try VeilResources.file("models", "face_detection_full_range_sparse.tflite"))
            side = 192
            anchors = Self.anchors(side: 192, strides: [4], perLayer: 1)
            minScore = 0.6
        }
        regressors = try model.output(count: anchors.count * 16)
        scores = try model.output(count: anchors.count)
    }

    /// SSD anchor centres (normalised) with MediaPipe's settings for BlazeFace: fixed anchor size,
    /// consecutive layers with the same stride share one grid.
    private static func anchors(side: Int, strides: [Int], perLayer: Int) -> [Point2] {
        var result: [Point2] = []
        var layer = 0
        while layer < strides.count {
            var last = layer
            while last + 1 < strides.count && strides[last + 1] == strides[layer] { last += 1 }
            let perCell = (last - layer + 1) * perLayer
            let grid = Int((Double(side) / Double(strides[layer])).rounded(.up))
            for y in 0..<grid {
                for x in 0..<grid {
                    let c = Point2((Float(x) + 0.5) / Float(grid), (Float(y) + 0.5) / Float(grid))
                    result.append(contentsOf: repeatElement(c, count: perCell))
                }
            }
            layer = last + 1
        }
        return result
    }

    /// Faces in `image` (letterboxed into the square model input), strongest first.
    func detect(in image: RGBImage) throws -> [FaceDetection] {
        let extent = Float(max(image.width, image.height))
        let region = RotatedRect(center: Point2(Float(image.width) / 2, Float(image.height) / 2), size: extent, rotation: 0)
        return try detect(in: image, region: region)
    }

    /// Faces inside `region` (unrotated square) of `image`.
    func detect(in image: RGBImage, region: RotatedRect) throws -> [FaceDetection] {
        sample(image, region: region, into: model.input(), side: side, range: -1...1)
        try model.run()
        let scale = Float(side)
        var candidates: [FaceDetection] = []
        for i in 0..<anchors.count {
            let logit = min(max(scores[i], -100), 100)
            let score = 1 / (1 + expf(-logit))
            guard score >= minScore else { continue }
            let r = i * 16, a = anchors[i]
            func point(_ dx: Float, _ dy: Float) -> Point2 {
                region.imagePoint(u: dx / scale + a.x, v: dy / scale + a.y)
            }
            let c = point(regressors[r], regressors[r + 1])
            let w = regressors[r + 2] / scale * region.size, h = regressors[r + 3] / scale * region.size
            guard w > 1, h > 1, w.isFinite, h.isFinite else { continue }
            let keypoints = (0..<6).map { point(regressors[r + 4 + 2 * $0], regressors[r + 5 + 2 * $0]) }
            candidates.append(FaceDetection(box: Rect(x: c.x - w / 2, y: c.y - h / 2, width: w, height: h),
                                            keypoints: keypoints, score: score))
        }
        return Self.weightedNonMaximumSuppression(candidates, threshold: 0.3)
    }

    /// Clusters overlapping detections and averages each cluster weighted by score (MediaPipe's
    /// WEIGHTED suppression), which steadies boxes compared with keeping only the best.
    static func weightedNonMaximumSuppression(_ detections: [FaceDetection], threshold: Float) -> [FaceDetection] {
        var remaining = detections.sorted { $0.score > $1.score }
        var result: [FaceDetection] = []
        while !remaining.isEmpty {
            let best = remaining.removeFirst()
            let cluster = [best] + remaining.filter { $0.box.iou(best.box) > threshold }
            remaining.removeAll { $0.box.iou(best.box) > threshold }
            let total = cluster.reduce(0) { $0 + $1.score }
            guard total > 0 else { continue }
            var box = Rect(x: 0, y: 0, width: 0, height: 0)
            var keypoints = [Point2](repeating: .zero, count: best.keypoints.count)
            for d in cluster {
                let w = d.score / total
                box.x += d.box.x * w; box.y += d.box.y * w; box.width += d.box.width * w; box.height += d.box.height * w
                for k in keypoints.indices { keypoints[k] += d.keypoints[k] * w }
            }
            result.append(FaceDetection(box: box, keypoints: keypoints, score: best.score))
        }
        return result
    }
}
