import Foundation
import VeilCore
import VeilVision
import VeilMedia
import VeilTracking
import XCTest

/// Test fixtures: the astronaut photo with its tracked mesh, textures and image comparisons.
enum TestImages {
    /// Writes `image` as /tmp/veil-synth-`name`.png when VEIL_SYNTH_SAMPLES is set.
    static func saveSample(_ image: RGBImage, _ name: String) {
        guard ProcessInfo.processInfo.environment["VEIL_SYNTH_SAMPLES"] != nil else { return }
        try? ImageIO.savePNG(image, to: URL(fileURLWithPath: "/tmp/veil-synth-\(name).png"))
    }

    private static let astronautCache = Result { () throws -> (RGBImage, [Point3], MeshTopology) in
        let photo = try ImageIO.load(VeilResources.file("photos", "astronaut.png"))
        // The synthesiser's own figures are pinned to one mesh: the 468-point model's (the
        // default attention mesh's ten iris points would follow them, and its lids differ).
        guard let mesh = try MediaPipeFaceTracker(options: .meshAndIris).landmarks(inStill: photo)?.mesh else {
            throw VeilError.invalidInput("no face found on astronaut.png")
        }
        return (photo, mesh, try VeilResources.meshTopology())
    }

    /// The astronaut photo and the 468-point mesh Veil's two-model pipeline finds on it.
    static func astronaut() throws -> (photo: RGBImage, mesh: [Point3], topology: MeshTopology) {
        try astronautCache.get()
    }

    static func textured(width: Int, height: Int) -> RGBImage {
        var image = RGBImage(width: width, height: height)
        for y in 0..<height {
            for x in 0..<width {
                var hash = UInt32(truncatingIfNeeded: x &* 73856093 ^ y &* 19349663)
                hash = (hash ^ (hash >> 13)) &* 1274126177
                let noise = Int(hash >> 27)  // 0…31
                let i = (y * width + x) * 3
                image.pixels[i] = UInt8((x * 200 / max(width, 1) + noise) % 256)
                image.pixels[i + 1] = UInt8((y * 200 / max(height, 1) + noise) % 256)
                image.pixels[i + 2] = UInt8(((x + y) * 3 + noise * 2) % 256)
            }
        }
        return image
    }

    /// Mean absolute difference per channel over the pixels of `rect` (clipped to the image).
    static func meanAbsDiff(_ a: RGBImage, _ b: RGBImage, in rect: Rect? = nil) -> Double {
        let r = rect ?? Rect(x: 0, y: 0, width: Float(a.width), height: Float(a.height))
        let x0 = max(0, Int(r.x)), y0 = max(0, Int(r.y))
        let x1 = min(a.width, Int((r.x + r.width).rounded(.up))), y1 = min(a.height, Int((r.y + r.height).rounded(.up)))
        guard x0 < x1, y0 < y1 else { return 0 }
        var sum = 0, n = 0
        for y in y0..<y1 {
            for x in x0..<x1 {
                let i = (y * a.width + x) * 3
                for c in 0..<3 { sum += abs(Int(a.pixels[i + c]) - Int(b.pixels[i + c])); n += 1 }
            }
        }
        return Double(sum) / Double(n)
    }

    /// Mean of R+G+B over `rect`.
    static func meanBrightness(_ a: RGBImage, in r: Rect) -> Double {
        let x0 = max(0, Int(r.x)), y0 = max(0, Int(r.y))
        let x1 = min(a.width, Int((r.x + r.width).rounded(.up))), y1 = min(a.height, Int((r.y + r.height).rounded(.up)))
        guard x0 < x1, y0 < y1 else { return 0 }
        var sum = 0, n = 0
        for y in y0..<y1 { for x in x0..<x1 { let i = (y * a.width + x) * 3; sum += Int(a.pixels[i]) + Int(a.pixels[i + 1]) + Int(a.pixels[i + 2]); n += 1 } }
        return Double(sum) / Double(n)
    }
}
