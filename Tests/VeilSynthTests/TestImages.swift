import Foundation
import VeilCore
import XCTest

/// Test fixtures: binary PPM reading and writing, and the astronaut photo with its tracked mesh.
enum TestImages {
    /// Reads a binary (P6, maxval 255) PPM.
    static func readPPM(_ url: URL) throws -> RGBImage {
        let data = try Data(contentsOf: url)
        var index = data.startIndex
        func token() -> String {
            var out = ""
            while index < data.endIndex {
                let c = data[index]
                if c == UInt8(ascii: "#") {
                    while index < data.endIndex && data[index] != UInt8(ascii: "\n") { index += 1 }
                } else if c == 0x20 || c == 0x0a || c == 0x0d || c == 0x09 {
                    if !out.isEmpty { break }
                    index += 1
                } else {
                    out.append(Character(UnicodeScalar(c))); index += 1
                }
            }
            return out
        }
        guard token() == "P6", let w = Int(token()), let h = Int(token()), token() == "255" else {
            throw VeilError.invalidInput("\(url.path) is not a binary 8-bit PPM")
        }
        index += 1  // the single whitespace after maxval
        let bytes = [UInt8](data[index...].prefix(w * h * 3))
        guard let image = RGBImage(width: w, height: h, pixels: bytes) else {
            throw VeilError.invalidInput("\(url.path) is truncated")
        }
        return image
    }

    /// Writes `image` as a binary PPM.
    static func writePPM(_ image: RGBImage, to url: URL) throws {
        var data = Data("P6\n\(image.width) \(image.height)\n255\n".utf8)
        data.append(contentsOf: image.pixels)
        try data.write(to: url)
    }

    /// Runs ImageMagick's `convert` with `arguments`; false when it is missing or fails.
    @discardableResult
    static func convert(_ arguments: [String]) -> Bool {
        let candidates = ["/usr/bin/convert", "/usr/local/bin/convert"]
        guard let tool = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else { return false }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: tool)
        process.arguments = arguments
        do { try process.run() } catch { return false }
        process.waitUntilExit()
        return process.terminationStatus == 0
    }

    /// Writes `image` as /tmp/veil-synth-`name`.png (through a PPM) when VEIL_SYNTH_SAMPLES is set.
    static func saveSample(_ image: RGBImage, _ name: String) {
        guard ProcessInfo.processInfo.environment["VEIL_SYNTH_SAMPLES"] != nil else { return }
        let ppm = URL(fileURLWithPath: "/tmp/veil-synth-\(name).ppm")
        do { try writePPM(image, to: ppm) } catch { return }
        if convert([ppm.path, "/tmp/veil-synth-\(name).png"]) { try? FileManager.default.removeItem(at: ppm) }
    }

    /// The astronaut photo and the 468-point mesh tracked on it, or a skip when the mesh file (or
    /// ImageMagick, to decode the PNG) is not there.
    static func astronaut() throws -> (photo: RGBImage, mesh: [Point3], topology: MeshTopology) {
        guard let cache = VeilResources.cacheDirectory else { throw XCTSkip("no .cache/veil (run scripts/bootstrap)") }
        let meshURL = cache.appendingPathComponent("test-mesh/astronaut_mesh.json")
        let pngURL = cache.appendingPathComponent("photos/astronaut.png")
        guard FileManager.default.fileExists(atPath: meshURL.path) else { throw XCTSkip("\(meshURL.path) not written yet") }
        guard FileManager.default.fileExists(atPath: pngURL.path) else { throw XCTSkip("\(pngURL.path) missing") }
        let ppmURL = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("veil-synth-astronaut-\(getpid()).ppm")
        defer { try? FileManager.default.removeItem(at: ppmURL) }
        guard convert([pngURL.path, "-depth", "8", "ppm:" + ppmURL.path]) else { throw XCTSkip("ImageMagick convert is not available") }
        let photo = try readPPM(ppmURL)
        let mesh = try readMesh(meshURL, width: photo.width, height: photo.height)
        return (photo, mesh, try VeilResources.meshTopology())
    }

    /// Reads 468 `[x, y, z]` points: a bare array or an object holding one; normalised
    /// coordinates (all x, y within 0…1.5) are scaled to the image.
    static func readMesh(_ url: URL, width: Int, height: Int) throws -> [Point3] {
        let json = try JSONSerialization.jsonObject(with: Data(contentsOf: url))
        func points(_ any: Any) -> [[Double]]? {
            if let rows = any as? [[Double]] { return rows }
            if let dict = any as? [String: Any] {
                for key in ["mesh", "points", "landmarks", "mesh_points"] { if let v = dict[key], let rows = points(v) { return rows } }
            }
            return nil
        }
        guard let rows = points(json), rows.count >= MeshTopology.pointCount, rows.allSatisfy({ $0.count >= 3 }) else {
            throw VeilError.invalidInput("\(url.path) does not hold 468 [x, y, z] points")
        }
        var mesh = rows.prefix(MeshTopology.pointCount).map { Point3(Float($0[0]), Float($0[1]), Float($0[2])) }
        if mesh.allSatisfy({ abs($0.x) <= 1.5 && abs($0.y) <= 1.5 }) {
            mesh = mesh.map { Point3($0.x * Float(width), $0.y * Float(height), $0.z * Float(width)) }
        }
        return mesh
    }

    /// A deterministic textured test image: smooth gradients plus a hash-noise texture.
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
