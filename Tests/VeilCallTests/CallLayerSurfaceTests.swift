import Foundation
import VeilTestSupport
import XCTest

/// The privacy invariant "no API in the call layer accepts an image". Structurally: pictures and
/// faces are types of `VeilVision` (and the targets built on it), and the package graph gives the
/// call layer no path to any of them, so its code cannot import or name one. On the source: no
/// public or open declaration of `Sources/VeilCall` mentions raw bytes (which could carry anything)
/// or a picture's type. The call layer's inputs are `ExpressionFrame`s, audio samples and
/// signaling text.
final class CallLayerSurfaceTests: XCTestCase {
    static let root = PackageGraph.root

    /// The targets that see pictures or faces: `VeilVision` and every target that depends on it.
    static func seeing(in graph: PackageGraph) -> Set<String> { graph.dependents(of: "VeilVision") }

    func testTheCallLayerCannotReachPicturesOrFaces() throws {
        let graph = try PackageGraph.read()
        let call = graph.closure(of: "VeilCall")
        let seeing = Self.seeing(in: graph)
        print("VeilCall depends on \(call.sorted()); the targets that see pictures or faces: \(seeing.sorted())")
        XCTAssertNotNil(graph["VeilCall"], "no VeilCall target in the package graph")
        XCTAssertTrue(call.contains("VeilCore"), "the graph was not read: VeilCall's dependencies are missing")
        XCTAssertTrue(call.isDisjoint(with: seeing), "VeilCall can reach \(call.intersection(seeing).sorted()), which hold pictures or faces")
        // The pictures and faces are where the graph says: VeilVision declares them, and nothing
        // the call layer can reach declares a picture, a frame of video or a face's points.
        func declarations(in target: String) throws -> String {
            let directory = Self.root.appendingPathComponent("Sources/\(target)")
            let files = (try? FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)) ?? []
            return try files.filter { $0.pathExtension == "swift" }.map { try String(contentsOf: $0, encoding: .utf8) }.joined(separator: "\n")
        }
        let vision = try declarations(in: "VeilVision")
        for type in ["struct RGBImage", "struct VideoFrame", "struct FaceLandmarks", "typealias Point2"] {
            XCTAssertTrue(vision.contains(type), "VeilVision no longer declares \(type): where did it go?")
        }
        let pattern = try NSRegularExpression(pattern: #"\b(struct|class|enum|typealias|protocol|actor)\s+\w*(Image|Pixel|Picture|Video|Landmark|Mesh|Point)\w*"#)
        for target in call.sorted() {
            let source = try declarations(in: target)
            let found = pattern.matches(in: source, range: NSRange(source.startIndex..., in: source)).compactMap { Range($0.range, in: source).map { String(source[$0]) } }
            XCTAssertEqual(found, [], "\(target), which VeilCall depends on, declares a picture or face type")
        }
    }

    /// The graph reading on a graph with a planted path to the faces.
    /// A face from a VMC Performer or Live Link Face (`InteropFaceSource`, `veil call --face`) comes
    /// in through a target that reaches nothing but Veil's core, the protocols' codecs and UDP
    /// sockets: no tracker runtime, no GStreamer, nothing that holds a picture.
    func testTheInteropFaceSourceReachesOnlyTheCoreCodecsAndSockets() throws {
        let graph = try PackageGraph.read()
        XCTAssertEqual(graph.closure(of: "VeilInteropNetwork"), ["VeilInterop", "VeilDatagram", "VeilCore", "VeilExpressionSource"])
    }

    /// The seam every expression source plugs into links nothing beyond Veil's core: no tracker
    /// runtime, no GStreamer, no sockets, nothing that holds a picture. The sources are targets
    /// beside it (the camera's reaches the tracker; `--face`'s does not), and the call layer reaches
    /// none of them.
    func testExpressionSourcesPlugIntoATargetThatLinksNothing() throws {
        let graph = try PackageGraph.read()
        XCTAssertEqual(graph["VeilExpressionSource"], ["VeilCore"])
        XCTAssertEqual(graph["VeilCore"], [])
        XCTAssertEqual(graph.closure(of: "VeilExpressionSource"), ["VeilCore"])
        for source in ["VeilInteropNetwork", "VeilCameraSource"] {
            XCTAssertTrue(graph[source]?.contains("VeilExpressionSource") ?? false, "\(source) does not plug into VeilExpressionSource")
        }
        XCTAssertTrue(graph.closure(of: "VeilCameraSource").contains("VeilTracking"))
        XCTAssertFalse(graph.closure(of: "VeilInteropNetwork").contains("VeilTracking"))
        let call = graph.closure(of: "VeilCall")
        XCTAssertTrue(call.isDisjoint(with: ["VeilExpressionSource", "VeilCameraSource", "VeilInteropNetwork"]))
    }

