import Foundation
import VeilCore
import VeilMedia
import VeilTracking
import VeilVision

/// One person of the experiment: a face in a photo, and whether it was looked at while the privacy
/// filter was tuned.
struct Person {
    enum Role: String { case tuned, heldout }
    var label: String
    var role: Role
    var photo: URL
    /// The face's box in the photo (pixels); nil: the largest face the tracker finds.
    var box: Rect?
}

enum People {
    /// The people privacy/photos.lock lists (photos extracted by privacy/setup under `photos`), then
    /// the five photos of Veil's own fixtures, tuned.
    static func pinned(lock: URL, photos: URL) throws -> [Person] {
        var people: [Person] = []
        let text = try String(contentsOf: lock, encoding: .utf8)
        for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let fields = line.split(separator: " ").map(String.init)
            guard fields.first == "face" else { continue }
            guard fields.count == 10, let role = Person.Role(rawValue: fields[2]),
                  let x = Float(fields[6]), let y = Float(fields[7]), let w = Float(fields[8]), let h = Float(fields[9]) else {
                throw VeilError.invalidInput("\(lock.path):\(number + 1): not a face line")
            }
            let url = photos.appendingPathComponent(fields[3]).appendingPathComponent((fields[4] as NSString).lastPathComponent)
            guard FileManager.default.fileExists(atPath: url.path) else {
                throw VeilError.missingResource("\(url.path): run privacy/setup (make privacy does)")
            }
            people.append(Person(label: fields[1], role: role, photo: url, box: Rect(x: x, y: y, width: w, height: h)))
        }
        for name in ["astronaut.png", "takeo.ppm", "breakingbad.jpg", "einstein.jpg", "lenna.png"] {
            people.append(Person(label: (name as NSString).deletingPathExtension, role: .tuned,
                                 photo: try VeilResources.file("photos", name), box: nil))
        }
        return people
    }

    /// Every image in `directory`, one person each (its largest face), all "held out": someone's
    /// own photos, never tuned on.
    static func folder(_ directory: URL) throws -> [Person] {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory.path, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw VeilError.invalidInput("\(directory.path) is not a folder of photos")
        }
        let files = try FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)
            .filter { ["jpg", "jpeg", "png", "ppm", "pgm", "bmp", "webp"].contains($0.pathExtension.lowercased()) }
            .sorted { $0.lastPathComponent < $1.lastPathComponent }
        guard files.count >= 2 else {
            throw VeilError.invalidInput("\(directory.path) holds \(files.count) photo(s); the experiment needs at least two people")
        }
        return files.map { Person(label: $0.deletingPathExtension().lastPathComponent, role: .heldout, photo: $0, box: nil) }
    }
}

/// The camera's view of a person: their face `width` pixels wide, centred in a 640×480 frame.
enum Framing {
    static let size = (width: 640, height: 480)

    /// The face's box in `image`: `box` when given, else the tracker's on the largest face.
    static func faceBox(in image: RGBImage, box: Rect?, tracker: MediaPipeFaceTracker) throws -> Rect? {
        if let box { return box }
        let (fitted, scale, offset) = image.letterboxed(width: size.width, height: size.height)
        guard let found = try tracker.landmarks(inStill: fitted)?.boundingBox else { return nil }
        return Rect(x: (found.x - offset.x) / scale, y: (found.y - offset.y) / scale,
                    width: found.width / scale, height: found.height / scale)
    }

    /// `image` scaled about the box's centre so that the box is `width` pixels wide, centred
    /// (bilinear). Only the face and its surroundings (2.2 box widths across) are kept; their edge
    /// repeats beyond, so that nobody else in a group photo is in the picture.
    static func frame(_ image: RGBImage, box: Rect, width: Float) -> RGBImage {
        var out = RGBImage(width: size.width, height: size.height)
        let scale = box.width / width
        let cx = box.x + box.width / 2, cy = box.y + box.height / 2
        let reach = box.width * 1.1
        let left = max(Int(cx - reach), 0), top = max(Int(cy - reach), 0)
        let right = min(Int(cx + reach), image.width - 1), bottom = min(Int(cy + reach * 1.2), image.height - 1)
        let w = image.width
        image.pixels.withUnsafeBufferPointer { source in
            out.pixels.withUnsafeMutableBufferPointer { target in
                for y in 0..<size.height {
                    let sy = min(max((Float(y) - Float(size.height) / 2 + 0.5) * scale + cy - 0.5, Float(top)), Float(bottom))
                    let y0 = Int(sy), y1 = min(y0 + 1, bottom), fy = sy - Float(y0)
                    for x in 0..<size.width {
                        let sx = min(max((Float(x) - Float(size.width) / 2 + 0.5) * scale + cx - 0.5, Float(left)), Float(right))
                        let x0 = Int(sx), x1 = min(x0 + 1, right), fx = sx - Float(x0)
                        for c in 0..<3 {
                            let a = Float(source[(y0 * w + x0) * 3 + c]), b = Float(source[(y0 * w + x1) * 3 + c])
                            let d = Float(source[(y1 * w + x0) * 3 + c]), e = Float(source[(y1 * w + x1) * 3 + c])
                            let top = a + (b - a) * fx, bottom = d + (e - d) * fx
                            target[(y * size.width + x) * 3 + c] = UInt8(min(max(top + (bottom - top) * fy + 0.5, 0), 255))
                        }
                    }
                }
            }
        }
        return out
    }
}
