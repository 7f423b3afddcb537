import Foundation
import VeilCore
import XCTest
@testable import VeilMedia

/// The pure parts: numbered file patterns and the PPM/PGM decoder.
final class FormatTests: XCTestCase {
    func testFramePatterns() throws {
        let padded = try FramePattern("out dir/frame_%05d.png")
        XCTAssertEqual(padded.path(for: 0), "out dir/frame_00000.png")
        XCTAssertEqual(padded.path(for: 123456), "out dir/frame_123456.png")
        XCTAssertEqual(padded.fileExtension, "png")
        XCTAssertEqual(padded.directory, "out dir")

        let plain = try FramePattern("/abs/f%d.JPG")
        XCTAssertEqual(plain.path(for: 7), "/abs/f7.JPG")
        XCTAssertEqual(plain.fileExtension, "jpg")
        XCTAssertEqual(plain.directory, "/abs")

        let literal = try FramePattern("100%% sure_%3d.png")
        XCTAssertEqual(literal.path(for: 5), "100% sure_  5.png")
        XCTAssertEqual(literal.directory, ".")
        XCTAssertEqual(try FramePattern("/f_%02d.png").directory, "/")

        for bad in ["frame.png", "f_%s.png", "f_%d_%d.png", "f_%x.png", "f_%.png", "f_%123d.png", "dir%d/f.png", "f_%", "%%d.png", "f_%-5d.png"] {
            XCTAssertThrowsError(try FramePattern(bad), bad) { error in
                XCTAssertEqual((error as? MediaError)?.kind, .invalidArgument, bad)
            }
        }
    }

    func testBinaryPPM() throws {
        let header = Array("P6\n# a comment\n2 1\n255\n".utf8)
        let image = try PNM.decode(header + [255, 0, 0, 1, 2, 3], name: "t")
        XCTAssertEqual(image.width, 2); XCTAssertEqual(image.height, 1)
        XCTAssertEqual(image.pixels, [255, 0, 0, 1, 2, 3])
    }

    func testGrayAndSixteenBitPNM() throws {
        let gray = try PNM.decode(Array("P5 2 1 255\n".utf8) + [10, 200], name: "t")
        XCTAssertEqual(gray.pixels, [10, 10, 10, 200, 200, 200])
        // 16-bit samples are big-endian and scaled to 8 bits.
        let deep = try PNM.decode(Array("P6 1 1 65535\n".utf8) + [0xFF, 0xFF, 0x80, 0x00, 0x00, 0x00], name: "t")
        XCTAssertEqual(deep.pixels, [255, 128, 0])
        // A maximum below 255 is stretched to the full range.
        let low = try PNM.decode(Array("P5 1 1 15\n".utf8) + [15], name: "t")
        XCTAssertEqual(low.pixels, [255, 255, 255])
    }

    func testMalformedPNMIsRejected() {
        let cases: [[UInt8]] = [
            Array("P6\n2 1\n255\n".utf8) + [1, 2, 3],             // truncated raster
            Array("P6\n99999999 1\n255\n".utf8),                  // absurd width
            Array("P6\n0 1\n255\n".utf8),                         // empty
            Array("P6\n2 1\n70000\n".utf8) + [UInt8](repeating: 0, count: 12),  // bad maximum
            Array("P3\n1 1\n255\n1 2 3\n".utf8),                  // ASCII variant: not supported
            Array("P6\nx 1\n255\n".utf8),                         // not a number
            Array("P6".utf8),                                      // header only
        ]
        for bytes in cases {
            XCTAssertThrowsError(try PNM.decode(bytes, name: "t")) { error in
                XCTAssertEqual((error as? MediaError)?.kind, .unsupportedInput)
            }
        }
    }
}
