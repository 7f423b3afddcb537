import XCTest
import VeilCairo
import VeilCore
import VeilRender
@testable import VeilTracking

/// Veil's privacy invariants that hold before any network exists: identity does not pass through
/// the expression stream, the avatar depends on nothing else, and a frame without a face says so
/// and carries nothing.
final class PrivacyTests: XCTestCase {
    /// The expression each photo's owner makes "at rest": the still photo, two seconds at 30 fps.
    func restingExpression(_ photo: String) throws -> (VeilCore.Expression, [UInt8]) {
        let (image, _, _) = try Photos.image(photo).letterboxed(width: 640, height: 480)
        let capture = ExpressionCapture(tracker: try MediaPipeFaceTracker())
        var last: ExpressionCapture.Output?
        for i in 0..<60 { last = try capture.process(image, captureTimeMicros: UInt64(i) * 33_333) }
        let frame = try XCTUnwrap(last?.frame)
        XCTAssertEqual(frame.state, .tracked, photo)
        return (frame.expression, frame.encoded())
    }

    func render(_ expression: VeilCore.Expression) throws -> RGBImage {
        let canvas = try CairoCanvas(width: 640, height: 480)
        AvatarRenderer().render(expression, into: canvas, rect: Rect(x: 0, y: 0, width: 640, height: 480),
                                style: .mask, background: .solid(Color(white: 0.2)))
        return canvas.rgbImage()
    }

    func testDifferentPeopleAtRestLookTheSame() throws {
        let people = ["astronaut.png", "takeo.ppm", "lenna.png"]
        let resting = try people.map { try restingExpression($0) }
        let images = try resting.map { try render($0.0) }
        for a in 0..<people.count {
            for b in (a + 1)..<people.count {
                for shape in BlendShape.allCases {
                    XCTAssertEqual(resting[a].0[shape], resting[b].0[shape], accuracy: 0.1,
                                   "\(shape.name): \(people[a]) vs \(people[b])")
                }
                var same = 0
                let pa = images[a].pixels, pb = images[b].pixels
                for i in stride(from: 0, to: pa.count, by: 3)
                where abs(Int(pa[i]) - Int(pb[i])) <= 2 && abs(Int(pa[i + 1]) - Int(pb[i + 1])) <= 2 && abs(Int(pa[i + 2]) - Int(pb[i + 2])) <= 2 {
                    same += 1
                }
                let fraction = Double(same) / Double(pa.count / 3)
                print("avatar at rest, \(people[a]) vs \(people[b]): \(String(format: "%.2f", fraction * 100)) % identical pixels")
                XCTAssertGreaterThanOrEqual(fraction, 0.99, "\(people[a]) vs \(people[b])")
            }
        }
    }

    func testNoFaceMeansLostAndNothingElse() throws {
        let capture = ExpressionCapture(tracker: try MediaPipeFaceTracker())
        var blank = RGBImage(width: 640, height: 480)
        for i in blank.pixels.indices { blank.pixels[i] = UInt8(truncatingIfNeeded: 90 + (i / 1920) % 40) }
        for i in 0..<10 {
            let out = try capture.process(blank, captureTimeMicros: UInt64(i) * 33_333)
            XCTAssertEqual(out.frame.state, .lost)
            XCTAssertEqual(out.frame.expression, .neutral)
            let bytes = out.frame.encoded()
            XCTAssertEqual(bytes.count, 14, "a lost frame is the header and checksum only")
            XCTAssertEqual(try ExpressionFrame(decoding: bytes).state, .lost)
        }
        // A face coming into view is picked up on the next frame.
        let (face, _, _) = try Photos.image("takeo.ppm").letterboxed(width: 640, height: 480)
        XCTAssertEqual(try capture.process(face, captureTimeMicros: 400_000).frame.state, .tracked)
    }

    /// What an ExpressionFrame can hold: no field could carry an image or landmark geometry.
    func testExpressionFrameHoldsNoGeometry() {
        let frame = ExpressionFrame(sequence: 1, captureTimeMicros: 2, state: .tracked, expression: .neutral)
        let fields = Mirror(reflecting: frame).children.compactMap(\.label).sorted()
        XCTAssertEqual(fields, ["captureTimeMicros", "expression", "isVoiceDriven", "sequence", "state"])
        let expressionFields = Mirror(reflecting: frame.expression).children.compactMap(\.label).sorted()
        XCTAssertEqual(expressionFields, ["coefficients", "gaze", "headPose"])
        XCTAssertEqual(frame.expression.coefficients.count, BlendShape.allCases.count)
    }
}
