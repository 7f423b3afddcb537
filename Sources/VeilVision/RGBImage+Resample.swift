import VeilCore
extension RGBImage {
    /// This image scaled to fit inside `width`×`height` with its aspect ratio kept, centred on
    /// black bars. Shrinking averages each output pixel's footprint (as a camera's optics would);
    /// enlarging interpolates bilinearly. Returns the scale and the offset of the image inside the
    /// result, so that a point p in this image lands at p * scale + offset.
    public func letterboxed(width: Int, height: Int) -> (image: RGBImage, scale: Float, offset: Point2) {
        var out = RGBImage(width: width, height: height)
        guard self.width > 0, self.height > 0, width > 0, height > 0 else { return (out, 1, .zero) }
        let scale = min(Float(width) / Float(self.width), Float(height) / Float(self.height))
        let w = min(Int((Float(self.width) * scale).rounded()), width)
        let h = min(Int((Float(self.height) * scale).rounded()), height)
        let ox = (width - w) / 2, oy = (height - h) / 2
        let sw = self.width, sh = self.height
        // Footprint of one output pixel in source pixels (at least one: bilinear when enlarging).
        let foot = max(1 / scale, 1)
        let taps = max(Int(foot.rounded(.up)), 1) + 1
        pixels.withUnsafeBufferPointer { src in
            out.pixels.withUnsafeMutableBufferPointer { dst in
                func weights(_ center: Float, _ limit: Int) -> [(Int, Float)] {
                    let lo = center - foot / 2, hi = center + foot / 2
                    var result: [(Int, Float)] = []
                    var i = Int((lo - 0.5).rounded(.down))
                    for _ in 0...taps {
                        // Triangle-filtered overlap of source pixel i (centre i + 0.5) with [lo, hi].
                        let d = abs(Float(i) + 0.5 - center)
                        let wgt = max(0, min(1, (foot / 2 + 0.5 - d)))
                        if wgt > 0 { result.append((min(max(i, 0), limit - 1), wgt)) }
                        i += 1
                        if Float(i) > hi + 0.5 { break }
                    }
                    let total = result.reduce(0) { $0 + $1.1 }
                    return total > 0 ? result.map { ($0.0, $0.1 / total) } : [(min(max(Int(center), 0), limit - 1), 1)]
                }
                let columns = (0..<w).map { weights((Float($0) + 0.5) / scale, sw) }
                for y in 0..<h {
                    let rows = weights((Float(y) + 0.5) / scale, sh)
                    for x in 0..<w {
                        var acc = SIMD3<Float>(repeating: 0)
                        for (sy, wy) in rows {
                            for (sx, wx) in columns[x] {
                                let i = (sy * sw + sx) * 3
                                acc += SIMD3(Float(src[i]), Float(src[i + 1]), Float(src[i + 2])) * (wx * wy)
                            }
                        }
                        let o = ((y + oy) * width + x + ox) * 3
                        dst[o] = UInt8(min(max(acc.x.rounded(), 0), 255))
                        dst[o + 1] = UInt8(min(max(acc.y.rounded(), 0), 255))
                        dst[o + 2] = UInt8(min(max(acc.z.rounded(), 0), 255))
                    }
                }
            }
        }
        return (out, scale, Point2(Float(ox), Float(oy)))
    }
}
