import VeilCore
import VeilVision

/// Warps an image by a triangulated point set: every destination triangle is filled through the
/// affine map that takes it back onto its source triangle, sampling the source bilinearly.
///
/// Pixels that no destination triangle covers keep the source pixel, so a mesh whose outer ring
/// does not move blends into the untouched background. Where destination triangles overlap (a
/// fold), the one drawn later wins; triangles are drawn in the order given.
///
/// Coordinates are image pixels with pixel `(i, j)` centred at `(i + 0.5, j + 0.5)`, the
/// convention of MediaPipe's landmarks scaled to the image.
public struct PiecewiseAffineWarp: Sendable {
    /// Point-index triples, drawn in this order.
    public let triangles: [(Int, Int, Int)]
    /// The number of points every call must supply.
    public let pointCount: Int

    /// A warp over `triangles`, whose indices must lie in `0..<pointCount`.
    public init(triangles: [(Int, Int, Int)], pointCount: Int) throws {
        guard pointCount >= 0 else { throw VeilError.invalidInput("point count must not be negative") }
        for (n, t) in triangles.enumerated() {
            guard (0..<pointCount).contains(t.0), (0..<pointCount).contains(t.1), (0..<pointCount).contains(t.2) else {
                throw VeilError.invalidInput("triangle \(n) (\(t.0), \(t.1), \(t.2)) refers to a point outside 0..<\(pointCount)")
            }
        }
        self.triangles = triangles
        self.pointCount = pointCount
    }

    /// Writes the warp of `source` into `output`, which is resized to the source's size and reused.
    ///
    /// - Parameters:
    ///   - sourcePoints: where each point lies in `source`.
    ///   - destinationPoints: where each point lies in the output.
    /// - Throws: `VeilError.invalidInput` when the point counts differ from `pointCount` or a
    ///   point is not finite.
    public func apply(source: RGBImage, sourcePoints: [Point2], destinationPoints: [Point2],
                      into output: inout RGBImage) throws {
        try validate(sourcePoints, "source"); try validate(destinationPoints, "destination")
        output.resize(width: source.width, height: source.height)
        Raster.copy(source, into: &output)
        Raster.warp(source: source, triangles: triangles, sourcePoints: sourcePoints,
                    destinationPoints: destinationPoints, into: &output)
    }

    /// The warp of `source` as a new image; see `apply(source:sourcePoints:destinationPoints:into:)`.
    public func applied(to source: RGBImage, sourcePoints: [Point2], destinationPoints: [Point2]) throws -> RGBImage {
        var output = RGBImage(width: 0, height: 0)
        try apply(source: source, sourcePoints: sourcePoints, destinationPoints: destinationPoints, into: &output)
        return output
    }

    private func validate(_ points: [Point2], _ what: String) throws {
        guard points.count == pointCount else {
            throw VeilError.invalidInput("\(points.count) \(what) points given, the warp's triangles need \(pointCount)")
        }
        guard points.allSatisfy({ $0.x.isFinite && $0.y.isFinite }) else {
            throw VeilError.invalidInput("\(what) points must be finite numbers")
        }
    }
}

/// Triangle rasterisation and sampling shared by the warp and the synthesiser's mouth pass.
enum Raster {
    /// Copies `source`'s pixels into `output` (same size) without reallocating `output`'s storage.
    static func copy(_ source: RGBImage, into output: inout RGBImage) {
        source.pixels.withUnsafeBytes { src in
            output.pixels.withUnsafeMutableBytes { dst in
                guard let s = src.baseAddress, let d = dst.baseAddress else { return }
                d.copyMemory(from: s, byteCount: min(src.count, dst.count))
            }
        }
    }

    /// The affine map `p ↦ (a.x p.x + b.x p.y + c.x, a.y p.x + b.y p.y + c.y)` taking the
    /// destination triangle `d` onto `s`, or nil when `d` has no area.
    @inline(__always)
    static func affine(from d0: Point2, _ d1: Point2, _ d2: Point2,
                       to s0: Point2, _ s1: Point2, _ s2: Point2) -> (a: Point2, b: Point2, c: Point2)? {
        let e1 = d1 - d0, e2 = d2 - d0
        let det = e1.x * e2.y - e2.x * e1.y
        guard abs(det) > 1e-9 else { return nil }
        let inv = 1 / det
        // Inverse of [e1 e2]: rows (e2.y, -e2.x) and (-e1.y, e1.x), over det.
        let f1 = s1 - s0, f2 = s2 - s0
        let a = (f1 * e2.y - f2 * e1.y) * inv       // ∂source/∂x
        let b = (f2 * e1.x - f1 * e2.x) * inv       // ∂source/∂y
        let c = s0 - a * d0.x - b * d0.y
        return (a, b, c)
    }

