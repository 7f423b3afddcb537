import XCTest
import VeilCore
import VeilVision
import VeilSynth
@testable import VeilTracking

/// The privacy invariant "when no face is tracked, frames say `lost`; nothing else is sent", for a
/// face that leaves the view in the middle of a performance: the frames that follow are the
/// header-only lost frame, with no last expression held over, until the face comes back.
final class LostFaceTests: XCTestCase {
    func testAFaceLeavingMidPerformanceSendsOnlyLostFrames() throws {
        let tracker = try MediaPipeFaceTracker()
        let (photo, _, _) = try Photos.image("lenna.png").letterboxed(width: 640, height: 480)
        let mesh = try XCTUnwrap(try tracker.landmarks(inStill: photo)?.mesh, "no face in lenna.png")
        let synth = try TalkingFaceSynthesizer(photo: photo, mesh: mesh, topology: try VeilResources.meshTopology())
        tracker.reset()
        let capture = ExpressionCapture(tracker: tracker)
        var empty = RGBImage(width: 640, height: 480)
        for i in empty.pixels.indices { empty.pixels[i] = UInt8(truncatingIfNeeded: 70 + (i / 1920) % 50) }
        var image = RGBImage(width: 640, height: 480)
        var sequence: [(expected: ExpressionFrame.State, bytes: [UInt8])] = []
        // 2 s of talking with a smile at its height, half a second without anyone in view (each such
        // frame runs the detector over the whole picture), then the face again.
        for n in 0..<100 {
            let t = Double(n) / 30
            let face = n < 60 || n >= 75
            if face {
                synth.frame(at: ScriptState(jawDrop: 0.04 + 0.04 * sin(t * 9), smile: n >= 45 && n < 60 ? 0.8 : 0), into: &image)
            }
            let out = try capture.process(face ? image : empty, captureTimeMicros: UInt64(n) * 33_333)
            sequence.append((face ? .tracked : .lost, out.frame.encoded()))
        }
        let lastTracked = try ExpressionFrame(decoding: sequence[59].bytes)
        XCTAssertEqual(lastTracked.state, .tracked)
        XCTAssertGreaterThan(lastTracked.expression[.mouthSmileLeft], 0.2, "the face was smiling when it left")
        for (n, item) in sequence.enumerated() {
            XCTAssertLessThanOrEqual(item.bytes.count, ExpressionFrame.maximumEncodedSize)
            let frame = try ExpressionFrame(decoding: item.bytes)
            guard item.expected == .lost else { continue }
            XCTAssertEqual(frame.state, .lost, "frame \(n): no face in view")
            XCTAssertEqual(item.bytes.count, 14, "frame \(n): a lost frame is the header and checksum only")
            XCTAssertEqual(frame.expression, .neutral, "frame \(n)")
            XCTAssertFalse(frame.isVoiceDriven)
        }
        // Back in view: tracked again within a few frames.
        let back = try sequence[75..<85].map { try ExpressionFrame(decoding: $0.bytes).state }
        XCTAssertTrue(back.suffix(5).allSatisfy { $0 == .tracked }, "\(back)")
    }
}