    func testAPathToTheFacesIsFound() {
        let graph = PackageGraph(["VeilCall": ["VeilCore", "VeilGLib"], "VeilGLib": ["Helpers"], "Helpers": ["VeilMedia"],
                                  "VeilMedia": ["VeilVision", "VeilCore"], "VeilVision": ["VeilCore"], "VeilCore": []])
        let call = graph.closure(of: "VeilCall")
        XCTAssertEqual(call, ["VeilCore", "VeilGLib", "Helpers", "VeilMedia", "VeilVision"])
        XCTAssertEqual(Self.seeing(in: graph), ["VeilVision", "VeilMedia", "Helpers", "VeilGLib", "VeilCall"])
        XCTAssertFalse(call.isDisjoint(with: Self.seeing(in: graph)))
    }

    /// Types that must not appear in VeilCall's public signatures, and why.
    static let forbidden: [String: String] = [
        "RGBImage": "an image", "VideoFrame": "an image", "CanvasImage": "an image", "ImageIO": "image files",
        "VideoSource": "video", "VideoWriter": "video", "VideoDisplay": "video", "EncodedVideo": "video",
        "VideoEncoding": "video", "FaceLandmarks": "face geometry", "FaceMeasurements": "face geometry",
        "MeshTopology": "face geometry", "Point2": "geometry", "Point3": "geometry",
        "Data": "raw bytes", "UInt8": "raw bytes", "UnsafeRawPointer": "raw bytes",
        "UnsafeMutableRawPointer": "raw bytes", "UnsafeRawBufferPointer": "raw bytes",
        "UnsafeMutableRawBufferPointer": "raw bytes",
    ]

