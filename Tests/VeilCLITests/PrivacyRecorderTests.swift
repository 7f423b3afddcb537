import Foundation
import XCTest
import VeilCore
import VeilTestSupport

/// `veil-privacy`, the recorder of the re-identification experiment (`make privacy`): whichever
/// tracker it measures, every person is framed and animated the same way, so that two trackers'
/// recordings differ only in what the trackers read.
final class PrivacyRecorderTests: XCTestCase {
    func testBothTrackersAreShownTheSameVideos() throws {
        guard let recorder = TestProgram.built("veil-privacy") else {
            throw XCTSkip("veil-privacy is not built next to the tests (run `make test`)")
        }
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("veil-privacy-recorder-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let photos = root.appendingPathComponent("photos")
        try FileManager.default.createDirectory(at: photos, withIntermediateDirectories: true)
        for name in ["lenna.png", "takeo.ppm"] {
            try FileManager.default.copyItem(at: try VeilResources.file("photos", name), to: photos.appendingPathComponent(name))
        }
        var recordings: [String: URL] = [:]
        for (name, extra) in [("attention", [String]()), ("two-models", ["--two-models"])] {
            let out = root.appendingPathComponent(name)
            let run = try TestProgram.run(recorder, ["--out", out.path, "--photos", photos.path, "--sessions", "2", "--seconds", "5",
                                                     "--warm-up", "2", "--threads", "1", "--quiet"] + extra)
            XCTAssertEqual(run.status, 0, "veil-privacy \(extra.joined(separator: " ")): \(run.stderr)")
            recordings[name] = out
        }
        let attention = try XCTUnwrap(recordings["attention"]), twoModels = try XCTUnwrap(recordings["two-models"])
        func data(_ directory: URL, _ file: String) throws -> Data { try Data(contentsOf: directory.appendingPathComponent(file)) }
        // One line per session, naming the same people, face sizes and performances (only how much
        // of it was tracked is the tracker's).
        func sessions(_ directory: URL) throws -> [[String: String]] {
            try String(decoding: data(directory, "index.jsonl"), as: UTF8.self).split(separator: "\n").map { line in
                let object = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
                return object.filter { $0.key != "tracked" }.mapValues { "\($0)" }
            }
        }
        XCTAssertEqual(try sessions(attention).count, 4)
        XCTAssertEqual(try sessions(attention), try sessions(twoModels))
        for person in ["lenna", "takeo"] {
            // The same first frame of the camera, and the same script, frame by frame.
            XCTAssertEqual(try data(attention, "\(person).png"), try data(twoModels, "\(person).png"), person)
            for session in 0..<2 {
                let stem = "\(person).\(session)"
                let truth = try data(attention, "\(stem).truth.f32")
                XCTAssertEqual(truth.count, 7 * 30 * 11 * 4, "\(stem): 7 s of 11 script columns at 30 fps")
                XCTAssertEqual(truth, try data(twoModels, "\(stem).truth.f32"), stem)
                // What the trackers read differs, and each level's stream was written from it.
                let estimate = try data(attention, "\(stem).estimate.f32")
                XCTAssertEqual(estimate.count, 7 * 30 * (BlendShape.allCases.count + 6) * 4, stem)
                XCTAssertNotEqual(estimate, try data(twoModels, "\(stem).estimate.f32"), "\(stem): both recordings tracked alike")
                for level in ["strict", "standard", "off"] {
                    XCTAssertEqual(try data(attention, "\(stem).\(level).f32").count, estimate.count, "\(stem) \(level)")
                }
            }
        }
    }
}
