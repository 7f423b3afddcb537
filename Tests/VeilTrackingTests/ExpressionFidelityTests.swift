import XCTest
import VeilCore
import VeilVision
import VeilSynth
@testable import VeilTracking

/// Expression recovery on talking-face clips synthesised from real photos with a scripted
/// timeline: the tracker and estimator must find the scripted movements in the warped pixels.
final class ExpressionFidelityTests: XCTestCase {
    struct Run {
        var truth: [GroundTruthFrame]
        var expressions: [VeilCore.Expression?]
        /// jawOpen implied by the synthetic mesh's own lip gap, in the estimator's units.
        var expectedJaw: [Float]
    }

    static var runs: [String: Run] = [:]

    /// Synthesises the built-in talking script on `photo` (letterboxed to 640×480) and tracks it.
    static func run(_ photo: String) throws -> Run {
        if let cached = runs[photo] { return cached }
        let tracker = try MediaPipeFaceTracker()
        let topology = try VeilResources.meshTopology()
        let (image, _, _) = try Photos.image(photo).letterboxed(width: 640, height: 480)
        guard let mesh = try tracker.landmarks(inStill: image)?.mesh else { throw VeilError.invalidInput("no face in \(photo)") }
        let synth = try TalkingFaceSynthesizer(photo: image, mesh: mesh, topology: topology)
        let script = ExpressionScript.talking
        let capture = ExpressionCapture(tracker: tracker, privacy: .off)
        var frame = RGBImage(width: 640, height: 480)
        var run = Run(truth: script.groundTruth, expressions: [], expectedJaw: [])
        let neutralGap = FaceMeasurements(topology.landmarks(mesh: synth.mesh(at: .neutral), leftPupil: nil, rightPupil: nil, confidence: 1))?.lipGap ?? 0
        let gain = ExpressionEstimator().gains.jawOpen
        for truth in run.truth {
            synth.frame(at: truth.state, into: &frame)
            let out = try capture.process(frame, captureTimeMicros: UInt64(truth.timeSeconds * 1e6))
            run.expressions.append(out.frame.state == .tracked ? out.frame.expression : nil)
            let gap = FaceMeasurements(topology.landmarks(mesh: synth.mesh(at: truth.state), leftPupil: nil, rightPupil: nil, confidence: 1))?.lipGap ?? 0
            run.expectedJaw.append(min(max((gap - neutralGap) / gain, 0), 1))
        }
        runs[photo] = run
        return run
    }

    static let photos = ["astronaut.png", "takeo.ppm"]

    func testEveryFrameTracked() throws {
        for photo in Self.photos {
            let run = try Self.run(photo)
            let tracked = run.expressions.compactMap { $0 }.count
            XCTAssertGreaterThanOrEqual(Double(tracked) / Double(run.expressions.count), 0.98, photo)
        }
    }

    func testJawOpenFollowsTheScript() throws {
        for photo in Self.photos {
            let run = try Self.run(photo)
            var errors: [Float] = []
            for (e, expected) in zip(run.expressions, run.expectedJaw) {
                guard let e else { continue }
                errors.append(abs(e[.jawOpen] - expected))
            }
            let mae = errors.reduce(0, +) / Float(max(errors.count, 1))
            print("\(photo): jawOpen MAE \(mae), expected max \(run.expectedJaw.max() ?? 0)")
            XCTAssertLessThanOrEqual(mae, 0.12, photo)
            XCTAssertGreaterThan(run.expectedJaw.max() ?? 0, 0.3, "the script must open the mouth well")
        }
    }

    func testBlinksAreFound() throws {
        for photo in Self.photos {
            let run = try Self.run(photo)
            let truth = Self.events(run.truth.map { max($0.blinkLeft, $0.blinkRight) > 0.5 })
            let found = Self.events(run.expressions.map { e in
                guard let e else { return false }
                return (e[.eyeBlinkLeft] + e[.eyeBlinkRight]) / 2 > 0.5
            })
            let matchedTruth = truth.filter { t in found.contains { Self.overlap($0, t, slack: 3) } }.count
            let matchedFound = found.filter { f in truth.contains { Self.overlap($0, f, slack: 3) } }.count
            let recall = Double(matchedTruth) / Double(max(truth.count, 1))
            let precision = Double(matchedFound) / Double(max(found.count, 1))
            print("\(photo): blinks scripted \(truth.count) found \(found.count) recall \(recall) precision \(precision)")
            XCTAssertGreaterThanOrEqual(truth.count, 3)
            XCTAssertGreaterThanOrEqual(recall, 0.9, photo)
            XCTAssertGreaterThanOrEqual(precision, 0.9, photo)
        }
    }

