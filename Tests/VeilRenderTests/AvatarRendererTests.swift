import XCTest
import VeilCore
import VeilVision
import VeilRender
import VeilCairo

final class AvatarRendererTests: XCTestCase {
    let background = AvatarBackground.solid(Color(rgb8: 0x20, 0x28, 0x38))

    func testSameExpressionRendersIdenticalBytes() throws {
        let e = Sample.expression([.jawOpen: 0.4, .mouthSmileLeft: 0.7, .eyeBlinkRight: 0.3], yaw: 12, pitch: -5, roll: 3)
        for style in [AvatarStyle.mask, .sketch] {
            let a = try renderImage(e, style: style)
            let b = try renderImage(e, style: style)
            XCTAssertEqual(a.pixels, b.pixels)
            // A renderer that drew something else in between gives the same frame too.
            let canvas = try CairoCanvas(width: 640, height: 480)
            let renderer = AvatarRenderer()
            let rect = Rect(x: 0, y: 0, width: 640, height: 480)
            renderer.render(Sample.expression([.jawOpen: 1], yaw: -30), into: canvas, rect: rect, style: style, background: background)
            renderer.render(e, into: canvas, rect: rect, style: style, background: background)
            XCTAssertEqual(canvas.rgbImage().pixels, a.pixels)
        }
    }

    /// The privacy invariant: the expression is the renderer's only input, so two people at rest
    /// render the same avatar.
    func testJawOpenChangesMainlyTheMouth() throws {
        for style in [AvatarStyle.mask, .sketch] {
            let neutral = try renderImage(.neutral, style: style, background: background)
            let open = Sample.expression([.jawOpen: 1])
            let opened = try renderImage(open, style: style, background: background)
            let mouth = union(pose(.neutral).bounds(of: .outerLips), pose(open).bounds(of: .outerLips)).expanded(by: 4)
            let (inside, outside) = opened.difference(from: neutral, inside: mouth)
            let insideDensity = Double(inside) / Double(mouth.area)
            let outsideDensity = Double(outside) / Double(640 * 480 - Int(mouth.area))
            XCTAssertGreaterThan(inside, 0)
            XCTAssertGreaterThan(insideDensity, 20 * outsideDensity, "\(style): mouth \(insideDensity) vs rest \(outsideDensity)")
            XCTAssertGreaterThan(pose(open).mouthOpening, 40, "a wide-open jaw opens the lips by > 40 px at 640×480")
            XCTAssertLessThan(pose(.neutral).mouthOpening, 3)
        }
    }

    func testBlinkLeftClosesTheEyeOnTheViewersRight() throws {
        let neutral = try renderImage(.neutral)
        let blinkPose = pose(Sample.expression([.eyeBlinkLeft: 1]))
        let blinked = try renderImage(Sample.expression([.eyeBlinkLeft: 1]))
        let leftEye = pose(.neutral).bounds(of: .leftEye).expanded(by: 6)
        let rightEye = pose(.neutral).bounds(of: .rightEye).expanded(by: 6)
        XCTAssertGreaterThan(leftEye.center.x, 320, "the person's left eye is drawn on the viewer's right")
        XCTAssertLessThan(rightEye.center.x, 320)
        XCTAssertGreaterThan(blinked.difference(from: neutral, inside: leftEye).inside, 100_000)
        XCTAssertEqual(blinked.difference(from: neutral, inside: rightEye).inside, 0)
        // Closed: the eye opening has no height left.
        XCTAssertLessThan(blinkPose.bounds(of: .leftEye).height, 0.5 * pose(.neutral).bounds(of: .leftEye).height)
    }

    func testSmileChangesTheMouthAndNotTheBrows() throws {
        let neutral = try renderImage(.neutral)
        let smile = Sample.expression([.mouthSmileLeft: 1, .mouthSmileRight: 1])
        let smiled = try renderImage(smile)
        let rest = pose(.neutral), smiling = pose(smile)
        let mouth = union(rest.bounds(of: .outerLips), smiling.bounds(of: .outerLips)).expanded(by: 4)
        XCTAssertGreaterThan(smiled.difference(from: neutral, inside: mouth).inside, 50_000)
        for brow in [AvatarFeature.leftBrow, .rightBrow] {
            XCTAssertEqual(smiled.difference(from: neutral, inside: rest.bounds(of: brow).expanded(by: 4)).inside, 0)
        }
        // The corners go up (smaller y) and out.
        let restLips = rest.points(.outerLips), smileLips = smiling.points(.outerLips)
        let restCorners = (restLips[0], restLips[6]), smileCorners = (smileLips[0], smileLips[6])
        XCTAssertLessThan(smileCorners.0.y, restCorners.0.y - 5)
        XCTAssertLessThan(smileCorners.1.y, restCorners.1.y - 5)
        XCTAssertGreaterThan(smileCorners.1.x - smileCorners.0.x, restCorners.1.x - restCorners.0.x)
    }

