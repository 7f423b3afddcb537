import VeilCore
import VeilVision
import XCTest
@testable import VeilMedia

/// Encoding frames as a video call would, and measuring what comes out.
final class VideoBitrateMeterTests: XCTestCase {
    /// A moving gradient with a square, so inter frames carry something.
    private func frames(_ count: Int, width: Int = 160, height: Int = 120) -> [RGBImage] {
        (0..<count).map { t in
            var pixels = [UInt8](repeating: 0, count: width * height * 3)
            for y in 0..<height {
                for x in 0..<width {
                    let i = (y * width + x) * 3
                    let inSquare = (x - 2 * t + 200) % width < 30 && y > 40 && y < 70
                    pixels[i] = UInt8((x + t * 3) & 0xff)
                    pixels[i + 1] = UInt8((y * 2) & 0xff)
                    pixels[i + 2] = inSquare ? 255 : 40
                }
            }
            return RGBImage(width: width, height: height, pixels: pixels) ?? RGBImage(width: width, height: height)
        }
    }

    func testEveryEncodingReportsFramesKeyframesAndPackets() throws {
        let input = frames(30)
        for codec in [VideoEncoding.Codec.vp8, .h264] {
            for rate in [VideoEncoding.RateControl.bitrate(300_000), .quality(codec == .vp8 ? 20 : 23)] {
                let encoding = VideoEncoding(codec: codec, rateControl: rate, keyframeInterval: 15)
                let result = try VideoBitrateMeter.measure(input, framesPerSecond: 30, encoding: encoding, rtpMTU: 400)
                XCTAssertEqual(result.framesIn, 30, "\(encoding)")
                XCTAssertEqual(result.frameBytes.count, 30, "real-time settings neither drop nor hold back frames (\(encoding))")
                XCTAssertGreaterThanOrEqual(result.keyframes, 2, "a keyframe at least every 15 frames (\(encoding))")
                XCTAssertGreaterThan(result.totalBytes, 0)
                XCTAssertTrue(result.rtpPacketBytes.allSatisfy { $0 <= 400 && $0 > 12 }, "\(encoding)")
                XCTAssertGreaterThan(result.totalRTPBytes, result.totalBytes, "RTP adds headers (\(encoding))")
                XCTAssertEqual(result.seconds, 1, accuracy: 1e-9)
            }
        }
    }

    func testRefusesBadSettingsAndFrames() throws {
        let vp8 = VideoEncoding(codec: .vp8, rateControl: .quality(64), keyframeInterval: 30)
        XCTAssertThrowsError(try VideoBitrateMeter(width: 160, height: 120, framesPerSecond: 30, encoding: vp8)) { error in
            XCTAssertEqual((error as? MediaError)?.kind, .invalidArgument)
        }
        let h264 = VideoEncoding(codec: .h264, rateControl: .bitrate(300_000), keyframeInterval: 30)
        XCTAssertThrowsError(try VideoBitrateMeter(width: 161, height: 120, framesPerSecond: 30, encoding: h264))
        let meter = try VideoBitrateMeter(width: 160, height: 120, framesPerSecond: 30, encoding: h264)
        XCTAssertThrowsError(try meter.write(RGBImage(width: 80, height: 60))) { error in
            XCTAssertEqual((error as? MediaError)?.kind, .invalidArgument)
        }
        XCTAssertThrowsError(try meter.finish(), "no frames written") { error in
            XCTAssertEqual((error as? MediaError)?.kind, .invalidState)
        }
        XCTAssertThrowsError(try VideoBitrateMeter.measure([], framesPerSecond: 30, encoding: h264))
    }
}
