import Foundation
import VeilConsole
import VeilCore
import VeilVision

/// The result of tracking one frame.
public struct TrackingResult: Sendable {
    /// Whether the locked-on face was found in this frame.
    public enum State: Sendable, Equatable { case tracked, lost }

    public var state: State
    /// How sure the tracker is that it sees a face, 0…1 (the landmark model's face presence).
    public var confidence: Float
    /// The face's landmarks when tracked.
    public var landmarks: FaceLandmarks?
    /// Whether this frame ran the face detector (it runs only when tracking needs a new start).
    public var ranDetection: Bool
    /// How many times this frame ran a detection model: on the whole frame (short and full
    /// range) and on tiles of the small-face search.
    public var detectorRuns = 0
    /// Where the time went, in milliseconds.
    public var detectionMilliseconds: Double = 0
    public var landmarkMilliseconds: Double = 0
    public var irisMilliseconds: Double = 0
    /// Of the landmark and iris times: cutting the models' crops out of the frame, and the
    /// attention mesh's custom operations.
    public var cropMilliseconds: Double = 0
    public var customOperationMilliseconds: Double = 0
    public var totalMilliseconds: Double { detectionMilliseconds + landmarkMilliseconds + irisMilliseconds }
}

/// Something that finds one face in successive frames and reports its landmarks. The Linux
/// implementation is `MediaPipeFaceTracker`; an Apple Vision / ARKit one can conform later.
public protocol FaceTracking: AnyObject {
    /// Tracks the face in the next frame of a sequence.
    func track(_ image: RGBImage) throws -> TrackingResult
    /// Forgets the current face: the next frame starts with detection and may lock onto another.
    func reset()
}

/// MediaPipe's face models on LiteRT, on the calling thread: BlazeFace detection → rotated region →
/// 468-point face mesh → iris landmarks for the pupils (or the attention mesh's 478 points, irises
/// included). Detection runs only when there is no face to follow: each frame's region comes from
/// the previous frame's mesh. With several faces in view it locks onto the largest at the start and
/// stays on it; after a loss it re-acquires only a face where the lost one was, until the lock expires.
///
/// Not thread-safe: use one tracker per video stream, from one thread at a time.
public final class MediaPipeFaceTracker: FaceTracking {
    /// Tuning knobs; the defaults suit a webcam at 30 fps.
    public struct Options: Sendable {
        /// Face presence below this counts as lost.
        public var presenceThreshold: Float = 0.5
        /// Find the pupils (for gaze): with the attention mesh, from its own iris points; without
        /// it, with the iris model on each eye.
        public var iris = true
        /// Run MediaPipe's attention mesh (478 points: lips, eyelids and irises refined inside one
        /// model, the default); false runs the 468-point mesh and then the iris model on each eye
        /// (docs/attention-mesh.md).
        public var attentionMesh = true
        /// When the short-range detector finds nothing, try the full-range one (small, distant faces).
        public var fullRangeFallback = true
        /// Frames after a loss during which only the lost face's neighbourhood may be re-acquired.
        public var lockFrames = 45
        /// Tiles of the small-face search (full-range detection on overlapping tiles, after both
        /// detectors found nothing on the whole frame) that one video frame may run. The whole
        /// search is ~90 tiles at 640×480, ~2 ms each: spread over ~20 frames it finds a distant
        /// face within about a second instead of stalling every frame without a face for 0.2–0.5 s.
        /// Stills (`landmarks(inStill:)`) search every tile at once.
        public var tilesPerFrame = 4
        public init() {}

        /// The 468-point mesh and the iris model on each eye: the pipeline the attention mesh
        /// replaced as the default. The tests, the bench and the re-identification experiment
        /// animate faces around its mesh, so that either pipeline is shown the same videos.
        public static var meshAndIris: Options {
            var options = Options()
            options.attentionMesh = false
            return options
        }
    }

    public let options: Options
    public let topology: MeshTopology
    private let runtime: LiteRtRuntime
    private let shortRange: FaceDetector
    private lazy var fullRange: FaceDetector? = try? FaceDetector(runtime: runtime, range: .full)
    private let meshModel: LandmarkModel
    private let irisModel: IrisModel?

    private var region: RotatedRect?
    private var lastBox: Rect?
    private var framesSinceSeen = Int.max
    /// Where the small-face search goes on in the next frame without a face.
    private var tileCursor = 0
    /// The small-face search's tiles for one frame size, larger tiles first, and where each tile
    /// size ends in that list (made once per frame size).
    private var tileSearch: (width: Int, height: Int, tiles: [RotatedRect], sizeEnds: [Int])?
    private var searchEveryTile = false
    private var detectorRuns = 0
    private var mesh = [Point3](repeating: .zero, count: MeshTopology.pointCount)

    /// Loads the models installed by scripts/bootstrap.
    public init(options: Options = Options()) throws {
        self.options = options
        topology = try VeilResources.meshTopology()
        runtime = try LiteRtRuntime()
        shortRange = try FaceDetector(runtime: runtime, range: .short)
        meshModel = options.attentionMesh ? try AttentionMeshModel(runtime: runtime) : try FaceMeshModel(runtime: runtime)
        irisModel = options.iris && !options.attentionMesh ? try IrisModel(runtime: runtime) : nil
    }

