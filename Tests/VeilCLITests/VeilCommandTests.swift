import Foundation
import VeilCore
import VeilVision
import VeilMedia
import VeilTestSupport
import XCTest

/// `veil` as a user runs it: the built binary, real files, exit codes and messages.
final class VeilCommandTests: XCTestCase {
    var work: URL!

    override func setUpWithError() throws {
        work = FileManager.default.temporaryDirectory.appendingPathComponent("veil-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: work)
    }

    /// `veil args` as a child process of the tests, not started: run in `directory` with Veil's
    /// cache; `headless` takes the display and the sound server away, so that calls open no window
    /// and leave the user's audio alone.
    static func process(_ args: [String], in directory: URL, headless: Bool = false) throws -> Process {
        TestProgram.process(try TestProgram.veil, args, in: directory, environment: environment(headless: headless))
    }

    /// What `process` changes in the tests' environment for `veil`.
    static func environment(headless: Bool) -> [String: String?] {
        var environment: [String: String?] = [:]
        if let cache = VeilResources.cacheDirectory { environment["VEIL_CACHE"] = cache.path }
        if headless {
            environment.updateValue(nil, forKey: "DISPLAY")
            environment.updateValue(nil, forKey: "PULSE_SERVER")
        }
        return environment
    }

    func veil(_ args: String...) throws -> TestProgram.Run {
        try TestProgram.run(Self.process(args, in: work))
    }

    func testSynthThenRenderEndToEnd() throws {
        let photo = try VeilResources.file("photos", "takeo.ppm").path
        let synth = try veil("synth", photo, "-o", "clip.mp4", "--quiet")
        XCTAssertEqual(synth.status, 0, synth.stderr)
        let truthLines = try String(contentsOf: work.appendingPathComponent("clip.truth.jsonl"), encoding: .utf8)
            .split(separator: "\n")
        XCTAssertEqual(truthLines.count, 270)

        let render = try veil("render", "clip.mp4", "-o", "avatar.mp4", "--style", "sketch",
                              "--expressions", "frames.jsonl", "--side-by-side")
        XCTAssertEqual(render.status, 0, render.stderr)
        XCTAssertTrue(render.stdout.contains("tracked          270 (100.0 %)"), render.stdout)

        // The video reads back with one frame per input frame, input | avatar side by side.
        let source = try VideoSource(file: work.appendingPathComponent("avatar.mp4"))
        XCTAssertEqual(source.size.width, 1280)
        XCTAssertEqual(source.size.height, 480)
        var frame = VideoFrame(image: RGBImage(width: 0, height: 0), timestampMicros: 0)
        var count = 0
        while try source.read(into: &frame) { count += 1 }
        XCTAssertEqual(count, 270)

        // One JSON line per frame with all 52 ARKit names, each frame within the wire bound.
        let lines = try String(contentsOf: work.appendingPathComponent("frames.jsonl"), encoding: .utf8).split(separator: "\n")
        XCTAssertEqual(lines.count, 270)
        for line in lines {
            let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            let shapes = try XCTUnwrap(object["blendshapes"] as? [String: Double])
            XCTAssertEqual(Set(shapes.keys), Set(BlendShape.allCases.map(\.name)))
            XCTAssertTrue(shapes.values.allSatisfy { (0...1).contains($0) })
            let bytes = try XCTUnwrap(object["wireBytes"] as? Int)
            XCTAssertLessThanOrEqual(bytes, ExpressionFrame.maximumEncodedSize)
            XCTAssertEqual(object["state"] as? String, "tracked")
        }

        // The receiving side alone: the avatar drawn again from the expressions file.
        let replay = try veil("render", "frames.jsonl", "-o", "replay.mp4", "--quiet")
        XCTAssertEqual(replay.status, 0, replay.stderr)
        let replayed = try VideoSource(file: work.appendingPathComponent("replay.mp4"))
        var replayCount = 0
        while try replayed.read(into: &frame) { replayCount += 1 }
        XCTAssertEqual(replayCount, 270)
    }

    func testHelp() throws {
        let top = try veil("--help")
        XCTAssertEqual(top.status, 0)
        for command in ["render", "synth", "demo", "bench"] { XCTAssertTrue(top.stdout.contains(command)) }
        let render = try veil("render", "--help")
        XCTAssertEqual(render.status, 0)
        XCTAssertTrue(render.stdout.contains("--side-by-side"))
        XCTAssertEqual(try veil("help", "synth").status, 0)
    }

    func testUserMistakesGiveClearErrors() throws {
        let missing = try veil("render", "nothing-here.mp4", "-o", "out.mp4")
        XCTAssertEqual(missing.status, 1)
        XCTAssertTrue(missing.stderr.contains("cannot read nothing-here.mp4"), missing.stderr)

        let unknownOption = try veil("render", "x.mp4", "--colour", "red")
        XCTAssertEqual(unknownOption.status, 2)
        XCTAssertTrue(unknownOption.stderr.contains("unknown option --colour"), unknownOption.stderr)

        let noOutput = try veil("render", "x.mp4")
        XCTAssertEqual(noOutput.status, 2)
        XCTAssertTrue(noOutput.stderr.contains("-o OUTPUT"), noOutput.stderr)

        let unknownCommand = try veil("fly")
        XCTAssertEqual(unknownCommand.status, 2)

        let notMedia = work.appendingPathComponent("notes.mp4")
        try "just text".write(to: notMedia, atomically: true, encoding: .utf8)
        let bad = try veil("render", "notes.mp4", "-o", "out.mp4")
        XCTAssertEqual(bad.status, 1)
        XCTAssertTrue(bad.stderr.contains("veil: error:"), bad.stderr)

        let unwritable = try veil("render", try VeilResources.file("photos", "takeo.ppm").path, "-o", "/proc/veil/out.mp4")
        XCTAssertNotEqual(unwritable.status, 0)
        XCTAssertTrue(unwritable.stderr.contains("/proc/veil"), unwritable.stderr)
    }

    /// `--max-frames` ends the run after that many frames, each with its input timestamp; a frame
    /// that cannot be read ends it with exit status 1 and the input's error, naming the file.
    func testAFrameLimitAndAnUnreadableFrame() throws {
        let photos = work.appendingPathComponent("photos")
        try FileManager.default.createDirectory(at: photos, withIntermediateDirectories: true)
        for i in 0..<6 {
            try FileManager.default.copyItem(at: try VeilResources.file("photos", "takeo.ppm"), to: photos.appendingPathComponent("\(i).ppm"))
        }
        let limited = try veil("render", "photos", "-o", "avatar/%03d.png", "--max-frames", "4", "--expressions", "frames.jsonl")
        XCTAssertEqual(limited.status, 0, limited.stderr)
        XCTAssertTrue(limited.stdout.contains("frames           4"), limited.stdout)
        let lines = try String(contentsOf: work.appendingPathComponent("frames.jsonl"), encoding: .utf8).split(separator: "\n")
        let objects = try lines.map { try XCTUnwrap(JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]) }
        XCTAssertEqual(objects.map { $0["frame"] as? Int }, [0, 1, 2, 3])
        XCTAssertEqual(objects.map { $0["timeMicros"] as? Int }, [0, 33_333, 66_667, 100_000])

        try "P6 this is not a picture".write(to: photos.appendingPathComponent("2.ppm"), atomically: true, encoding: .utf8)
        let failed = try veil("render", "photos", "-o", "failed.mp4")
        XCTAssertEqual(failed.status, 1)
        XCTAssertTrue(failed.stderr.contains("veil: error:"), failed.stderr)
        XCTAssertTrue(failed.stderr.contains("2.ppm"), failed.stderr)
    }

    func testNoFaceIsAnError() throws {
        var gray = RGBImage(width: 320, height: 240)
        for i in gray.pixels.indices { gray.pixels[i] = 128 }
        try ImageIO.savePNG(gray, to: work.appendingPathComponent("wall.png"))
        let run = try veil("render", "wall.png", "-o", "wall-avatar.png")
        XCTAssertEqual(run.status, 1)
        XCTAssertTrue(run.stderr.contains("no face found in wall.png"), run.stderr)
    }
}