    func testBrowsChangeTheBrowsAndNotTheMouth() throws {
        let neutral = try renderImage(.neutral)
        let rest = pose(.neutral)
        let mouth = rest.bounds(of: .outerLips).expanded(by: 6)
        for (values, moved) in [([BlendShape.browInnerUp: Float(1)], [AvatarFeature.leftBrow, .rightBrow]),
                                ([.browDownLeft: 1], [.leftBrow]), ([.browOuterUpRight: 1], [.rightBrow])] {
            let e = Sample.expression(values)
            let image = try renderImage(e)
            for brow in moved {
                let box = union(rest.bounds(of: brow), pose(e).bounds(of: brow)).expanded(by: 4)
                XCTAssertGreaterThan(image.difference(from: neutral, inside: box).inside, 20_000, "\(values) moves \(brow)")
            }
            XCTAssertEqual(image.difference(from: neutral, inside: mouth).inside, 0, "\(values) leaves the mouth alone")
        }
        XCTAssertLessThan(pose(Sample.expression([.browInnerUp: 1])).bounds(of: .leftBrow).y, rest.bounds(of: .leftBrow).y - 5)
        XCTAssertGreaterThan(pose(Sample.expression([.browDownLeft: 1])).bounds(of: .leftBrow).y, rest.bounds(of: .leftBrow).y + 5)
    }

    func testHeadPoseMovesFeaturesTheDocumentedWay() throws {
        func noseCentroid(_ p: AvatarPose) -> Point2 {
            let nose = p.points(.nose)
            return nose.reduce(Point2.zero, +) / Float(nose.count)
        }
        let rest = noseCentroid(pose(.neutral))
        // Positive yaw turns the face towards the viewer's right.
        XCTAssertGreaterThan(noseCentroid(pose(Sample.expression(yaw: 25))).x, rest.x + 30)
        XCTAssertLessThan(noseCentroid(pose(Sample.expression(yaw: -25))).x, rest.x - 30)
        // Positive pitch lifts the chin: the nose moves up the screen.
        XCTAssertLessThan(noseCentroid(pose(Sample.expression(pitch: 20))).y, rest.y - 15)
        // Positive roll is clockwise: the eye on the viewer's right goes down, the other up.
        let rolled = pose(Sample.expression(roll: 20))
        XCTAssertGreaterThan(rolled.bounds(of: .leftEye).center.y, pose(.neutral).bounds(of: .leftEye).center.y + 10)
        XCTAssertLessThan(rolled.bounds(of: .rightEye).center.y, pose(.neutral).bounds(of: .rightEye).center.y - 10)

        // In the pixels: the sketch's lines move right with positive yaw.
        let plain = AvatarBackground.solid(.black)
        let front = try renderImage(.neutral, style: .sketch, background: plain)
        let turned = try renderImage(Sample.expression(yaw: 25), style: .sketch, background: plain)
        let black = RGBImage(width: 640, height: 480)
        let a = try XCTUnwrap(front.changedCentroid(from: black)), b = try XCTUnwrap(turned.changedCentroid(from: black))
        XCTAssertGreaterThan(b.x, a.x + 10)
    }

    func testGazeMovesTheIrises() {
        let rest = pose(.neutral)
        let right = pose(Sample.expression(gaze: Gaze(x: 1, y: 0)))
        let up = pose(Sample.expression(gaze: Gaze(x: 0, y: 1)))
        for side in FaceSide.allCases {
            XCTAssertGreaterThan(right.irisCenter(side).x, rest.irisCenter(side).x + 5)
            XCTAssertLessThan(up.irisCenter(side).y, rest.irisCenter(side).y - 3)
        }
        // Without gaze, the eyeLook coefficients do the same: the left eye looking out looks right.
        let lookOut = pose(Sample.expression([.eyeLookOutLeft: 1, .eyeLookInRight: 1]))
        XCTAssertGreaterThan(lookOut.irisCenter(.left).x, rest.irisCenter(.left).x + 5)
        XCTAssertGreaterThan(lookOut.irisCenter(.right).x, rest.irisCenter(.right).x + 5)
    }

