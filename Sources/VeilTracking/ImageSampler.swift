import Foundation
import VeilCore
import VeilVision

/// A square region of an image, rotated about its centre: what the models look at.
/// `rotation` is in radians, clockwise on screen (image y points down).
struct RotatedRect: Equatable {
    var center: Point2
    var size: Float
    var rotation: Float

    /// Image position of the region's normalised coordinate (u, v) in 0…1.
    @inline(__always)
    func imagePoint(u: Float, v: Float) -> Point2 {
        let dx = (u - 0.5) * size, dy = (v - 0.5) * size
        let c = cosf(rotation), s = sinf(rotation)
        return Point2(center.x + c * dx - s * dy, center.y + s * dx + c * dy)
    }

    /// The image position of a point a model gave in pixels of its `side`×`side` crop of this
    /// region, its depth scaled alike.
    @inline(__always)
    func imagePoint(inCrop p: Point3, side: Int) -> Point3 {
        let s = Float(side)
        let q = imagePoint(u: p.x / s, v: p.y / s)
        return Point3(q.x, q.y, p.z / s * size)
    }

    /// The region's normalised coordinate of image point `p` (inverse of `imagePoint`).
    func normalized(_ p: Point2) -> Point2 {
        let d = p - center
        let c = cosf(rotation), s = sinf(rotation)
        return Point2((c * d.x + s * d.y) / size + 0.5, (-s * d.x + c * d.y) / size + 0.5)
    }
}

/// Samples a rotated square of an RGB image into a model's float input tensor (NHWC, RGB),
/// bilinearly, mapping 0…255 to `range`. Pixels outside the image read as black.
/// `flipHorizontally` mirrors the crop (the iris model expects right eyes).
func sample(_ image: RGBImage, region: RotatedRect, into tensor: UnsafeMutableBufferPointer<Float>,
            side: Int, range: ClosedRange<Float>, flipHorizontally: Bool = false) {
    let scale = (range.upperBound - range.lowerBound) / 255
    let offset = range.lowerBound
    let w = image.width, h = image.height
    let step = region.size / Float(side)
    let c = cosf(region.rotation) * step, s = sinf(region.rotation) * step
    // Image position of tensor pixel (0, 0)'s centre, and the per-column / per-row steps.
    let half = Float(side) / 2 - 0.5
    let sx0 = flipHorizontally ? half : -half
    let colStep = Point2(flipHorizontally ? -c : c, flipHorizontally ? -s : s)
    let rowStep = Point2(-s, c)
    let originX: Float = region.center.x + c * sx0 + s * half - 0.5
    let originY: Float = region.center.y + s * sx0 - c * half - 0.5
    let origin = Point2(originX, originY)
    // Inside the image, floor(p) is the truncation of a non-negative p: no libm call per pixel.
    let lastX = Float(w - 1), lastY = Float(h - 1)
    image.pixels.withUnsafeBufferPointer { px in
        guard let base = px.baseAddress, let out = tensor.baseAddress else { return }
        var o = 0
        for row in 0..<side {
            var p = origin + rowStep * Float(row)
            for _ in 0..<side {
                if p.x >= 0, p.y >= 0, p.x < lastX, p.y < lastY {
                    let ix = Int(p.x), iy = Int(p.y)
                    let ax = p.x - Float(ix), ay = p.y - Float(iy)
                    let p00 = base + (iy * w + ix) * 3, p01 = p00 + w * 3
                    @inline(__always) func channel(_ ch: Int) -> Float {
                        let top = Float(p00[ch]) + (Float(p00[ch + 3]) - Float(p00[ch])) * ax
                        let bottom = Float(p01[ch]) + (Float(p01[ch + 3]) - Float(p01[ch])) * ax
                        return (top + (bottom - top) * ay) * scale + offset
                    }
                    out[o] = channel(0); out[o + 1] = channel(1); out[o + 2] = channel(2)
                } else {
                    let fx = p.x.rounded(.down), fy = p.y.rounded(.down)
                    let ax = p.x - fx, ay = p.y - fy
                    // Clamped before converting: a point far outside (or NaN) reads as black.
                    let ix = Int(min(max(-2, fx), Float(w))), iy = Int(min(max(-2, fy), Float(h)))
                    for ch in 0..<3 {
                        var acc: Float = 0
                        for k in 0..<4 {
                            let x = ix + (k & 1), y = iy + (k >> 1)
                            let wgt = ((k & 1) == 1 ? ax : 1 - ax) * ((k >> 1) == 1 ? ay : 1 - ay)
                            if x >= 0, y >= 0, x < w, y < h { acc += Float(px[(y * w + x) * 3 + ch]) * wgt }
                        }
                        out[o + ch] = acc * scale + offset
                    }
                }
                o += 3
                p += colStep
            }
        }
    }
}
