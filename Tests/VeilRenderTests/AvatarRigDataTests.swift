import Foundation
import XCTest
import VeilCore
import VeilVision
import VeilRender
import VeilCairo

/// The canonical rig as data: `web/avatar-rig.json` is exactly what the design writes, and a rig
/// read from it draws exactly what the design draws, so the Swift and browser renderers share one
/// source.
final class AvatarRigDataTests: XCTestCase {
    static let repository = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let rigFile = repository.appendingPathComponent("web/avatar-rig.json")

    func testCommittedRigFileIsWhatTheDesignWrites() throws {
        let written = try AvatarRigData.design.jsonData()
        let committed = try Data(contentsOf: Self.rigFile)
        XCTAssertTrue(committed == written,
                      "web/avatar-rig.json differs from the rig design (Sources/VeilRender/AvatarRig+Design.swift): run `veil rig --out web/avatar-rig.json` and commit the file")
        XCTAssertTrue(try AvatarRigData.design.jsonData() == written, "the output is deterministic")
        XCTAssertTrue(try AvatarRigData(json: written) == AvatarRigData.design, "every value reads back exactly")
    }

    func testRigReadFromTheFileRendersPixelIdentically() throws {
        let fromFile = try AvatarRig(contentsOf: Self.rigFile)
        let built = AvatarRenderer(rig: .canonical), read = AvatarRenderer(rig: fromFile)
        let rect = Rect(x: 0, y: 0, width: 320, height: 320)
        let a = try CairoCanvas(width: 320, height: 320), b = try CairoCanvas(width: 320, height: 320)
        var compared = 0
        for (name, expression) in Sample.gallery {
            for (styleName, style) in AvatarStyle.named {
                let fileStyle = try XCTUnwrap(fromFile.style(named: styleName))
                XCTAssertEqual(fileStyle, style)
                for (backgroundName, background) in AvatarBackground.named where backgroundName == "gradient" || name == "neutral" {
                    let fileBackground = try XCTUnwrap(fromFile.background(named: backgroundName))
                    built.render(expression, into: a, rect: rect, style: style, background: background)
                    read.render(expression, into: b, rect: rect, style: fileStyle, background: fileBackground)
                    XCTAssertEqual(a.rgbImage().pixels, b.rgbImage().pixels, "\(name), \(styleName), \(backgroundName)")
                    compared += 1
                }
            }
        }
        XCTAssertEqual(compared, Sample.gallery.count * 2 + 2 * 4)
        // The renders are not trivially equal: the file's face moves.
        built.render(Sample.expression([.jawOpen: 1]), into: a, rect: rect)
        read.render(.neutral, into: b, rect: rect)
        XCTAssertNotEqual(a.rgbImage().pixels, b.rgbImage().pixels)
    }

    func testDesignDataIsComplete() throws {
        let data = AvatarRigData.design
        XCTAssertEqual(data.format, "veil-avatar-rig")
        XCTAssertEqual(data.version, 1)
        XCTAssertEqual(Set(data.blendShapes.keys), Set(BlendShape.allCases.map(\.name)), "every coefficient moves the face")
        XCTAssertEqual(data.points.count, data.layout.pointCount)
        XCTAssertEqual(Set(data.styles.keys), ["mask", "sketch"])
        XCTAssertEqual(Set(data.backgrounds.keys), ["gradient", "dark", "black", "white", "none"])
        XCTAssertNoThrow(try AvatarRig(data: data))
        let json = try String(decoding: data.jsonData(), as: UTF8.self)
        XCTAssertTrue(json.hasPrefix("{\n\"format\":\"veil-avatar-rig\",\n\"version\":1,\n"), String(json.prefix(80)))
        XCTAssertTrue(json.contains("\n\"jawOpen\":{\"offsets\":[["), "one blendshape per line")
        XCTAssertTrue(json.contains("\"lips\":\"#c96e6c\""), "opaque colours as #rrggbb")
        XCTAssertTrue(json.contains("\"blush\":\"rgba(242,134,126,0.38)\""), "translucent colours as rgba()")
        XCTAssertLessThan(json.utf8.count, 400_000)
    }

    // MARK: rejected rig data, each with an error that says what to do

    private func assertRejected(_ json: Data, _ code: AvatarRigError.Code, mentioning text: String,
                                file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try AvatarRigData(json: json), file: file, line: line) { error in
            guard let error = error as? AvatarRigError else { return XCTFail("\(error)", file: file, line: line) }
            XCTAssertEqual(error.code, code, "\(error)", file: file, line: line)
            XCTAssertTrue(error.description.contains(text), "\(error)", file: file, line: line)
        }
    }

    private func designObject() throws -> [String: Any] {
        try XCTUnwrap(JSONSerialization.jsonObject(with: AvatarRigData.design.jsonData()) as? [String: Any])
    }

    private func json(_ object: [String: Any]) throws -> Data { try JSONSerialization.data(withJSONObject: object) }

    func testMissingFileIsAClearErrorNotACrash() {
        let missing = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("no-such-dir-\(UUID())/avatar-rig.json")
        XCTAssertThrowsError(try AvatarRig(contentsOf: missing)) { error in
            let rigError = error as? AvatarRigError
            XCTAssertEqual(rigError?.code, .unreadable)
            XCTAssertTrue("\(error)".contains(missing.path), "\(error)")
            XCTAssertTrue("\(error)".contains("veil rig --out"), "\(error)")
        }
    }

    func testOtherFormatsAndVersionsAreRejected() throws {
        assertRejected(Data("[1, 2]".utf8), .notARig, mentioning: "not a JSON object")
        assertRejected(Data("not json".utf8), .notARig, mentioning: "not a JSON object")
        assertRejected(Data("{\"format\": \"something-else\", \"version\": 1}".utf8), .notARig, mentioning: "something-else")
        var object = try designObject()
        object["version"] = 2
        assertRejected(try json(object), .unsupportedVersion, mentioning: "version 2 is not supported")
        object["version"] = nil
        assertRejected(try json(object), .unsupportedVersion, mentioning: "missing")
    }

    func testInconsistentDataIsRejected() throws {
        var object = try designObject()
        object["points"] = (object["points"] as? [Any])?.dropLast().map { $0 }
        assertRejected(try json(object), .invalid, mentioning: "points")

        object = try designObject()
        var shapes = try XCTUnwrap(object["blendShapes"] as? [String: Any])
        shapes["jawOpen"] = ["points": [999_999], "offsets": [[0, -0.2, 0]]]
        object["blendShapes"] = shapes
        assertRejected(try json(object), .invalid, mentioning: "jawOpen")

        object = try designObject()
        shapes = try XCTUnwrap(object["blendShapes"] as? [String: Any])
        shapes["mouthTwist"] = ["points": [1], "offsets": [[0, 0, 0]]]
        object["blendShapes"] = shapes
        assertRejected(try json(object), .invalid, mentioning: "mouthTwist")

        object = try designObject()
        var layout = try XCTUnwrap(object["layout"] as? [String: Any])
        layout["tongue"] = 3
        object["layout"] = layout
        assertRejected(try json(object), .invalid, mentioning: "layout")

        object = try designObject()
        object["limits"] = nil
        assertRejected(try json(object), .notARig, mentioning: "limits")

        object = try designObject()
        var styles = try XCTUnwrap(object["styles"] as? [String: Any])
        var mask = try XCTUnwrap(styles["mask"] as? [String: Any])
        mask["skin"] = "beige"
        styles["mask"] = mask
        object["styles"] = styles
        assertRejected(try json(object), .notARig, mentioning: "beige")
    }
}