    /// Calls `body(y, x0, x1)` for each image row `y` whose pixel centres `x0...x1` lie inside the
    /// triangle (edges included), clipped to the image.
    @inline(__always)
    static func forEachSpan(_ p0: Point2, _ p1: Point2, _ p2: Point2, width: Int, height: Int,
                            _ body: (Int, Int, Int) -> Void) {
        guard width > 0, height > 0 else { return }
        let area2 = (p1.x - p0.x) * (p2.y - p0.y) - (p1.y - p0.y) * (p2.x - p0.x)
        guard abs(area2) > 1e-9, area2.isFinite else { return }
        let sign: Float = area2 > 0 ? 1 : -1
        let minX = min(p0.x, p1.x, p2.x), maxX = max(p0.x, p1.x, p2.x)
        let minY = min(p0.y, p1.y, p2.y), maxY = max(p0.y, p1.y, p2.y)
        let fw = Float(width), fh = Float(height)
        // Rows whose centres y + 0.5 fall in [minY, maxY], clamped in Float before converting.
        let yLo = Int(min(max((minY - 0.5).rounded(.up), 0), fh))
        let yHi = Int(min(max((maxY - 0.5).rounded(.down), -1), fh - 1))
        guard yLo <= yHi else { return }
        // Edge p→q: inside when sign * cross(q - p, X - p) >= 0, i.e. A x + B(y) >= 0 on a row,
        // with A constant per edge and B(y) = slope * y + offset.
        @inline(__always) func edge(_ p: Point2, _ q: Point2) -> (a: Float, slope: Float, offset: Float, ex: Float) {
            let ex = q.x - p.x, ey = q.y - p.y
            return (-sign * ey, sign * ex, sign * (ey * p.x - ex * p.y), abs(ex))
        }
        let edges = (edge(p0, p1), edge(p1, p2), edge(p2, p0))
        let eps: Float = 1e-3
        for y in yLo...yHi {
            let yc = Float(y) + 0.5
            var lo = minX, hi = maxX
            var empty = false
            @inline(__always) func clip(_ e: (a: Float, slope: Float, offset: Float, ex: Float)) {
                let b = e.slope * yc + e.offset
                if e.a > 1e-12 { lo = max(lo, -b / e.a - eps) }
                else if e.a < -1e-12 { hi = min(hi, -b / e.a + eps) }
                else if b < -eps * e.ex { empty = true }
            }
            clip(edges.0); clip(edges.1); clip(edges.2)
            if empty || lo > hi { continue }
            let x0 = Int(min(max((lo - 0.5).rounded(.up), 0), fw))
            let x1 = Int(min(max((hi - 0.5).rounded(.down), -1), fw - 1))
            if x0 <= x1 { body(y, x0, x1) }
        }
    }

    /// Calls `body(centre, pixel)` for each pixel whose centre lies inside the triangle (the spans
    /// of `forEachSpan`), with a pointer to its three bytes in the RGB image at `pixels`.
    @inline(__always)
    static func forEachPixel(_ p0: Point2, _ p1: Point2, _ p2: Point2, in pixels: UnsafeMutablePointer<UInt8>,
                             width: Int, height: Int, _ body: (Point2, UnsafeMutablePointer<UInt8>) -> Void) {
        forEachSpan(p0, p1, p2, width: width, height: height) { y, x0, x1 in
            let yc = Float(y) + 0.5
            var o = pixels + (y * width + x0) * 3
            for x in x0...x1 {
                body(Point2(Float(x) + 0.5, yc), o)
                o += 3
            }
        }
    }

    /// Bilinear sample of `src` (width `w`, height `h`) at continuous pixel coordinates `(sx, sy)`,
    /// clamped to the image (NaN reads the first row or column).
    @inline(__always)
    static func sample(_ src: UnsafePointer<UInt8>, _ w: Int, _ h: Int, _ sx: Float, _ sy: Float)
        -> (Float, Float, Float) {
        // `max(0, NaN)` is 0, so NaN never reaches the Int conversion.
        let fx = min(Swift.max(0, sx - 0.5), Float(w - 1))
        let fy = min(Swift.max(0, sy - 0.5), Float(h - 1))
        let x0 = Int(fx), y0 = Int(fy)
        let tx = fx - Float(x0), ty = fy - Float(y0)
        let dx = x0 < w - 1 ? 3 : 0
        let dy = y0 < h - 1 ? 3 * w : 0
        let i = (y0 * w + x0) * 3
        let p00 = src + i, p10 = p00 + dx, p01 = p00 + dy, p11 = p01 + dx
        @inline(__always) func ch(_ c: Int) -> Float {
            let a = Float(p00[c]), b = Float(p10[c]), cc = Float(p01[c]), d = Float(p11[c])
            let top = a + (b - a) * tx
            let bottom = cc + (d - cc) * tx
            return top + (bottom - top) * ty
        }
        return (ch(0), ch(1), ch(2))
    }

    @inline(__always)
    static func byte(_ v: Float) -> UInt8 { UInt8(min(max(v + 0.5, 0), 255)) }

    /// Fills each destination triangle from its source triangle; other pixels are left as they are.
    static func warp(source: RGBImage, triangles: [(Int, Int, Int)], sourcePoints: [Point2],
                     destinationPoints: [Point2], into output: inout RGBImage) {
        let w = source.width, h = source.height
        guard w > 0, h > 0, output.width == w, output.height == h else { return }
        source.pixels.withUnsafeBufferPointer { srcBuf in
            output.pixels.withUnsafeMutableBufferPointer { dstBuf in
                guard let src = srcBuf.baseAddress, let dst = dstBuf.baseAddress else { return }
                sourcePoints.withUnsafeBufferPointer { sp in
                    destinationPoints.withUnsafeBufferPointer { dp in
                        for t in triangles {
                            let d0 = dp[t.0], d1 = dp[t.1], d2 = dp[t.2]
                            guard let m = affine(from: d0, d1, d2, to: sp[t.0], sp[t.1], sp[t.2]) else { continue }
                            forEachSpan(d0, d1, d2, width: w, height: h) { y, x0, x1 in
                                let yc = Float(y) + 0.5
                                let rowX = m.b.x * yc + m.c.x, rowY = m.b.y * yc + m.c.y
                                var o = dst + (y * w + x0) * 3
                                for x in x0...x1 {
                                    let xc = Float(x) + 0.5
                                    let (r, g, b) = sample(src, w, h, m.a.x * xc + rowX, m.a.y * xc + rowY)
                                    o[0] = byte(r); o[1] = byte(g); o[2] = byte(b)
                                    o += 3
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