    public func reset() {
        region = nil; lastBox = nil; framesSinceSeen = .max; tileCursor = 0
    }

    public func track(_ image: RGBImage) throws -> TrackingResult {
        var result = TrackingResult(state: .lost, confidence: 0, landmarks: nil, ranDetection: false)
        guard image.width >= 16, image.height >= 16 else { return result }
        var presence: Float = 0
        var trackedRegion = false
        if let region {
            let t0 = monotonicMilliseconds()
            presence = try runMesh(image, region: region, timing: &result)
            result.landmarkMilliseconds += monotonicMilliseconds() - t0
            trackedRegion = true
        }
        if presence < options.presenceThreshold {
            region = nil
            trackedRegion = false
            let t0 = monotonicMilliseconds()
            detectorRuns = 0
            let candidate = try acquire(in: image)
            result.detectionMilliseconds = monotonicMilliseconds() - t0
            result.detectorRuns = detectorRuns
            result.ranDetection = true
            if let candidate {
                let t1 = monotonicMilliseconds()
                presence = try runMesh(image, region: candidate.landmarkRegion, timing: &result)
                result.landmarkMilliseconds += monotonicMilliseconds() - t1
            }
        }
        result.confidence = presence
        guard presence >= options.presenceThreshold else {
            framesSinceSeen = framesSinceSeen == .max ? .max : framesSinceSeen + 1
            return result
        }
        region = Self.stabilized(Self.region(following: mesh), previous: trackedRegion ? region : nil,
                                 tolerance: meshModel.regionTolerance)
        var left: Point2?, right: Point2?
        if options.iris, options.attentionMesh {
            // 468 is the iris centre on the image's left (the person's right eye), 473 the other.
            right = Point2(mesh[468].x, mesh[468].y)
            left = Point2(mesh[473].x, mesh[473].y)
        } else if let irisModel {
            let t0 = monotonicMilliseconds()
            (right, left) = try refineEyes(image, with: irisModel, timing: &result)
            result.irisMilliseconds = monotonicMilliseconds() - t0
        }
        let landmarks = topology.landmarks(mesh: mesh, leftPupil: left, rightPupil: right, confidence: presence)
        lastBox = landmarks.boundingBox
        framesSinceSeen = 0
        result.state = .tracked
        result.landmarks = landmarks
        return result
    }

    /// Runs the mesh model on `region` into `mesh`; returns the face presence.
    private func runMesh(_ image: RGBImage, region: RotatedRect, timing result: inout TrackingResult) throws -> Float {
        let presence = try meshModel.run(image, region: region, into: &mesh)
        result.cropMilliseconds += meshModel.lastCropMilliseconds
        result.customOperationMilliseconds += meshModel.lastCustomOperationMilliseconds
        return presence
    }

    /// Runs the iris model on both eyes: pupil centres, and the eyelid contours, which replace the
    /// mesh's own (the iris model sees the eye at a higher resolution, as MediaPipe's refined mesh
    /// does). Returns (right, left) pupil centres.
    private func refineEyes(_ image: RGBImage, with irisModel: IrisModel, timing result: inout TrackingResult) throws -> (Point2, Point2) {
        func p(_ i: Int) -> Point2 { Point2(mesh[i].x, mesh[i].y) }
        let rightRegion = IrisModel.region(corner: p(33), corner: p(133))
        let leftRegion = IrisModel.region(corner: p(362), corner: p(263))
        let right = try irisModel.irisCenter(image, region: rightRegion, mirrored: false)
        result.cropMilliseconds += irisModel.lastCropMilliseconds
        let rightLids = irisModel.lastContour(region: rightRegion, mirrored: false)
        let left = try irisModel.irisCenter(image, region: leftRegion, mirrored: true)
        result.cropMilliseconds += irisModel.lastCropMilliseconds
        let leftLids = irisModel.lastContour(region: leftRegion, mirrored: true)
        for (contour, indices) in [(rightLids, IrisModel.rightEyeMeshIndices), (leftLids, IrisModel.leftEyeMeshIndices)] {
            for k in 0..<IrisModel.lidPointCount {
                mesh[indices[k]].x = contour[k].x
                mesh[indices[k]].y = contour[k].y
            }
        }
        return (right, left)
    }

    /// Landmarks of the most prominent face in a still image: detection, then the mesh run again in
    /// the region its own first pass gives (as on the second frame of a video).
    public func landmarks(inStill image: RGBImage) throws -> FaceLandmarks? {
        reset()
        searchEveryTile = true
        defer { searchEveryTile = false }
        _ = try track(image)
        let second = try track(image)
        reset()
        return second.landmarks
    }

