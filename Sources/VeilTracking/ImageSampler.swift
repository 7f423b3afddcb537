import Foundation
import VeilCore

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
    image.pixels.withUnsafeBufferPointer { px in
        var o = 0
        for row in 0..<side {
            var p = origin + rowStep * Float(row)
            for _ in 0..<side {
                let fx = p.x.rounded(.down), fy = p.y.rounded(.down)
                let ix = Int(fx), iy = Int(fy)
                let ax = p.x - fx, ay = p.y - fy
                if ix >= 0, iy >= 0, ix + 1 < w, iy + 1 < h {
                    let i00 = (iy * w + ix) * 3, i10 = i00 + 3, i01 = i00 + w * 3, i11 = i01 + 3
                    for ch in 0..<3 {
                        let top = Float(px[i00 + ch]) + (Float(px[i10 + ch]) - Float(px[i00 + ch])) * ax
                        let bottom = Float(px[i01 + ch]) + (Float(px[i11 + ch]) - Float(px[i01 + ch])) * ax
                        tensor[o + ch] = (top + (bottom - top) * ay) * scale + offset
                    }
                } else {
                    for ch in 0..<3 {
                        var acc: Float = 0
                        for k in 0..<4 {
                            let x = ix + (k & 1), y = iy + (k >> 1)
                            let wgt = ((k & 1) == 1 ? ax : 1 - ax) * ((k >> 1) == 1 ? ay : 1 - ay)
                            if x >= 0, y >= 0, x < w, y < h { acc += Float(px[(y * w + x) * 3 + ch]) * wgt }
                        }
                        tensor[o + ch] = acc * scale + offset
                    }
                }
                o += 3
                p += colStep
            }
        }
    }
}
