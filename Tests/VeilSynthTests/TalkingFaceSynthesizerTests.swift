import Foundation
import VeilCore
import VeilVision
import VeilSynth
import XCTest

/// Behaviour of the synthesiser on a real photo with the mesh tracked on it (skipped until
/// .cache/veil/test-mesh/astronaut_mesh.json exists). Set VEIL_SYNTH_SAMPLES=1 to write sample
/// frames to /tmp/veil-synth-*.png.
final class TalkingFaceSynthesizerTests: XCTestCase {
    private func fixture() throws -> (synth: TalkingFaceSynthesizer, mesh: [Point3], topology: MeshTopology) {
        let (photo, mesh, topology) = try TestImages.astronaut()
        return (try TalkingFaceSynthesizer(photo: photo, mesh: mesh, topology: topology), mesh, topology)
    }

    private func box(_ mesh: [Point3], _ indices: [Int], pad: Float = 0) -> Rect {
        let r = Rect(bounding: indices.map { Point2(mesh[$0].x, mesh[$0].y) })
        return Rect(x: r.x - pad, y: r.y - pad, width: r.width + 2 * pad, height: r.height + 2 * pad)
    }

    private func distance(_ a: Point3, _ b: Point3) -> Float {
        let d = SIMD2(a.x - b.x, a.y - b.y); return (d * d).sum().squareRoot()
    }

    func testNeutralReproducesThePhoto() throws {
        let (synth, _, _) = try fixture()
        let frame = synth.frame(at: .neutral)
        XCTAssertLessThan(TestImages.meanAbsDiff(frame, synth.photo), 0.05)
        let worst = zip(frame.pixels, synth.photo.pixels).map { abs(Int($0) - Int($1)) }.max() ?? 0
        XCTAssertLessThanOrEqual(worst, 2)
        TestImages.saveSample(frame, "neutral")
    }

    func testJawDropOpensTheMouthAndLeavesTheForeheadAlone() throws {
        let (synth, mesh, topology) = try fixture()
        let neutral = synth.frame(at: .neutral)
        let open = synth.frame(at: ScriptState(jawDrop: 0.1))
        TestImages.saveSample(open, "jaw010")
        let regions = topology.regionIndices
        let lips = (regions[.innerLips] ?? []) + (regions[.outerLips] ?? [])
        let mouthAndChin = box(mesh, lips + [152])
        let brows = (regions[.leftEyebrow] ?? []) + (regions[.rightEyebrow] ?? [])
        let browBox = box(mesh, brows)
        let forehead = Rect(x: browBox.x, y: mesh[10].y, width: browBox.width, height: browBox.y - mesh[10].y)
        let mouthDiff = TestImages.meanAbsDiff(open, neutral, in: mouthAndChin)
        let foreheadDiff = TestImages.meanAbsDiff(open, neutral, in: forehead)
        XCTAssertGreaterThan(mouthDiff, 15, "mouth and chin change")
        XCTAssertLessThan(foreheadDiff, 0.5, "forehead stays")
        // The gap between the inner lips is dark: the mouth is open.
        let moved = synth.mesh(at: ScriptState(jawDrop: 0.1))
        let inside = Rect(x: moved[13].x - 3, y: moved[13].y + 0.55 * (moved[14].y - moved[13].y), width: 6,
                          height: 0.3 * (moved[14].y - moved[13].y))
        XCTAssertLessThan(TestImages.meanBrightness(open, in: inside), TestImages.meanBrightness(neutral, in: box(mesh, [13, 14])) * 0.6)
    }

