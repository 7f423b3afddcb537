import XCTest
@testable import VeilCore

/// The optional privacy filter: what it keeps and what it evens out.
final class ExpressionPrivacyFilterTests: XCTestCase {
    func testRestStaysNeutral() {
        var filter = ExpressionPrivacyFilter()
        for n in 0..<60 {
            XCTAssertEqual(filter.apply(.neutral, at: Double(n) / 30), .neutral)
        }
    }

    func testLeftAndRightAreSentAsTheirMean() {
        var filter = ExpressionPrivacyFilter()
        var wink = VeilCore.Expression()
        wink[.eyeBlinkLeft] = 0.6
        let out = filter.apply(wink, at: 0)
        XCTAssertEqual(out[.eyeBlinkLeft], out[.eyeBlinkRight])
        XCTAssertEqual(out[.eyeBlinkLeft], 0.3, accuracy: 0.01)
    }

    func testTwoFacesWithDifferentGainsReadAlike() {
        // The same jaw movement, read 3× more strongly on one face than on the other: after the
        // filter's memory of its starting point has faded (20 s), both peak at the target.
        func peak(_ gain: Float) -> Float {
            var filter = ExpressionPrivacyFilter()
            var highest: Float = 0
            for n in 0..<600 {
                var e = VeilCore.Expression()
                e[.jawOpen] = gain * Float(abs(sin(Double(n) / 30 * 3)))
                let out = filter.apply(e, at: Double(n) / 30)[.jawOpen]
                if n >= 570 { highest = max(highest, out) }
            }
            return highest
        }
        let weak = peak(0.3), strong = peak(0.9)
        XCTAssertEqual(weak, 0.6, accuracy: 0.05)
        XCTAssertEqual(strong, 0.6, accuracy: 0.05)
    }

    func testSmallNodsAreDroppedAndLargerOnesReduced() {
        var filter = ExpressionPrivacyFilter()
        XCTAssertEqual(filter.apply(VeilCore.Expression(headPose: HeadPose(yaw: 1.5, pitch: 1.5, roll: -1)), at: 0).headPose,
                       HeadPose(yaw: 1.5, pitch: 0, roll: 0))
        XCTAssertEqual(filter.apply(VeilCore.Expression(headPose: HeadPose(yaw: 10, pitch: 5, roll: -6)), at: 0.033).headPose,
                       HeadPose(yaw: 10, pitch: 3, roll: -4))
    }
}
