import XCTest
import VeilVision
@testable import VeilTracking

/// The crop every model reads: checked against bilinear interpolation written out plainly in
/// double precision, on noise (where any misplaced byte shows), over rotations, mirroring, both
/// input ranges the models use, and regions that run off the frame.
final class ImageSamplerTests: XCTestCase {
    /// Bilinear sample of (x, y) in pixel-centre coordinates, outside pixels black.
    static func reference(_ image: RGBImage, _ x: Double, _ y: Double, _ ch: Int) -> Double {
        let fx = x.rounded(.down), fy = y.rounded(.down)
        let ax = x - fx, ay = y - fy
        var acc = 0.0
        for (dx, dy, wgt) in [(0, 0, (1 - ax) * (1 - ay)), (1, 0, ax * (1 - ay)), (0, 1, (1 - ax) * ay), (1, 1, ax * ay)] {
            let px = Int(fx) + dx, py = Int(fy) + dy
            if px >= 0, py >= 0, px < image.width, py < image.height {
                acc += Double(image.pixels[(py * image.width + px) * 3 + ch]) * wgt
            }
        }
        return acc
    }

    static func noise(width: Int, height: Int) -> RGBImage {
        var state: UInt32 = 2463534242
        let bytes = (0..<width * height * 3).map { _ -> UInt8 in
            state ^= state << 13; state ^= state >> 17; state ^= state << 5
            return UInt8(truncatingIfNeeded: state)
        }
        return RGBImage(width: width, height: height, pixels: bytes)!
    }

    func testCropsMatchPlainBilinearInterpolationInsideAndOffTheFrame() {
        let image = Self.noise(width: 320, height: 240)
        let side = 48
        let tensor = UnsafeMutableBufferPointer<Float>.allocate(capacity: side * side * 3)
        defer { tensor.deallocate() }
        let regions = [
            RotatedRect(center: Point2(160, 120), size: 100, rotation: 0),
            RotatedRect(center: Point2(150.3, 110.7), size: 77.7, rotation: 0.37),
            RotatedRect(center: Point2(20, 30), size: 120, rotation: -2.1),      // off the top left
            RotatedRect(center: Point2(310, 235), size: 60, rotation: 1.2),      // off the bottom right
            RotatedRect(center: Point2(160, 120), size: 9, rotation: 3.0),       // magnified
        ]
        var worst = 0.0, inside = 0, outside = 0
        for region in regions {
            for flip in [false, true] {
                for range: ClosedRange<Float> in [0...1, -1...1] {
                    sample(image, region: region, into: tensor, side: side, range: range, flipHorizontally: flip)
                    let scale = Double(range.upperBound - range.lowerBound) / 255
                    for row in 0..<side {
                        for col in 0..<side {
                            // The crop's pixel centre in region coordinates, then in the image.
                            let u = (Float(flip ? side - 1 - col : col) + 0.5) / Float(side)
                            let v = (Float(row) + 0.5) / Float(side)
                            let p = region.imagePoint(u: u, v: v)
                            let x = Double(p.x) - 0.5, y = Double(p.y) - 0.5
                            if x >= 0, y >= 0, x < Double(image.width - 1), y < Double(image.height - 1) { inside += 1 } else { outside += 1 }
                            for ch in 0..<3 {
                                let expected = Self.reference(image, x, y, ch) * scale + Double(range.lowerBound)
                                worst = max(worst, abs(Double(tensor[(row * side + col) * 3 + ch]) - expected))
                            }
                        }
                    }
                }
            }
        }
        print("ImageSamplerTests: \(inside) samples inside the frame, \(outside) at or beyond its edges; "
              + "largest difference \(worst) (one level of 0…255 is \(1.0 / 255))")
        XCTAssertGreaterThan(inside, 1000)
        XCTAssertGreaterThan(outside, 1000)
        // Half a level of 0…255: the crop steps its coordinates by adding in Float (up to about
        // 10⁻³ pixel off over a row), which on noise, whose neighbours differ by up to 255 levels,
        // is a fraction of a level; a misplaced byte or weight is tens of levels off.
        XCTAssertLessThan(worst, 0.5 / 255)
    }

    func testTheLastPixelOfTheTensorIsWrittenAndNothingBeyondIt() {
        let image = Self.noise(width: 64, height: 64)
        let side = 8
        // One float more than the crop needs, which must keep its value.
        let tensor = UnsafeMutableBufferPointer<Float>.allocate(capacity: side * side * 3 + 1)
        defer { tensor.deallocate() }
        tensor.initialize(repeating: -7)
        let crop = UnsafeMutableBufferPointer(rebasing: tensor[0..<(side * side * 3)])
        sample(image, region: RotatedRect(center: Point2(32, 32), size: 16, rotation: 0), into: crop, side: side, range: 0...1)
        XCTAssertEqual(tensor[side * side * 3], -7)
        // Level crop at scale 2 of a centred region: the last tensor pixel's centre is image (38.5, 38.5) → (39, 39) − 0.5.
        let expected = Self.reference(image, 38.5, 38.5, 2) / 255
        XCTAssertEqual(Double(tensor[side * side * 3 - 1]), expected, accuracy: 0.1 / 255)
    }

    /// The word-wise sample (SSE2 on x86-64) runs the per-channel form's operations lane by lane,
    /// so it gives the same floats to the bit: the models see exactly what they saw before.
    func testTheWordWiseSampleIsTheSameToTheBitAsThePerChannelOne() {
        let image = Self.noise(width: 97, height: 61)
        var state: UInt32 = 7
        func unit() -> Float { state ^= state << 13; state ^= state >> 17; state ^= state << 5; return Float(state % 1_000_000) / 1_000_000 }
        var differing = 0
        image.pixels.withUnsafeBufferPointer { px in
            let raw = UnsafeRawPointer(px.baseAddress!)
            var a = [Float](repeating: 0, count: 4), b = [Float](repeating: 0, count: 4)
            for _ in 0..<20_000 {
                let p = Point2(unit() * Float(image.width - 2), unit() * Float(image.height - 1))
                for (scale, offset): (Float, Float) in [(1 / 255, 0), (2 / 255, -1)] {
                    bilinear(raw, stride: image.width * 3, at: p, scale: scale, offset: offset, into: &a)
                    bilinearByChannel(raw, stride: image.width * 3, at: p, scale: scale, offset: offset, into: &b)
                    if (0..<3).contains(where: { a[$0].bitPattern != b[$0].bitPattern }) { differing += 1 }
                }
            }
        }
        XCTAssertEqual(differing, 0, "samples that differ from the per-channel form")
    }
}