    func testSmileAndBrowRaiseCorrelateWithTheScript() throws {
        for photo in Self.photos {
            let run = try Self.run(photo)
            var smileTruth: [Double] = [], smile: [Double] = [], browTruth: [Double] = [], brow: [Double] = []
            for (t, e) in zip(run.truth, run.expressions) {
                guard let e else { continue }
                smileTruth.append(t.smile); smile.append(Double(e[.mouthSmileLeft] + e[.mouthSmileRight]) / 2)
                browTruth.append(t.browRaise)
                brow.append(Double(e[.browInnerUp] + e[.browOuterUpLeft] + e[.browOuterUpRight]) / 3)
            }
            let rs = Self.correlation(smileTruth, smile), rb = Self.correlation(browTruth, brow)
            print("\(photo): smile r = \(rs), brow raise r = \(rb)")
            XCTAssertGreaterThanOrEqual(rs, 0.8, photo)
            XCTAssertGreaterThanOrEqual(rb, 0.8, photo)
        }
    }

    func testHeadTurnIsMeasured() throws {
        for photo in Self.photos {
            let run = try Self.run(photo)
            var truth: [Double] = [], yaw: [Double] = []
            for (t, e) in zip(run.truth, run.expressions) {
                guard let e else { continue }
                truth.append(t.headYaw); yaw.append(Double(e.headPose.yaw))
            }
            let r = Self.correlation(truth, yaw)
            print("\(photo): yaw r = \(r)")
            XCTAssertGreaterThanOrEqual(r, 0.8, photo)
        }
    }

    /// Glances of the synthesised eyes reach the estimator's gaze: sideways glances of 10–25°
    /// either way, held a second, on a face that otherwise keeps still.
    func testGlancesReachTheGaze() throws {
        let script = try ExpressionScript(parsing: """
            duration 9
            gazeYaw 0:0 1.5:0 1.56:20 2.5:20 2.56:0 4:0 4.06:-15 5:-15 5.06:0 6.5:0 6.56:25 7.5:25 7.56:0
            """)
        for photo in Self.photos {
            let tracker = try MediaPipeFaceTracker()
            let (image, _, _) = try Photos.image(photo).letterboxed(width: 640, height: 480)
            guard let mesh = try tracker.landmarks(inStill: image)?.mesh else { throw VeilError.invalidInput("no face in \(photo)") }
            let synth = try TalkingFaceSynthesizer(photo: image, mesh: mesh, topology: try VeilResources.meshTopology())
            let capture = ExpressionCapture(tracker: tracker, privacy: .off)
            var frame = RGBImage(width: 640, height: 480)
            var truth: [Double] = [], gaze: [Double] = []
            for t in script.groundTruth {
                synth.frame(at: t.state, into: &frame)
                let out = try capture.process(frame, captureTimeMicros: UInt64(t.timeSeconds * 1e6))
                guard out.frame.state == .tracked, let g = out.frame.expression.gaze else { continue }
                truth.append(t.gazeYaw); gaze.append(Double(g.x))
            }
            let r = Self.correlation(truth, gaze)
            let at20 = zip(truth, gaze).filter { $0.0 == 20 }.map(\.1)
            print("\(photo): gaze x r = \(r) over \(gaze.count) frames; at 20° \(at20.reduce(0, +) / Double(max(at20.count, 1)))")
            XCTAssertGreaterThan(gaze.count, script.frameCount * 9 / 10, photo)
            XCTAssertGreaterThanOrEqual(r, 0.8, photo)
        }
    }

    // MARK: helpers

    static func events(_ on: [Bool]) -> [ClosedRange<Int>] {
        var result: [ClosedRange<Int>] = []
        var start: Int?
        for (i, v) in on.enumerated() {
            if v, start == nil { start = i }
            if !v, let s = start { result.append(s...(i - 1)); start = nil }
        }
        if let s = start { result.append(s...(on.count - 1)) }
        return result
    }

    static func overlap(_ a: ClosedRange<Int>, _ b: ClosedRange<Int>, slack: Int) -> Bool {
        a.lowerBound <= b.upperBound + slack && b.lowerBound <= a.upperBound + slack
    }

    static func correlation(_ a: [Double], _ b: [Double]) -> Double { pearsonCorrelation(a, b) }
}