    func testBlinkChangesOnlyTheEyes() throws {
        let (synth, mesh, topology) = try fixture()
        let neutral = synth.frame(at: .neutral)
        let shut = synth.frame(at: ScriptState(blinkLeft: 1, blinkRight: 1))
        TestImages.saveSample(shut, "blink")
        let regions = topology.regionIndices
        for eye in [FaceRegion.leftEye, .rightEye] {
            let diff = TestImages.meanAbsDiff(shut, neutral, in: box(mesh, regions[eye] ?? []))
            XCTAssertGreaterThan(diff, 12, "\(eye) changes")
        }
        let mouth = box(mesh, (regions[.outerLips] ?? []) + [152])
        XCTAssertLessThan(TestImages.meanAbsDiff(shut, neutral, in: mouth), 0.5)
        // One eye at a time.
        let leftOnly = synth.frame(at: ScriptState(blinkLeft: 1))
        XCTAssertGreaterThan(TestImages.meanAbsDiff(leftOnly, neutral, in: box(mesh, regions[.leftEye] ?? [])), 12)
        XCTAssertLessThan(TestImages.meanAbsDiff(leftOnly, neutral, in: box(mesh, regions[.rightEye] ?? [])), 0.5)
    }

    /// A glance moves what lies inside the eyes' openings and nothing else; the iris's dark
    /// middle moves the way the eyes turn.
    func testAGlanceMovesOnlyInsideTheEyes() throws {
        let (synth, mesh, topology) = try fixture()
        let neutral = synth.frame(at: .neutral)
        let regions = topology.regionIndices
        let eyes = [FaceRegion.leftEye, .rightEye].map { box(mesh, regions[$0] ?? []) }
        for yaw in [20.0, -20.0] {
            let glance = synth.frame(at: ScriptState(gazeYaw: yaw))
            TestImages.saveSample(glance, "gaze\(Int(yaw))")
            XCTAssertEqual(synth.mesh(at: ScriptState(gazeYaw: yaw)), synth.mesh(at: .neutral), "the lids and the face stay")
            for eye in eyes {
                XCTAssertGreaterThan(TestImages.meanAbsDiff(glance, neutral, in: eye), 3, "\(yaw)°: the eye changes")
                // The darkest column of the eye's middle third (the iris) moves by 0.4 × sin 20° of
                // the eye's width, towards image right for a positive yaw.
                let shift = darkestColumn(glance, in: eye) - darkestColumn(neutral, in: eye)
                let expected = Float(0.4 * sin(yaw * .pi / 180)) * eye.width
                print("glance \(yaw)°: the iris moved \(shift) px, expected about \(expected)")
                XCTAssertEqual(shift, expected, accuracy: max(0.5 * abs(expected), 1.5))
            }
            let outside = Rect(x: 0, y: 0, width: Float(neutral.width), height: min(eyes[0].y, eyes[1].y) - 1)
            XCTAssertEqual(TestImages.meanAbsDiff(glance, neutral, in: outside), 0, "above the eyes nothing changes")
            let mouth = box(mesh, (regions[.outerLips] ?? []) + [152])
            XCTAssertEqual(TestImages.meanAbsDiff(glance, neutral, in: mouth), 0)
        }
    }

    /// The x of the darkest column (mean over the box's rows) within the middle of `box`.
    private func darkestColumn(_ image: RGBImage, in box: Rect) -> Float {
        let x0 = Int(box.x + 0.2 * box.width), x1 = Int(box.x + 0.8 * box.width)
        let y0 = Int(box.y + 0.25 * box.height), y1 = max(y0 + 1, Int(box.y + 0.75 * box.height))
        var best = (x: x0, value: Float.infinity)
        for x in x0...x1 {
            var sum: Float = 0
            for y in y0..<y1 {
                let i = (y * image.width + x) * 3
                sum += Float(image.pixels[i]) + Float(image.pixels[i + 1]) + Float(image.pixels[i + 2])
            }
            if sum < best.value { best = (x, sum) }
        }
        return Float(best.x)
    }

