import Foundation
import VeilCore
import VeilVision

/// The displacement model: how far each mesh point moves at full strength of each action, in the
/// photo's pixels, scaled by the photo's own face.
extension FaceRig {
    /// Jaw drop, per unit of `jawDrop` (so 1 would move the chin one face height): the lower lip
    /// and everything below the mouth line hang on the jaw; the upper lip barely follows; the
    /// cheeks beside the mouth stretch; the jaw's outline moves less towards its angles.
    static func jawField(_ face: FaceLayout) -> [Point2] {
        let (us, vs) = (face.us, face.vs)
        let (cornerL, cornerR) = face.mouthCorners
        let outer = face.outerLips, inner = face.innerLips
        let uL = us[cornerL], uR = us[cornerR], uMouth = (uL + uR) / 2
        let vMouth = (vs[cornerL] + vs[cornerR]) / 2, vChin = vs[face.chin]
        let halfWidth = max(face.oval.map { abs(us[$0] - uMouth) }.max() ?? 1, 1)
        let corners = Set([outer.upper.first, outer.upper.last, inner.upper.first, inner.upper.last].compactMap { $0 })
        let upperLip = Set(outer.upper + inner.upper).subtracting(corners)
        let lowerLip = Set(outer.lower + inner.lower).subtracting(corners)
        let lipOutline = (outer.upper + outer.lower.reversed()).map { face.points[$0] }
        // The line between the lips, to sort the points inside the lips into upper and lower.
        let parting = ProfileAlongU(heights: inner.upper.enumerated().map { k, i in
            let partner = ChainPair.position(inner.upperPartners[k], on: inner.lower, face.points)
            return (us[i], (vs[i] + face.frame.v(partner)) / 2)
        })
        return (0..<face.count).map { i in
            let arch = sin(Float.pi * min(max((us[i] - uL) / max(uR - uL, 1), 0), 1))
            let insideLips = contains(lipOutline, face.points[i])
            let weight: Float
            if corners.contains(i) {
                weight = 0.4
            } else if upperLip.contains(i) || (insideLips && !lowerLip.contains(i) && vs[i] > parting.height(at: us[i])) {
                weight = 0.04 * arch
            } else if lowerLip.contains(i) || insideLips {
                weight = 0.4 + 0.6 * arch.squareRoot()
            } else {
                let below = (vMouth - vs[i]) / max(vMouth - vChin, 1)   // 0 at the mouth line, 1 at the chin
                let side = min(abs(us[i] - uMouth) / halfWidth, 1)
                weight = smoothstep(-0.3, 0.3, below) * (1 - 0.45 * side * side)
            }
            return -face.frame.up * (face.faceHeight * weight)
        }
    }

    /// Blink of one eye at full closure: the upper lid comes down to meet the lower lid, which
    /// rises a fifth of the way; the skin above the lid follows with falloff, so the lid skin, not
    /// the lash line, stretches over the closed eye. Brows stay.
    static func blinkField(_ face: FaceLayout, eye: ChainPair, eyeToBrow e: Float) -> [Point2] {
        let (us, vs, points) = (face.us, face.vs, face.points)
        var field = [Point2](repeating: .zero, count: face.count)
        let corners = Set([eye.upper.first, eye.upper.last].compactMap { $0 })
        var upperMoves: [(u: Float, value: Point2)] = [], lowerMoves: [(u: Float, value: Point2)] = []
        for (k, i) in eye.upper.enumerated() {
            let partner = ChainPair.position(eye.upperPartners[k], on: eye.lower, points)
            field[i] = corners.contains(i) ? .zero : (partner - points[i]) * 0.8
            upperMoves.append((us[i], field[i]))
        }
        for (k, i) in eye.lower.enumerated() where !corners.contains(i) {
            let partner = ChainPair.position(eye.lowerPartners[k], on: eye.upper, points)
            field[i] = (partner - points[i]) * 0.2
            lowerMoves.append((us[i], field[i]))
        }
        let upperMove = ProfileAlongU(upperMoves), lowerMove = ProfileAlongU(lowerMoves)
        let upperLid = ProfileAlongU(heights: eye.upper.map { (us[$0], vs[$0]) })
        let lowerLid = ProfileAlongU(heights: eye.lower.map { (us[$0], vs[$0]) })
        let span = upperLid.range
        let eyeWidth = max(span.upperBound - span.lowerBound, 1)
        let fixed = Set(eye.upper + eye.lower + face.leftBrow.all + face.rightBrow.all)
        for i in 0..<face.count where !fixed.contains(i) {
            let u = us[i]
            let outside = max(span.lowerBound - u, u - span.upperBound, 0)
            let lateral = 1 - smoothstep(0, 0.2 * eyeWidth, outside)
            guard lateral > 0 else { continue }
            let above = vs[i] - upperLid.height(at: u), below = lowerLid.height(at: u) - vs[i]
            if above > 0 {
                field[i] = upperMove(u) * (0.95 * (1 - smoothstep(0.05 * e, 0.8 * e, above)) * lateral)
            } else if below > 0 {
                field[i] = lowerMove(u) * (0.5 * (1 - smoothstep(0, 0.4 * e, below)) * lateral)
            }
        }
        return field
    }

