import Foundation
import VeilCore
import VeilVision
import VeilSynth
import XCTest

final class PiecewiseAffineWarpTests: XCTestCase {
    /// A grid of points over `[x0, x1] × [y0, y1]` with two triangles per cell.
    private func grid(x0: Float, y0: Float, x1: Float, y1: Float, columns: Int, rows: Int)
        -> (points: [Point2], triangles: [(Int, Int, Int)]) {
        var points: [Point2] = []
        for r in 0...rows {
            for c in 0...columns {
                points.append(Point2(x0 + (x1 - x0) * Float(c) / Float(columns), y0 + (y1 - y0) * Float(r) / Float(rows)))
            }
        }
        var triangles: [(Int, Int, Int)] = []
        for r in 0..<rows {
            for c in 0..<columns {
                let a = r * (columns + 1) + c, b = a + 1, d = a + columns + 1, e = d + 1
                triangles.append((a, b, e)); triangles.append((a, e, d))
            }
        }
        return (points, triangles)
    }

    func testIdenticalPointsReproduceTheImageExactly() throws {
        let image = TestImages.textured(width: 97, height: 61)
        // Irregular points, some outside the image, to exercise clipping and edge sampling.
        var (points, triangles) = grid(x0: -3, y0: -2, x1: 100, y1: 64, columns: 7, rows: 5)
        for i in points.indices { points[i] += Point2(Float(i % 3) * 1.37, Float(i % 5) * 0.71) }
        let warp = try PiecewiseAffineWarp(triangles: triangles, pointCount: points.count)
        let out = try warp.applied(to: image, sourcePoints: points, destinationPoints: points)
        XCTAssertEqual(out.width, image.width); XCTAssertEqual(out.height, image.height)
        XCTAssertEqual(out.pixels, image.pixels)
    }

    func testTranslationShiftsContentByTheOffset() throws {
        let w = 120, h = 90
        var image = TestImages.textured(width: w, height: h)
        // A white 8×6 patch at (40, 30).
        for y in 30..<36 { for x in 40..<48 { let i = (y * w + x) * 3; image.pixels[i] = 255; image.pixels[i + 1] = 255; image.pixels[i + 2] = 255 } }
        let (points, triangles) = grid(x0: 20, y0: 15, x1: 90, y1: 70, columns: 6, rows: 4)
        let offset = Point2(7, -4)
        let moved = points.map { $0 + offset }
        let warp = try PiecewiseAffineWarp(triangles: triangles, pointCount: points.count)
        let out = try warp.applied(to: image, sourcePoints: points, destinationPoints: moved)
        // Inside the moved grid every pixel is the source pixel 7 left and 4 down.
        for y in 12..<66 {
            for x in 28..<96 {
                let i = (y * w + x) * 3, j = ((y + 4) * w + (x - 7)) * 3
                XCTAssertEqual(Array(out.pixels[i..<i + 3]), Array(image.pixels[j..<j + 3]), "pixel (\(x), \(y))")
            }
        }
        // The white patch is now at (47, 26).
        XCTAssertEqual(TestImages.meanBrightness(out, in: Rect(x: 47, y: 26, width: 8, height: 6)), 765)
        XCTAssertLessThan(TestImages.meanBrightness(out, in: Rect(x: 40, y: 30, width: 4, height: 6)), 700)
        // Outside both grids the image is untouched.
        for (x, y) in [(2, 2), (110, 80), (5, 85), (115, 5)] {
            let i = (y * w + x) * 3
            XCTAssertEqual(Array(out.pixels[i..<i + 3]), Array(image.pixels[i..<i + 3]))
        }
    }

    func testHalfPixelShiftAveragesNeighbours() throws {
        let w = 40, h = 30
        var image = RGBImage(width: w, height: h)
        for y in 0..<h { for x in 0..<w { let v = UInt8(x * 6); let i = (y * w + x) * 3; image.pixels[i] = v; image.pixels[i + 1] = v; image.pixels[i + 2] = v } }
        let (points, triangles) = grid(x0: 5, y0: 5, x1: 35, y1: 25, columns: 3, rows: 2)
        let warp = try PiecewiseAffineWarp(triangles: triangles, pointCount: points.count)
        let out = try warp.applied(to: image, sourcePoints: points, destinationPoints: points.map { $0 + Point2(0.5, 0) })
        // Destination pixel x samples source x - 0.5: the mean of x-1 and x, i.e. 6x - 3.
        for x in 10..<30 { XCTAssertEqual(Int(out.pixels[(15 * w + x) * 3]), 6 * x - 3, "x = \(x)") }
    }

    func testOutputBufferIsReusedAcrossSizes() throws {
        let (points, triangles) = grid(x0: 0, y0: 0, x1: 30, y1: 20, columns: 2, rows: 2)
        let warp = try PiecewiseAffineWarp(triangles: triangles, pointCount: points.count)
        var out = RGBImage(width: 5, height: 5)
        let image = TestImages.textured(width: 30, height: 20)
        try warp.apply(source: image, sourcePoints: points, destinationPoints: points, into: &out)
        XCTAssertEqual(out.pixels, image.pixels)
    }

    func testRejectsBadInput() throws {
        XCTAssertThrowsError(try PiecewiseAffineWarp(triangles: [(0, 1, 3)], pointCount: 3))
        let warp = try PiecewiseAffineWarp(triangles: [(0, 1, 2)], pointCount: 3)
        let image = TestImages.textured(width: 8, height: 8)
        let good = [Point2(0, 0), Point2(8, 0), Point2(0, 8)]
        XCTAssertThrowsError(try warp.applied(to: image, sourcePoints: good, destinationPoints: Array(good.prefix(2))))
        XCTAssertThrowsError(try warp.applied(to: image, sourcePoints: good, destinationPoints: [Point2(.nan, 0), good[1], good[2]]))
        // Degenerate and huge destination triangles are skipped or clipped, not a crash.
        _ = try warp.applied(to: image, sourcePoints: good, destinationPoints: [Point2(1, 1), Point2(1, 1), Point2(1, 1)])
        _ = try warp.applied(to: image, sourcePoints: good, destinationPoints: [Point2(-1e30, -1e30), Point2(1e30, 0), Point2(0, 1e30)])
    }

    /// Prints the time of a face-sized warp on a 640×480 frame (not asserted).
    func testTimingAt640x480() throws {
        let image = TestImages.textured(width: 640, height: 480)
        // About 900 triangles over a 260×300 face-sized region, every point displaced.
        let (points, triangles) = grid(x0: 190, y0: 90, x1: 450, y1: 390, columns: 21, rows: 21)
        let moved = points.enumerated().map { i, p in p + Point2(Float(i % 7) * 0.6 - 2, Float(i % 5) * 0.7 - 1.5) }
        let warp = try PiecewiseAffineWarp(triangles: triangles, pointCount: points.count)
        var out = RGBImage(width: 640, height: 480)
        try warp.apply(source: image, sourcePoints: points, destinationPoints: moved, into: &out)
        let runs = 30
        let start = Date()
        for _ in 0..<runs { try warp.apply(source: image, sourcePoints: points, destinationPoints: moved, into: &out) }
        let ms = Date().timeIntervalSince(start) * 1000 / Double(runs)
        print("PiecewiseAffineWarp 640x480, \(triangles.count) triangles over 260x300: \(String(format: "%.2f", ms)) ms/frame")
    }
}