    func testMeshFollowsThePhysicalScript() throws {
        let (synth, mesh, _) = try fixture()
        let h = synth.faceHeight
        XCTAssertEqual(h, distance(mesh[10], mesh[152]), accuracy: 1e-3)
        XCTAssertEqual(synth.mesh(at: .neutral), mesh)

        let jaw = synth.mesh(at: ScriptState(jawDrop: 0.1))
        XCTAssertEqual(distance(jaw[152], mesh[152]), 0.1 * h, accuracy: 0.01 * h, "chin drops 0.1 face height")
        XCTAssertEqual(distance(jaw[14], mesh[14]), 0.1 * h, accuracy: 0.01 * h, "lower lip moves fully")
        XCTAssertLessThan(distance(jaw[13], mesh[13]), 0.01 * h, "upper lip barely moves")
        XCTAssertLessThan(distance(jaw[10], mesh[10]), 1e-3)
        XCTAssertGreaterThan(jaw[152].y, mesh[152].y)

        let shut = synth.mesh(at: ScriptState(blinkLeft: 1, blinkRight: 1))
        XCTAssertLessThan(distance(shut[159], shut[145]), 0.05 * distance(mesh[159], mesh[145]))
        XCTAssertLessThan(distance(shut[386], shut[374]), 0.05 * distance(mesh[386], mesh[374]))
        XCTAssertLessThan(shut[145].y, mesh[145].y, "lower lid rises a little")

        let width = distance(mesh[61], mesh[291])
        let smile = synth.mesh(at: ScriptState(smile: 1))
        XCTAssertEqual(distance(smile[61], mesh[61]), 0.25 * width, accuracy: 0.02 * width)
        XCTAssertLessThan(smile[61].x, mesh[61].x); XCTAssertGreaterThan(smile[291].x, mesh[291].x)
        XCTAssertLessThan(smile[61].y, mesh[61].y); XCTAssertLessThan(smile[291].y, mesh[291].y)
        XCTAssertLessThan(distance(smile[0], mesh[0]), 0.06 * width, "lip centre hardly moves")

        let brow = synth.mesh(at: ScriptState(browRaise: 1))
        XCTAssertEqual(distance(brow[105], mesh[105]), 0.35 * distance(mesh[105], mesh[159]), accuracy: 0.1 * distance(mesh[105], mesh[159]))
        XCTAssertLessThan(brow[105].y, mesh[105].y)
        XCTAssertLessThan(distance(brow[159], mesh[159]), 0.02 * h, "lid margin stays")

        let turned = synth.mesh(at: ScriptState(headYaw: 10))
        XCTAssertGreaterThan(turned[1].x - mesh[1].x, 0.02 * h, "nose moves towards the viewer's right")
        XCTAssertEqual(turned[1].y, mesh[1].y, accuracy: 0.5)

        // Out-of-range and NaN values are clamped, not drawn.
        let wild = ScriptState(jawDrop: .nan, blinkLeft: 7, smile: -3, headYaw: 1e9)
        XCTAssertEqual(synth.mesh(at: wild), synth.mesh(at: ScriptState(blinkLeft: 1, headYaw: 30)))
        XCTAssertEqual(synth.frame(at: wild).pixels.count, synth.photo.pixels.count)
    }

    func testBackgroundOutsideTheSkirtNeverChanges() throws {
        let (synth, mesh, _) = try fixture()
        var frame = RGBImage(width: 0, height: 0)
        let state = ScriptState(jawDrop: 0.12, blinkLeft: 1, blinkRight: 0.5, smile: 1, browRaise: 1, headYaw: -12)
        synth.frame(at: state, into: &frame)
        TestImages.saveSample(frame, "combined")
        let face = Rect(bounding: mesh.map { Point2($0.x, $0.y) })
        // Well outside the face (twice its size around its centre) nothing moves.
        let w = synth.photo.width
        for y in stride(from: 0, to: synth.photo.height, by: 3) {
            for x in stride(from: 0, to: w, by: 3) {
                let p = Point2(Float(x), Float(y))
                let d = p - face.center
                guard abs(d.x) > face.width, abs(d.y) > face.height else { continue }
                let i = (y * w + x) * 3
                XCTAssertEqual(frame.pixels[i], synth.photo.pixels[i]); XCTAssertEqual(frame.pixels[i + 2], synth.photo.pixels[i + 2])
            }
        }
    }