    /// The face to start tracking: near the locked face while the lock holds, else the largest.
    private func acquire(in image: RGBImage) throws -> FaceDetection? {
        var found = try shortRange.detect(in: image)
        detectorRuns += 1
        if found.isEmpty, options.fullRangeFallback, let fullRange {
            found = try fullRange.detect(in: image)
            detectorRuns += 1
            if found.isEmpty { found = try searchTiles(image, with: fullRange) }
        }
        if !found.isEmpty { tileCursor = 0 }
        if let lastBox, framesSinceSeen < options.lockFrames {
            let reach = max(lastBox.width, lastBox.height)
            return found
                .filter { simd_distance($0.box.center, lastBox.center) < reach }
                .min { simd_distance($0.box.center, lastBox.center) < simd_distance($1.box.center, lastBox.center) }
        }
        return found.max { $0.box.area < $1.box.area }
    }

    /// Keeps the previous region while the new one differs from it by less than the tolerance of
    /// its size (and half a degree): the mesh model's output depends on its crop, so a region that
    /// follows its own small wobbles makes a still face jitter (`RegionStabilityTests`).
    /// The tolerance is also how far the crop of the same face may sit depending on what came
    /// before, and the attention mesh's refined lips move with the crop: on takeo's smile its mouth
    /// corners ranged over 0.067 inter-eye distances as the crop moved within ±1.2 % (the
    /// 468-point mesh's over 0.022), so that a smile held after talking read half as strong as the
    /// same smile while talking, and `PrivacyTests` lost it. With 0.4–0.9 % it is kept, and a
    /// still face behind camera noise moves as little as with 1.2 % (`LandmarkModel.regionTolerance`).

    static func stabilized(_ new: RotatedRect, previous: RotatedRect?, tolerance: Float) -> RotatedRect {
        guard let previous else { return new }
        let moved = simd_distance(new.center, previous.center) / previous.size
        let resized = abs(new.size - previous.size) / previous.size
        let turned = abs(new.rotation - previous.rotation)
        return moved < tolerance && resized < tolerance && turned < 0.5 * .pi / 180 ? previous : new
    }

    /// Faces of ~40 px in a 640×480 frame are too small even for the full-range model on the whole
    /// frame: look in overlapping square tiles, larger tiles first, going on where the previous
    /// frame stopped (`options.tilesPerFrame` per frame; all of them for a still).
    private func searchTiles(_ image: RGBImage, with detector: FaceDetector) throws -> [FaceDetection] {
        if tileSearch?.width != image.width || tileSearch?.height != image.height {
            var tiles: [RotatedRect] = [], sizeEnds: [Int] = []
            var side = Float(min(image.width, image.height))
            while side >= 96 {
                tiles += Self.tiles(width: image.width, height: image.height, side: side)
                sizeEnds.append(tiles.count)
                side /= 2
            }
            tileSearch = (image.width, image.height, tiles, sizeEnds)
        }
        guard let all = tileSearch?.tiles, let sizeEnds = tileSearch?.sizeEnds, !all.isEmpty else { return [] }
        var budget = searchEveryTile ? all.count : max(1, options.tilesPerFrame)
        if tileCursor >= all.count { tileCursor = 0 }
        var found: [FaceDetection] = []
        // Within one tile size the detections are merged; a size with a face ends the search.
        for sizeEnd in sizeEnds {
            while tileCursor < sizeEnd, budget > 0 {
                found += try detector.detect(in: image, region: all[tileCursor])
                detectorRuns += 1
                tileCursor += 1
                budget -= 1
            }
            if !found.isEmpty || budget == 0 { break }
        }
        if tileCursor >= all.count { tileCursor = 0 }
        return FaceDetector.weightedNonMaximumSuppression(found, threshold: 0.3)
    }

    /// Square tiles of `side` covering the frame with half-tile overlap.
    static func tiles(width: Int, height: Int, side: Float) -> [RotatedRect] {
        func centers(_ extent: Float) -> [Float] {
            guard extent > side else { return [extent / 2] }
            let count = Int(((extent - side) / (side / 2)).rounded(.up)) + 1
            return (0..<count).map { side / 2 + (extent - side) * Float($0) / Float(count - 1) }
        }
        return centers(Float(height)).flatMap { y in
            centers(Float(width)).map { x in RotatedRect(center: Point2(x, y), size: side, rotation: 0) }
        }
    }

    /// Next frame's region from this frame's mesh, as MediaPipe's face graph makes it: the mesh's
    /// axis-aligned extent, 1.5× its longer side, rotated by the line through the outer eye corners.
    static func region(following mesh: [Point3]) -> RotatedRect {
        let eyes = Point2(mesh[263].x - mesh[33].x, mesh[263].y - mesh[33].y)
        var lo = Point2(repeating: .greatestFiniteMagnitude), hi = Point2(repeating: -.greatestFiniteMagnitude)
        for p in mesh {
            lo = pointwiseMin(lo, Point2(p.x, p.y)); hi = pointwiseMax(hi, Point2(p.x, p.y))
        }
        return RotatedRect(center: (lo + hi) / 2, size: max(hi.x - lo.x, hi.y - lo.y) * 1.5, rotation: atan2f(eyes.y, eyes.x))
    }

}

@inline(__always)
func simd_distance(_ a: Point2, _ b: Point2) -> Float {
    let d = a - b
    return (d.x * d.x + d.y * d.y).squareRoot()
}
