import Foundation

/// The three custom operations of MediaPipe's attention face mesh (`face_landmark_with_attention.tflite`),
/// written from their published behaviour (MediaPipe's `mediapipe/util/tflite/operations/`, version 2
/// of each). The model crops a 16×16 patch of its 48×48 feature map around the lips and each eye,
/// refines the points there, and maps them back:
///
/// - `landmarksToTransformMatrix` (`Landmarks2TransformMatrix`): from the mesh, the affine matrix that
///   maps a position of the 16×16 output grid to feature-map units, rotated so that two landmarks
///   (the mouth's or an eye's corners) lie level and scaled to 1.5× the box around a subset of points.
/// - `transformTensorBilinear` (`TransformTensorBilinear`): samples the feature map through that
///   matrix, bilinearly, at pixel centres; a sample outside the map is zero in every channel.
/// - `transformLandmarks` (`TransformLandmarks`): applies a matrix's affine part to 2-D points.
///
/// Matrices are 4×4, row-major, z untouched and the last row 0 0 0 1. Pure Swift on buffers the
/// caller owns: the LiteRT kernels (`AttentionMeshKernels`) call these on the tensors' memory.
enum AttentionMeshOperations {
    /// Options of one `Landmarks2TransformMatrix` node.
    struct TransformMatrixOptions: Equatable {
        /// The landmarks whose line is turned level (left to right).
        var leftRotationIndex: Int
        var rightRotationIndex: Int
        /// The landmarks whose box the crop covers.
        var subset: [Int]
        var outputWidth = 16, outputHeight = 16
        var scaleX: Float = 1.5, scaleY: Float = 1.5
        var targetRotation: Float = 0
    }

    /// The crop matrix for the landmarks `points` (x, y, z each; z is not used), or nil when an index
    /// is outside them. Rotation: `target − atan2(right − left)`; every subset point turned by it, the
    /// box around them (w × h, centre turned back); then
    /// `M = T(centre) · R(−rotation) · S(scaleX·w/outputWidth, scaleY·h/outputHeight) · T(−outputWidth/2, −outputHeight/2)`.
    static func landmarksToTransformMatrix(_ points: UnsafeBufferPointer<Float>, options: TransformMatrixOptions) -> [Float]? {
        let count = points.count / 3
        let indices = options.subset + [options.leftRotationIndex, options.rightRotationIndex]
        guard !options.subset.isEmpty, indices.allSatisfy({ $0 >= 0 && $0 < count }),
              options.outputWidth > 0, options.outputHeight > 0 else { return nil }
        let left = (points[3 * options.leftRotationIndex], points[3 * options.leftRotationIndex + 1])
        let right = (points[3 * options.rightRotationIndex], points[3 * options.rightRotationIndex + 1])
        let rotation = options.targetRotation - atan2f(right.1 - left.1, right.0 - left.0)
        let c = cosf(rotation), s = sinf(rotation)
        var minX = Float.greatestFiniteMagnitude, maxX = -Float.greatestFiniteMagnitude
        var minY = Float.greatestFiniteMagnitude, maxY = -Float.greatestFiniteMagnitude
        for index in options.subset {
            let x = points[3 * index], y = points[3 * index + 1]
            let rx = x * c - y * s, ry = x * s + y * c
            minX = min(minX, rx); maxX = max(maxX, rx)
            minY = min(minY, ry); maxY = max(maxY, ry)
        }
        // The box's centre, turned back into the landmarks' frame (by −rotation).
        let boxX = (minX + maxX) / 2, boxY = (minY + maxY) / 2
        let centreX = boxX * c + boxY * s, centreY = -boxX * s + boxY * c
        let sx = options.scaleX * (maxX - minX) / Float(options.outputWidth)
        let sy = options.scaleY * (maxY - minY) / Float(options.outputHeight)
        let halfW = Float(options.outputWidth) / 2, halfH = Float(options.outputHeight) / 2
        // R(−rotation) = [[c, s], [−s, c]]; the linear part is R(−rotation)·S.
        let a = c * sx, b = s * sy, d = -s * sx, e = c * sy
        return [a, b, 0, centreX - a * halfW - b * halfH,
                d, e, 0, centreY - d * halfW - e * halfH,
                0, 0, 1, 0,
                0, 0, 0, 1]
    }

    /// Samples `input` (height × width × channels, channels innermost) into `output`
    /// (outputHeight × outputWidth × channels) through `matrix`: output pixel (x, y) reads the input
    /// at `M·(x + ½, y + ½) − ½` (pixel centres), bilinearly; where that point lies outside
    /// [0, width − 1] × [0, height − 1] the whole pixel is zero.
    static func transformTensorBilinear(_ input: UnsafeBufferPointer<Float>, height: Int, width: Int, channels: Int,
                                        matrix: [Float], into output: UnsafeMutableBufferPointer<Float>,
                                        outputHeight: Int, outputWidth: Int) {
        let a = matrix[0], b = matrix[1], d = matrix[4], e = matrix[5]
        // The half-pixel shift folded into the translation.
        let tx = matrix[3] + 0.5 * a + 0.5 * b - 0.5, ty = matrix[7] + 0.5 * d + 0.5 * e - 0.5
        let maxX = Float(width - 1), maxY = Float(height - 1)
        for y in 0..<outputHeight {
            for x in 0..<outputWidth {
                let out = (y * outputWidth + x) * channels
                let fx = Float(x), fy = Float(y)
                let sx = a * fx + b * fy + tx, sy = d * fx + e * fy + ty
                guard sx >= 0, sy >= 0, sx <= maxX, sy <= maxY else {
                    for k in 0..<channels { output[out + k] = 0 }
                    continue
                }
                let x0 = Int(sx), y0 = Int(sy)
                let x1 = min(x0 + 1, width - 1), y1 = min(y0 + 1, height - 1)
                let wx = sx - Float(x0), wy = sy - Float(y0)
                let w00 = (1 - wx) * (1 - wy), w01 = wx * (1 - wy), w10 = (1 - wx) * wy, w11 = wx * wy
                let p00 = (y0 * width + x0) * channels, p01 = (y0 * width + x1) * channels
                let p10 = (y1 * width + x0) * channels, p11 = (y1 * width + x1) * channels
                for k in 0..<channels {
                    output[out + k] = input[p00 + k] * w00 + input[p01 + k] * w01 + input[p10 + k] * w10 + input[p11 + k] * w11
                }
            }
        }
    }

    /// `points` (count × dimensions; the first two are x, y) through the matrix's affine part into
    /// `output`: x′ = m00·x + m01·y + m03, y′ = m10·x + m11·y + m13; further dimensions are copied.
    static func transformLandmarks(_ points: UnsafeBufferPointer<Float>, dimensions: Int, matrix: [Float],
                                   into output: UnsafeMutableBufferPointer<Float>) {
        guard dimensions >= 2 else { return }
        for i in 0..<points.count / dimensions {
            let base = i * dimensions
            let x = points[base], y = points[base + 1]
            output[base] = matrix[0] * x + matrix[1] * y + matrix[3]
            output[base + 1] = matrix[4] * x + matrix[5] * y + matrix[7]
            for k in 2..<dimensions { output[base + k] = points[base + k] }
        }
    }
}