    func testFaceCutByTheFrameEdge() throws {
        let (photo, mesh, topology) = try TestImages.astronaut()
        // Keep only x ≥ 220 and y < 160: half the face and the chin lie outside the frame.
        let ox = 220, w = photo.width - ox, h = 160
        var cut = RGBImage(width: w, height: h)
        for y in 0..<h {
            for x in 0..<w {
                for c in 0..<3 { cut.pixels[(y * w + x) * 3 + c] = photo.pixels[(y * photo.width + x + ox) * 3 + c] }
            }
        }
        let shifted = mesh.map { Point3($0.x - Float(ox), $0.y, $0.z) }
        let synth = try TalkingFaceSynthesizer(photo: cut, mesh: shifted, topology: topology)
        XCTAssertLessThan(TestImages.meanAbsDiff(synth.frame(at: .neutral), cut), 0.05)
        let moved = synth.frame(at: ScriptState(jawDrop: 0.12, blinkLeft: 1, smile: 1, browRaise: 1, headYaw: 12))
        XCTAssertGreaterThan(TestImages.meanAbsDiff(moved, cut), 0.5)
    }

    func testRejectsBadMeshes() throws {
        let (photo, mesh, topology) = try TestImages.astronaut()
        XCTAssertThrowsError(try TalkingFaceSynthesizer(photo: photo, mesh: Array(mesh.prefix(100)), topology: topology))
        var broken = mesh; broken[5].x = .nan
        XCTAssertThrowsError(try TalkingFaceSynthesizer(photo: photo, mesh: broken, topology: topology))
        XCTAssertThrowsError(try TalkingFaceSynthesizer(photo: RGBImage(width: 0, height: 0), mesh: mesh, topology: topology))
        let dot = [Point3](repeating: Point3(10, 10, 0), count: 468)
        XCTAssertThrowsError(try TalkingFaceSynthesizer(photo: photo, mesh: dot, topology: topology))
    }

    /// Writes frames of the built-in script as samples and prints ms/frame at 640×480 (not asserted).
    func testTalkingClipSamplesAndTiming() throws {
        let (photo, mesh, topology) = try TestImages.astronaut()
        // A webcam-like 640×480 frame: the photo doubled, cropped so the face is ~210 px tall.
        let scale = 2, ox = 128, oy = 40
        var big = RGBImage(width: 640, height: 480)
        for y in 0..<480 {
            for x in 0..<640 {
                let sx = min((x + ox) / scale, photo.width - 1), sy = min((y + oy) / scale, photo.height - 1)
                let i = (y * 640 + x) * 3, j = (sy * photo.width + sx) * 3
                big.pixels[i] = photo.pixels[j]; big.pixels[i + 1] = photo.pixels[j + 1]; big.pixels[i + 2] = photo.pixels[j + 2]
            }
        }
        let bigMesh = mesh.map { Point3($0.x * Float(scale) - Float(ox), $0.y * Float(scale) - Float(oy), $0.z * Float(scale)) }
        let synth = try TalkingFaceSynthesizer(photo: big, mesh: bigMesh, topology: topology)
        let script = ExpressionScript.talking
        var frame = RGBImage(width: 640, height: 480)
        let start = Date()
        for k in 0..<script.frameCount { synth.frame(at: script.state(ofFrame: k), into: &frame) }
        let ms = Date().timeIntervalSince(start) * 1000 / Double(script.frameCount)
        print("TalkingFaceSynthesizer 640x480, face \(Int(synth.faceHeight)) px tall: \(String(format: "%.2f", ms)) ms/frame over \(script.frameCount) frames")
        for (name, t) in [("t1.38-blink", 1.38), ("t2.5-brow", 2.5), ("t4.4-turn-smile", 4.4), ("t6.3-speech", 6.3)] {
            synth.frame(at: script.state(at: t), into: &frame)
            TestImages.saveSample(frame, "640-" + name)
        }
        let wide = synth.frame(at: ScriptState(jawDrop: 0.12, smile: 0.5))
        TestImages.saveSample(wide, "640-jaw012-smile05")
    }
}
