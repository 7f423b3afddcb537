import Foundation
import VeilCore
import VeilVision
import XCTest
@testable import VeilMedia

extension XCTestCase {
    /// A fresh directory, removed after the test, whose name has spaces and quotes so every test
    /// also covers awkward paths.
    func makeTemporaryDirectory(_ function: String = #function) throws -> URL {
        let name = "veil media \"\(function.prefix(while: { $0 != "(" }))\" '\(UUID().uuidString.prefix(8))'"
        let url = FileManager.default.temporaryDirectory.appendingPathComponent(name, isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(at: url) }
        return url
    }
}

/// Synthetic clip: a red square moving 3 px per frame to the right over a dark blue background.
enum MovingSquare {
    static let background: (UInt8, UInt8, UInt8) = (20, 40, 120)
    static let square: (UInt8, UInt8, UInt8) = (220, 30, 30)
    static let side = 24

    static func squareOrigin(frame: Int) -> (x: Int, y: Int) { (8 + 3 * frame, 40) }

    static func image(frame: Int, width: Int = 160, height: Int = 120) -> RGBImage {
        var image = RGBImage(width: width, height: height)
        let origin = squareOrigin(frame: frame)
        for y in 0..<height {
            for x in 0..<width {
                let inside = (origin.x..<origin.x + side).contains(x) && (origin.y..<origin.y + side).contains(y)
                let c = inside ? square : background
                let i = (y * width + x) * 3
                image.pixels[i] = c.0; image.pixels[i + 1] = c.1; image.pixels[i + 2] = c.2
            }
        }
        return image
    }

    /// Centre of the reddish pixels, or nil when there are none.
    static func squareCentre(_ image: RGBImage) -> (x: Double, y: Double)? {
        var sx = 0.0, sy = 0.0, n = 0.0
        for y in 0..<image.height {
            for x in 0..<image.width {
                let i = (y * image.width + x) * 3
                if image.pixels[i] > 150 && image.pixels[i + 2] < 90 { sx += Double(x); sy += Double(y); n += 1 }
            }
        }
        return n > 0 ? (sx / n, sy / n) : nil
    }
}

func pixel(_ image: RGBImage, _ x: Int, _ y: Int) -> (Int, Int, Int) {
    let i = (y * image.width + x) * 3
    return (Int(image.pixels[i]), Int(image.pixels[i + 1]), Int(image.pixels[i + 2]))
}

func assertColour(_ actual: (Int, Int, Int), _ expected: (UInt8, UInt8, UInt8), tolerance: Int,
                  _ message: String, file: StaticString = #filePath, line: UInt = #line) {
    let d = max(abs(actual.0 - Int(expected.0)), abs(actual.1 - Int(expected.1)), abs(actual.2 - Int(expected.2)))
    XCTAssertLessThanOrEqual(d, tolerance, "\(message): got \(actual), expected \(expected)", file: file, line: line)
}

/// A result handed from a test thread to the waiting test: written before the semaphore is
/// signalled, read after the wait returns.
private final class Outcome<T>: @unchecked Sendable { var result: Result<T, Error>? }

/// Runs `body` on a thread of its own and fails the test when it has not returned after `seconds`,
/// so a hang shows up as a failure instead of blocking the suite. Returns nil after a hang.
func runWithDeadline<T>(_ seconds: Double = 10, file: StaticString = #filePath, line: UInt = #line,
                        _ body: @escaping () throws -> T) throws -> T? {
    let outcome = Outcome<T>()
    let done = DispatchSemaphore(value: 0)
    let thread = Thread {
        outcome.result = Result { try body() }
        done.signal()
    }
    thread.stackSize = 8 << 20
    thread.start()
    guard done.wait(timeout: .now() + seconds) == .success else {
        XCTFail("no answer after \(seconds) s: it hangs", file: file, line: line)
        return nil
    }
    return try outcome.result?.get()
}

/// Runs `body` (with a deadline) expecting a MediaError of `kind`; returns it for more checks.
/// Fails on success, on another error, or when `body` hangs.
@discardableResult
func assertMediaError<T>(_ kind: MediaError.Kind, within seconds: Double = 10, file: StaticString = #filePath, line: UInt = #line,
                         _ body: @escaping () throws -> T) -> MediaError? {
    do {
        guard try runWithDeadline(seconds, file: file, line: line, body) != nil else { return nil }
        XCTFail("expected a \(kind) error, but it succeeded", file: file, line: line)
    } catch let error as MediaError {
        print("MediaError[\(error.kind)]: \(error.message)")
        XCTAssertEqual(error.kind, kind, "wrong kind for: \(error.message)", file: file, line: line)
        return error
    } catch {
        XCTFail("expected a MediaError, got \(error)", file: file, line: line)
    }
    return nil
}

func emptyFrame() -> VideoFrame { VideoFrame(image: RGBImage(width: 0, height: 0), timestampMicros: 0) }

/// Reads every frame, copying each image.
func readAll(_ source: VideoSource) throws -> [VideoFrame] {
    var frames: [VideoFrame] = []
    var frame = emptyFrame()
    while try source.read(into: &frame) { frames.append(frame) }
    return frames
}