    func testNoPublicDeclarationOfTheCallLayerTakesAnImage() throws {
        let directory = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Sources/VeilCall")
        let files = try FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)
            .filter { $0.pathExtension == "swift" }
            .sorted { $0.lastPathComponent < $1.lastPathComponent }
        XCTAssertFalse(files.isEmpty, "no Swift files under \(directory.path)")
        var declarations = 0
        for file in files {
            let source = try String(contentsOf: file, encoding: .utf8)
            for declaration in Self.publicDeclarations(in: source) {
                declarations += 1
                for (name, why) in Self.forbiddenTypes(in: declaration) {
                    XCTFail("\(file.lastPathComponent): public API mentions \(name) (\(why)): \(declaration)")
                }
            }
        }
        print("VeilCall: \(declarations) public declarations in \(files.count) files, none with an image, video, geometry or raw-byte type")
        // The scan sees the call layer's API: sending frames and the session are among it.
        XCTAssertGreaterThan(declarations, 50)
    }

    /// The scanner itself, on declarations that must and must not be caught.
    func testTheScanCatchesImagesWhereverThePublicAPIMentionsThem() {
        let source = """
        // public func commented(_ image: RGBImage)
        public final class Peer {
            public func send(_ frame: ExpressionFrame) {}
            public func show(
                label: String,
                picture: RGBImage
            ) { let s = "RGBImage in a string"; _ = s }
            func internalOnly(_ image: RGBImage) {}
            public var last: VideoFrame? { nil }
            public func onEvent(_ handler: @escaping (Int) -> Void,
                                queue: Int = 0, picture: CanvasImage) {}
            func open() { _ = UInt8(0) }
            public init(bytes: [UInt8]) {}
        }
        public extension Peer {
            func hidden(_ landmarks: FaceLandmarks) {}
        }
        """
        let declarations = Self.publicDeclarations(in: source)
        let caught = declarations.flatMap { Self.forbiddenTypes(in: $0).map(\.name) }
        XCTAssertEqual(Set(caught), ["RGBImage", "VideoFrame", "UInt8", "FaceLandmarks", "CanvasImage"])
        XCTAssertEqual(caught.filter { $0 == "RGBImage" }.count, 1, "the comment, the string and the internal method do not count")
        XCTAssertTrue(declarations.contains { $0.contains("send(_ frame: ExpressionFrame)") })
    }

    // MARK: - Scanner

    /// The text of every `public` or `open` declaration in `source`, from the keyword to its body
    /// (or the end of the line for properties without one), comments and string literals removed.
    /// The body of a `public extension` is included whole: its members are public without saying so.
    static func publicDeclarations(in source: String) -> [String] {
        let code = Array(stripped(source))
        var result: [String] = []
        var i = 0
        while i < code.count {
            guard let keyword = ["public", "open"].first(where: { startsWord($0, in: code, at: i) }) else {
                i += 1
                continue
            }
            var j = i + keyword.count
            let next = String(code[j..<min(j + 40, code.count)]).split(whereSeparator: \.isWhitespace).first.map(String.init) ?? ""
            // `open` is also an ordinary name (`func open()`, `.open`): only the modifier counts.
            if keyword == "open", !["class", "func", "var", "let", "subscript", "init", "override", "static", "extension"].contains(next) {
                i = j
                continue
            }
            var depth = 0
            let isExtension = next == "extension"
            // A declaration's head ends at its body or at the end of the line, outside brackets.
            while j < code.count {
                let c = code[j]
                if c == "(" || c == "[" || c == "<" { depth += 1 }
                let isArrow = c == ">" && j > 0 && code[j - 1] == "-"
                if c == ")" || c == "]" || (c == ">" && !isArrow) { depth = max(depth - 1, 0) }
                if depth == 0, c == "{" || c == "\n" || c == "=" { break }
                j += 1
            }
            if isExtension, j < code.count, code[j] == "{" {
                var braces = 0
                repeat {
                    if code[j] == "{" { braces += 1 }
                    if code[j] == "}" { braces -= 1 }
                    j += 1
                } while j < code.count && braces > 0
            }
            result.append(String(code[i..<j]).split(whereSeparator: \.isWhitespace).joined(separator: " "))
            i = j
        }
        return result
    }

    /// The forbidden type names that appear as whole identifiers in `declaration`.
    static func forbiddenTypes(in declaration: String) -> [(name: String, why: String)] {
        let identifiers = Set(declaration.split { !($0.isLetter || $0.isNumber || $0 == "_") }.map(String.init))
        return forbidden.filter { identifiers.contains($0.key) }.map { (name: $0.key, why: $0.value) }.sorted { $0.name < $1.name }
    }

    /// `source` with comments and the contents of string literals blanked out (line breaks kept).
    static func stripped(_ source: String) -> String {
        var out = ""
        var chars = Array(source)[...]
        while let c = chars.first {
            if chars.starts(with: "//") {
                while let d = chars.first, d != "\n" { chars.removeFirst() }
            } else if chars.starts(with: "/*") {
                chars.removeFirst(2)
                while !chars.isEmpty, !chars.starts(with: "*/") { if chars.removeFirst() == "\n" { out.append("\n") } }
                chars = chars.dropFirst(2)
            } else if c == "\"" {
                // Skips to the closing quote (multi-line literals close with three quotes).
                let multiLine = chars.starts(with: "\"\"\"")
                let close = multiLine ? "\"\"\"" : "\""
                chars.removeFirst(close.count)
                while !chars.isEmpty, !chars.starts(with: close) {
                    if chars.first == "\\" { chars.removeFirst() }
                    if let d = chars.popFirst(), d == "\n" { out.append("\n") }
                }
                chars = chars.dropFirst(close.count)
                out.append("\"\"")
            } else {
                out.append(c)
                chars.removeFirst()
            }
        }
        return out
    }

    /// Whether `word` starts at `index` in `code` as a whole identifier.
    static func startsWord(_ word: String, in code: [Character], at index: Int) -> Bool {
        let letters = Array(word)
        guard index + letters.count <= code.count, Array(code[index..<index + letters.count]) == letters else { return false }
        func isIdentifier(_ c: Character) -> Bool { c.isLetter || c.isNumber || c == "_" }
        if index > 0, isIdentifier(code[index - 1]) { return false }
        if index + letters.count < code.count, isIdentifier(code[index + letters.count]) { return false }
        return true
    }
}
