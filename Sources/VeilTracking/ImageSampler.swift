import Foundation
#if arch(x86_64)
import _Builtin_intrinsics.intel
#endif
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
///
/// Most of a crop lies well inside the frame; there each output pixel reads its two source rows
/// as one 8-byte word each (`bilinear`), with no per-channel bounds checks. Samples near the edges
/// and beyond take the careful path, which reads each of the four neighbours only if it exists.
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
    // Inside [0, w − 1) × [0, h − 1) all four neighbours exist, and floor(p) is the truncation of a
    // non-negative p: no libm call per pixel. The 8-byte word read at column x spans x and the two
    // pixels after it, so the word-wise path stops one pixel sooner.
    let lastX = Float(w - 1), lastY = Float(h - 1), wordX = Float(w - 2)
    let stride = w * 3
    let count = tensor.count
    image.pixels.withUnsafeBufferPointer { px in
        guard let base = px.baseAddress, let out = tensor.baseAddress else { return }
        let raw = UnsafeRawPointer(base)
        var o = 0
        for row in 0..<side {
            var p = origin + rowStep * Float(row)
            for _ in 0..<side {
                // The fast path stores four floats; the fourth is overwritten by the next pixel.
                if p.x >= 0, p.y >= 0, p.x < lastX, p.y < lastY {
                    if p.x < wordX, o &+ 4 <= count {
                        bilinear(raw, stride: stride, at: p, scale: scale, offset: offset, into: out + o)
                    } else {
                        bilinearByChannel(raw, stride: stride, at: p, scale: scale, offset: offset, into: out + o)
                    }
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

#if arch(x86_64)
/// SSE2 (every x86-64 processor has it): the three channels of a pixel and of its right neighbour
/// are read as one 8-byte word per row and widened into float lanes (R, G, B, –), and each lane
/// runs the very operations of the per-channel form below, in the same order, so the crop is the
/// same to the bit. Writes four floats at `out`.
@inline(__always)
func bilinear(_ raw: UnsafeRawPointer, stride: Int, at p: Point2, scale: Float, offset: Float,
              into out: UnsafeMutablePointer<Float>) {
    let ix = Int(truncatingIfNeeded: Int32(p.x)), iy = Int(truncatingIfNeeded: Int32(p.y))
    let ax = _mm_set1_ps(p.x - Float(ix)), ay = _mm_set1_ps(p.y - Float(iy))
    let at = iy &* stride &+ ix &* 3
    let zero = _mm_setzero_si128()
    @inline(__always) func floats(_ word: Int64) -> __m128 {
        _mm_cvtepi32_ps(_mm_unpacklo_epi16(_mm_unpacklo_epi8(_mm_cvtsi64_si128(word), zero), zero))
    }
    @inline(__always) func row(_ offset: Int) -> __m128 {
        let word = Int64(bitPattern: raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
        let left = floats(word), right = floats(word >> 24)
        return _mm_add_ps(left, _mm_mul_ps(_mm_sub_ps(right, left), ax))
    }
    let top = row(at), bottom = row(at &+ stride)
    let blended = _mm_add_ps(top, _mm_mul_ps(_mm_sub_ps(bottom, top), ay))
    _mm_storeu_ps(out, _mm_add_ps(_mm_mul_ps(blended, _mm_set1_ps(scale)), _mm_set1_ps(offset)))
}
#else
/// Elsewhere, the per-channel form.
@inline(__always)
func bilinear(_ raw: UnsafeRawPointer, stride: Int, at p: Point2, scale: Float, offset: Float,
              into out: UnsafeMutablePointer<Float>) {
    bilinearByChannel(raw, stride: stride, at: p, scale: scale, offset: offset, into: out)
}
#endif

/// The sample at `p` (all four neighbours inside the image), channel by channel: three floats at `out`.
@inline(__always)
func bilinearByChannel(_ raw: UnsafeRawPointer, stride: Int, at p: Point2, scale: Float, offset: Float,
                       into out: UnsafeMutablePointer<Float>) {
    let ix = Int(p.x), iy = Int(p.y)
    let ax = p.x - Float(ix), ay = p.y - Float(iy)
    let top = raw.assumingMemoryBound(to: UInt8.self) + (iy &* stride &+ ix &* 3), bottom = top + stride
    for ch in 0..<3 {
        let upper = Float(top[ch]) + (Float(top[ch + 3]) - Float(top[ch])) * ax
        let lower = Float(bottom[ch]) + (Float(bottom[ch + 3]) - Float(bottom[ch])) * ax
        out[ch] = (upper + (lower - upper) * ay) * scale + offset
    }
}
