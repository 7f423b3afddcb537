import Foundation
import VeilCore
import VeilVision

/// Animates a still photo of a face into a talking clip with known ground truth.
///
/// The photo's 468-point MediaPipe mesh (tracked on the photo by the caller) is moved by the
/// physical displacement of each `FacialAction`, scaled by the photo's own face size, and the photo
/// is warped triangle by triangle onto the moved mesh (`PiecewiseAffineWarp`). The mesh's holes are
/// closed for the purpose: strips between the eyelids collapse when the eyes shut, and the inside of
/// the inner-lip loop is painted as a dark mouth (with a hint of upper teeth) as far as it opens
/// beyond the photo's own mouth. A ring of fixed "skirt" points outside the face oval blends the
/// face's motion into the untouched background.
///
/// The zero of every action is the photo itself: `ScriptState.neutral` reproduces it.
public struct TalkingFaceSynthesizer: Sendable {
    /// The photo being animated.
    public let photo: RGBImage
    /// The mesh tracked on the photo, image pixels and depth.
    public let photoMesh: [Point3]
    let rig: FaceRig

    /// A synthesiser for `photo` with `mesh`, its 468 MediaPipe landmarks in the photo's pixels.
    ///
    /// - Throws: `VeilError.invalidInput` when the photo is empty, the mesh does not have 468
    ///   finite points or the face is tiny; `VeilError.invalidResource` when `topology` lacks the
    ///   outlines of the eyes, lips, brows or face oval.
    public init(photo: RGBImage, mesh: [Point3], topology: MeshTopology) throws {
        guard photo.width > 0, photo.height > 0, photo.pixels.count == photo.width * photo.height * 3 else {
            throw VeilError.invalidInput("the photo is empty")
        }
        self.photo = photo
        photoMesh = mesh
        rig = try FaceRig(mesh: mesh, topology: topology, imageWidth: photo.width, imageHeight: photo.height)
    }

    /// Face height in the photo (forehead top to chin), pixels: the unit of `jawDrop`.
    public var faceHeight: Float { rig.faceHeight }

    /// The mesh as it is drawn for `state`: where each of the 468 landmarks lies in that frame
    /// (x, y in pixels; depth turned with the head). Values outside an action's `range` are
    /// clamped to it.
    public func mesh(at state: ScriptState) -> [Point3] { rig.mesh(at: state, photoMesh: photoMesh) }

    /// Renders the frame for `state` into `output`, which is resized to the photo's size; its
    /// storage is reused from call to call.
    public func frame(at state: ScriptState, into output: inout RGBImage) {
        let moved = mesh(at: state)
        var destination = rig.basePoints
        for i in moved.indices { destination[i] = Point2(moved[i].x, moved[i].y) }
        output.resize(width: photo.width, height: photo.height)
        Raster.copy(photo, into: &output)
        drawMouth(destination, into: &output)
        Raster.warp(source: photo, triangles: rig.warpTriangles, sourcePoints: rig.basePoints,
                    destinationPoints: destination, into: &output)
        turnEyes(state.clamped, destination, into: &output)
    }

    /// The frame for `state` as a new image.
    public func frame(at state: ScriptState) -> RGBImage {
        var output = RGBImage(width: photo.width, height: photo.height)
        frame(at: state, into: &output)
        return output
    }

    /// Fills the inner-lip loop: the photo's own mouth, stretched, under a dark interior whose
    /// opacity grows with how much wider the lips stand apart than in the photo.
    private func drawMouth(_ destination: [Point2], into output: inout RGBImage) {
        let lips = rig.innerLips
        let source = rig.basePoints
        let count = destination.count
        // Per vertex: depth below the upper lip and local gap (pixels), lateral centrality, opacity.
        var below = [Float](repeating: 0, count: count), gap = below, central = below, opacity = below
        let fullyOpen = max(0.035 * rig.faceHeight, 2)
        func distance(_ a: Point2, _ b: Point2) -> Float { let d = a - b; return (d * d).sum().squareRoot() }
        func attributes(_ chain: [Int], _ partners: [ChainPosition], _ other: [Int], isLower: Bool) {
            let last = Float(max(chain.count - 1, 1))
            for (k, i) in chain.enumerated() {
                let dst = distance(destination[i], ChainPair.position(partners[k], on: other, destination))
                let src = distance(source[i], ChainPair.position(partners[k], on: other, source))
                gap[i] = dst
                below[i] = isLower ? dst : 0
                central[i] = sin(Float.pi * Float(k) / last)
                opacity[i] = smoothstep(0.5, fullyOpen, dst - src)
            }
        }
        attributes(lips.upper, lips.upperPartners, lips.lower, isLower: false)
        attributes(lips.lower, lips.lowerPartners, lips.upper, isLower: true)
        let teeth = 0.1 * rig.mouthWidth
        let w = photo.width, h = photo.height
        photo.pixels.withUnsafeBufferPointer { srcBuf in
            output.pixels.withUnsafeMutableBufferPointer { dstBuf in
                guard let src = srcBuf.baseAddress, let dst = dstBuf.baseAddress else { return }
                for t in rig.mouthTriangles {
                    let d0 = destination[t.0], d1 = destination[t.1], d2 = destination[t.2]
                    guard opacity[t.0] + opacity[t.1] + opacity[t.2] > 0,
                          let m = Raster.affine(from: d0, d1, d2, to: source[t.0], source[t.1], source[t.2]),
                          let depthMap = Raster.affine(from: d0, d1, d2, to: Point2(below[t.0], gap[t.0]),
                                                       Point2(below[t.1], gap[t.1]), Point2(below[t.2], gap[t.2])),
                          let lookMap = Raster.affine(from: d0, d1, d2, to: Point2(central[t.0], opacity[t.0]),
                                                      Point2(central[t.1], opacity[t.1]), Point2(central[t.2], opacity[t.2]))
                    else { continue }
                    Raster.forEachPixel(d0, d1, d2, in: dst, width: w, height: h) { p, o in
                        let s = m.a * p.x + m.b * p.y + m.c
                        let dg = depthMap.a * p.x + depthMap.b * p.y + depthMap.c
                        let lo = lookMap.a * p.x + lookMap.b * p.y + lookMap.c
                        let (r, g, b) = Raster.sample(src, w, h, s.x, s.y)
                        let inside = Self.mouthColour(below: dg.x, gap: dg.y, central: lo.x, teeth: teeth)
                        let a = min(max(lo.y, 0), 1)
                        o[0] = Raster.byte(r + (inside.x - r) * a)
                        o[1] = Raster.byte(g + (inside.y - g) * a)
                        o[2] = Raster.byte(b + (inside.z - b) * a)
                    }
                }
            }
        }
    }