    /// Smile at full strength: each outer mouth corner moves a quarter of the mouth width, outward
    /// and upward (0.6 : 0.8); nearby points follow with a Gaussian falloff (σ = 0.3 mouth width),
    /// so the middle of the lips hardly moves.
    static func smileField(_ face: FaceLayout) -> [Point2] {
        cornerField(face, outward: 0.6, up: 0.8, distance: 0.25 * face.mouthWidth)
    }

    /// Frown at full strength: each outer mouth corner moves a sixth of the mouth width down and a
    /// little inward; nearby points follow with the smile's Gaussian falloff.
    static func frownField(_ face: FaceLayout) -> [Point2] {
        cornerField(face, outward: -0.25, up: -1, distance: face.mouthWidth / 6)
    }

    /// Both outer mouth corners moving `distance` times the direction (`outward`, `up`) in the
    /// face's frame (mirrored for the left corner), and nearby points with them, with a Gaussian
    /// falloff of σ = 0.3 mouth width.
    static func cornerField(_ face: FaceLayout, outward: Float, up: Float, distance: Float) -> [Point2] {
        var field = [Point2](repeating: .zero, count: face.count)
        let sigma = 0.3 * face.mouthWidth
        let (cornerL, cornerR) = face.mouthCorners
        for (corner, side) in [(cornerL, Float(-1)), (cornerR, Float(1))] {
            let direction = face.frame.right * (outward * side) + face.frame.up * up
            for i in 0..<face.count {
                let d = face.points[i] - face.points[corner]
                field[i] += direction * (distance * exp(-(d * d).sum() / (sigma * sigma)))
            }
        }
        return field
    }

    /// Pucker at full strength: the lips and the skin around them gather towards the mouth's
    /// centre, narrowing the mouth by a third of its width, and push out, so the lips show a
    /// little thicker (the upper lip rises, the lower lip drops, by a twentieth of the mouth width).
    static func puckerField(_ face: FaceLayout) -> [Point2] {
        let (cornerL, cornerR) = face.mouthCorners
        let centre = (face.points[cornerL] + face.points[cornerR]) * 0.5
        let uMouth = face.frame.u(centre), vMouth = face.frame.v(centre)
        let reach = face.mouthWidth
        let outer = face.outerLips
        let upper = Set(outer.upper.dropFirst().dropLast()), lower = Set(outer.lower.dropFirst().dropLast())
        return (0..<face.count).map { i in
            let du = face.us[i] - uMouth, dv = face.vs[i] - vMouth
            let falloff = exp(-(du * du + 2 * dv * dv) / (reach * reach))
            var move = face.frame.right * (-du / 3 * falloff)
            if upper.contains(i) { move += face.frame.up * (face.mouthWidth / 20) }
            if lower.contains(i) { move -= face.frame.up * (face.mouthWidth / 20) }
            return move
        }
    }

    /// Brow raise at full strength: each brow rises 0.35 of its eye-to-brow distance; the forehead
    /// above follows with slow falloff (about half at the top of the mesh), the lid skin below with
    /// fast falloff (nothing at the lid margin).
    static func browField(_ face: FaceLayout) -> [Point2] {
        var field = [Point2](repeating: .zero, count: face.count)
        for (brow, e) in [(face.leftBrow, face.leftEyeToBrow), (face.rightBrow, face.rightEyeToBrow)] {
            let line = ProfileAlongU(heights: brow.upper.map { (face.us[$0], face.vs[$0]) })
            let span = line.range
            let own = Set(brow.all)
            for i in 0..<face.count {
                var weight: Float = 1
                if !own.contains(i) {
                    let u = face.us[i]
                    let outside = max(span.lowerBound - u, u - span.upperBound, 0)
                    let dv = face.vs[i] - line.height(at: u)
                    let vertical = dv >= 0 ? 1 - 0.65 * smoothstep(0, 3 * e, dv) : 1 - smoothstep(0, 0.85 * e, -dv)
                    weight = (1 - smoothstep(0, e, outside)) * vertical
                }
                // Between the brows the stronger pull wins.
                let move = face.frame.up * (0.35 * e * weight)
                if (move * move).sum() > (field[i] * field[i]).sum() { field[i] = move }
            }
        }
        return field
    }

    /// Even-odd point-in-polygon test.
    static func contains(_ polygon: [Point2], _ p: Point2) -> Bool {
        var inside = false
        var j = polygon.count - 1
        for i in polygon.indices {
            let a = polygon[i], b = polygon[j]
            if (a.y > p.y) != (b.y > p.y), p.x < (b.x - a.x) * (p.y - a.y) / (b.y - a.y) + a.x { inside.toggle() }
            j = i
        }
        return inside
    }
}