    func testEveryCoefficientIsDrawnAndStaysFinite() throws {
        let neutral = try renderImage(.neutral, width: 320, height: 240)
        var unchanged: [String] = []
        for shape in BlendShape.allCases {
            let e = Sample.expression([shape: 1])
            let p = pose(e)
            XCTAssertTrue(AvatarFeature.allCases.allSatisfy { p.points($0).allSatisfy { $0.x.isFinite && $0.y.isFinite } })
            let image = try renderImage(e, width: 320, height: 240)
            if image.pixels == neutral.pixels { unchanged.append(shape.name) }
        }
        // Coefficients the rig does not model on purpose (none today).
        XCTAssertEqual(unchanged, [])
    }

    func testHostileInputDoesNotCrash() throws {
        var e = Sample.expression([.jawOpen: 1, .mouthClose: 1, .eyeBlinkLeft: 1, .eyeWideLeft: 1, .mouthPucker: 1, .mouthSmileLeft: 1])
        e.headPose = HeadPose(yaw: .nan, pitch: .infinity, roll: -1e9)
        e.gaze = Gaze(x: .nan, y: 50)
        let canvas = try CairoCanvas(width: 64, height: 48)
        let renderer = AvatarRenderer()
        for rect in [Rect(x: 0, y: 0, width: 64, height: 48), Rect(x: 0, y: 0, width: 0, height: 0),
                     Rect(x: 10, y: 10, width: -5, height: 3), Rect(x: .nan, y: 0, width: .infinity, height: 10)] {
            for style in [AvatarStyle.mask, .sketch] {
                renderer.render(e, into: canvas, rect: rect, style: style, background: .none)
            }
        }
        let p = renderer.pose
        XCTAssertTrue(p.points(.faceOutline).allSatisfy { $0.x.isFinite && $0.y.isFinite })
        // Non-finite angles count as 0; finite ones are clamped to the rig's range.
        XCTAssertEqual(p.headPose.yaw, 0)
        XCTAssertEqual(p.headPose.pitch, 0)
        XCTAssertEqual(p.headPose.roll, -180)
        e.headPose = HeadPose(yaw: 500, pitch: -90, roll: 0)
        renderer.render(e, into: canvas, rect: Rect(x: 0, y: 0, width: 64, height: 48), style: .mask, background: .none)
        XCTAssertEqual(renderer.pose.headPose.yaw, AvatarRig.maxYaw)
        XCTAssertEqual(renderer.pose.headPose.pitch, -AvatarRig.maxPitch)
    }

    func testStylesRenderDifferently() throws {
        let e = Sample.expression([.mouthSmileLeft: 0.5, .mouthSmileRight: 0.5])
        let mask = try renderImage(e, style: .mask)
        let sketch = try renderImage(e, style: .sketch)
        var differing = 0
        for i in stride(from: 0, to: mask.pixels.count, by: 3) where mask.pixels[i] != sketch.pixels[i] { differing += 1 }
        XCTAssertGreaterThan(differing, 640 * 480 / 10)
        // The sketch is line art: few pixels are ink.
        let ink = SketchStyle().lineColor
        let plain = try renderImage(e, style: .sketch(SketchStyle(lineColor: ink)), background: .solid(.black))
        var lit = 0
        for i in stride(from: 0, to: plain.pixels.count, by: 3) where plain.pixels[i] > 128 { lit += 1 }
        XCTAssertGreaterThan(lit, 2_000)
        XCTAssertLessThan(lit, 640 * 480 / 10)
    }

    func testThumbnailStillShowsBlinkAndMouth() throws {
        // At 160×120 a blink and an open mouth still change many pixels in their regions.
        let small = Rect(x: 0, y: 0, width: 160, height: 120)
        let rest = AvatarRig.canonical.pose(for: .neutral, in: small)
        let neutral = try renderImage(.neutral, width: 160, height: 120)
        let blink = try renderImage(Sample.expression([.eyeBlinkLeft: 1, .eyeBlinkRight: 1]), width: 160, height: 120)
        let open = try renderImage(Sample.expression([.jawOpen: 1]), width: 160, height: 120)
        XCTAssertGreaterThan(blink.difference(from: neutral, inside: rest.bounds(of: .leftEye).expanded(by: 1)).inside, 2_000)
        XCTAssertGreaterThan(open.difference(from: neutral, inside: rest.bounds(of: .outerLips).expanded(by: 3)).inside, 3_000)
    }

    private func union(_ a: Rect, _ b: Rect) -> Rect {
        Rect(bounding: [Point2(a.x, a.y), Point2(a.x + a.width, a.y + a.height), Point2(b.x, b.y), Point2(b.x + b.width, b.y + b.height)])
    }
}
