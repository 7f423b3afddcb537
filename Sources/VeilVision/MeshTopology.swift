import Foundation
import VeilCore

/// The structure of MediaPipe's 468-point face mesh: its triangles and region outlines, read from
/// the JSON that scripts/bootstrap extracts from the mediapipe wheel, plus the mapping from the mesh
/// to `FaceLandmarks` regions. This is the one place that knows mesh indices.
public struct MeshTopology: Sendable {
    /// Number of points in the mesh.
    public static let pointCount = 468

    /// Mesh triangles as index triples.
    public let triangles: [(Int, Int, Int)]
    /// Ordered outlines per region, as named by MediaPipe (`lips`, `left_eye`, `face_oval`, ...).
    public let contours: [String: [[Int]]]
    /// Mesh indices of each region (pupils excepted: they come from the iris model). Worked out
    /// once from the contours, since `landmarks(mesh:…)` runs on every tracked frame.
    public let regionIndices: [FaceRegion: [Int]]

    /// Mesh indices along the face's vertical midline, forehead to chin. Not part of MediaPipe's
    /// connection lists, so named here.
    public static let medianLine = [10, 151, 9, 8, 168, 6, 197, 195, 5, 4, 1, 19, 94, 2, 164, 0, 11, 12, 13,
                                    14, 15, 16, 17, 18, 200, 199, 175, 152]
    /// Mesh indices along the bridge of the nose, top to tip.
    public static let noseCrest = [168, 6, 197, 195, 5, 4, 1]

    /// Mesh points whose means define the head's axes for pose estimation: eye corners on either
    /// side, forehead and nose bridge on top, lower lip and chin below.
    public enum PoseAnchors {
        public static let rightSide = [33, 133]
        public static let leftSide = [263, 362]
        public static let top = [10, 151]
        public static let bottom = [152, 175]
    }

    /// Loads the topology JSON written by scripts/bootstrap.
    public init(contentsOf url: URL) throws {
        let data: Data
        do { data = try Data(contentsOf: url) } catch {
            throw VeilError.missingResource("\(url.path) (run scripts/bootstrap)")
        }
        struct File: Decodable { var contours: [String: [[Int]]]; var triangles: [[Int]] }
        let file: File
        do { file = try JSONDecoder().decode(File.self, from: data) } catch {
            throw VeilError.invalidResource("\(url.path): \(error)")
        }
        let all = file.triangles.flatMap { $0 } + file.contours.values.flatMap { $0.flatMap { $0 } }
        guard file.triangles.allSatisfy({ $0.count == 3 }),
              all.allSatisfy({ (0..<Self.pointCount).contains($0) || (468..<478).contains($0) }),
              let lips = file.contours["lips"], lips.count == 2,
              ["left_eye", "right_eye", "left_eyebrow", "right_eyebrow", "face_oval"].allSatisfy({ file.contours[$0] != nil })
        else { throw VeilError.invalidResource("\(url.path): not a face mesh topology") }
        triangles = file.triangles.map { ($0[0], $0[1], $0[2]) }
        contours = file.contours
        regionIndices = Self.regions(from: file.contours)
    }

    private static func regions(from contours: [String: [[Int]]]) -> [FaceRegion: [Int]] {
        func loop(_ name: String) -> [Int] { contours[name]?.first ?? [] }
        func brow(_ name: String) -> [Int] {
            // Upper edge outer→inner, then lower edge inner→outer: one closed outline.
            let parts = contours[name] ?? []
            guard parts.count == 2 else { return parts.flatMap { $0 } }
            let upper = parts.max { a, b in a.first ?? 0 < b.first ?? 0 } ?? []
            let lower = parts.min { a, b in a.first ?? 0 < b.first ?? 0 } ?? []
            return upper + lower.reversed()
        }
        // Both lip loops have 20 points; the outer one contains the mouth corner 61, the inner one 78.
        let loops = contours["lips"] ?? [[], []]
        let lips = loops[0].contains(61) ? (outer: loops[0], inner: loops[1]) : (outer: loops[1], inner: loops[0])
        return [
            .faceContour: loop("face_oval"),
            .leftEye: loop("left_eye"), .rightEye: loop("right_eye"),
            .leftEyebrow: brow("left_eyebrow"), .rightEyebrow: brow("right_eyebrow"),
            .nose: Array(Set(contours["nose"]?.flatMap { $0 } ?? [])).sorted(),
            .noseCrest: Self.noseCrest, .medianLine: Self.medianLine,
            .outerLips: lips.outer, .innerLips: lips.inner,
        ]
    }

    /// Builds `FaceLandmarks` from a 468-point mesh (image pixels) and optional pupil centres.
    public func landmarks(mesh: [Point3], leftPupil: Point2?, rightPupil: Point2?, confidence: Float) -> FaceLandmarks {
        var regions: [FaceRegion: [Point2]] = [:]
        for (region, indices) in regionIndices {
            regions[region] = indices.compactMap { $0 < mesh.count ? Point2(mesh[$0].x, mesh[$0].y) : nil }
        }
        if let p = leftPupil { regions[.leftPupil] = [p] }
        if let p = rightPupil { regions[.rightPupil] = [p] }
        let box = Rect(bounding: regions[.faceContour] ?? mesh.map { Point2($0.x, $0.y) })
        return FaceLandmarks(boundingBox: box, regions: regions, mesh: mesh, confidence: confidence)
    }
}

extension VeilResources {
    /// The mesh topology installed by scripts/bootstrap.
    public static func meshTopology() throws -> MeshTopology {
        try MeshTopology(contentsOf: file("models", "face_mesh_topology.json"))
    }
}