    /// The pupils' travel for a gaze of `state`, in eye widths: an eyeball's radius is about 0.4 of
    /// the eye's opening (12 of 30 mm), so an eye turned by θ moves its pupil 0.4 × sin θ.
    static func pupilTravel(_ state: ScriptState) -> (along: Float, up: Float) {
        (0.4 * Float(sin(state.gazeYaw * .pi / 180)), 0.4 * Float(sin(state.gazePitch * .pi / 180)))
    }

    /// Turns the eyes for `state`'s gaze: inside each eye's opening the warped picture slides by
    /// the pupil's travel, fully over the middle of the opening and not at all at the corners and
    /// the lid margins, so the iris moves while the sclera gives way around it and the lids stay.
    /// Every pixel reads the picture at its own position less the slide there, which stays one to
    /// one (the slide changing by less than a pixel per pixel) up to about 25° sideways and 10° up
    /// or down, as far as the opening lets a pupil go without the lids following.
    private func turnEyes(_ state: ScriptState, _ destination: [Point2], into output: inout RGBImage) {
        let travel = Self.pupilTravel(state)
        guard travel.along != 0 || travel.up != 0 else { return }
        let unturned = output
        let w = output.width, h = output.height
        let up = rig.frame.up
        for (eye, opening) in rig.eyes {
            guard let first = eye.upper.first, let last = eye.upper.last else { continue }
            let axis = destination[last] - destination[first]
            let width = (axis * axis).sum().squareRoot()
            guard width >= 2 else { continue }
            let along = axis / width
            var normal = Point2(-along.y, along.x)
            if (normal * up).sum() < 0 { normal = -normal }
            let slide = along * (travel.along * width) + normal * (travel.up * width)
            // Per lid point: the fraction of the way from corner to corner, and the side (0 the
            // lower lid, 1 the upper; the corners count as upper, and do not move either way).
            var local: [Int: Point2] = [:]
            for (chain, side) in [(eye.lower, Float(0)), (eye.upper, 1)] {
                for i in chain { local[i] = Point2(((destination[i] - destination[first]) * along).sum() / width, side) }
            }
            unturned.pixels.withUnsafeBufferPointer { srcBuf in
                output.pixels.withUnsafeMutableBufferPointer { dstBuf in
                    guard let src = srcBuf.baseAddress, let dst = dstBuf.baseAddress else { return }
                    for t in opening {
                        let d0 = destination[t.0], d1 = destination[t.1], d2 = destination[t.2]
                        guard let l0 = local[t.0], let l1 = local[t.1], let l2 = local[t.2],
                              let map = Raster.affine(from: d0, d1, d2, to: l0, l1, l2) else { continue }
                        Raster.forEachPixel(d0, d1, d2, in: dst, width: w, height: h) { p, o in
                            let c = map.a * p.x + map.b * p.y + map.c
                            let weight = smoothstep(0, 0.3, c.x) * smoothstep(0, 0.3, 1 - c.x)
                                * smoothstep(0, 0.35, c.y) * smoothstep(0, 0.35, 1 - c.y)
                            let from = p - slide * weight
                            let (r, g, b) = Raster.sample(src, w, h, from.x, from.y)
                            o[0] = Raster.byte(r); o[1] = Raster.byte(g); o[2] = Raster.byte(b)
                        }
                    }
                }
            }
        }
    }

    /// Colour inside an open mouth: red-brown at the lips, darkest deep in the middle, upper teeth
    /// showing below the upper lip where the mouth is open enough.
    @inline(__always)
    static func mouthColour(below: Float, gap: Float, central: Float, teeth: Float) -> SIMD3<Float> {
        let c = min(max(central, 0), 1)
        let rel = min(max(below / max(gap, 1), 0), 1)
        let deep = min(1, 4 * rel * (1 - rel) * 1.3) * (0.4 + 0.6 * c)
        let edge = SIMD3<Float>(105, 42, 38), dark = SIMD3<Float>(32, 11, 12)
        var colour = edge + (dark - edge) * deep
        // Teeth: a band as tall as a tenth of the mouth width under the upper lip, fading towards
        // the corners and never taller than half the opening.
        let band = min(teeth, 0.5 * gap)
        let tooth = (1 - smoothstep(0.7 * band, band, below)) * smoothstep(0.2, 0.6, c) * smoothstep(0.4 * teeth, teeth, gap)
        let enamel = SIMD3<Float>(212, 204, 190) * (0.7 + 0.3 * c)
        colour += (enamel - colour) * tooth
        return colour
    }
}
