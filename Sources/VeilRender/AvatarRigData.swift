import Foundation
import VeilCore

/// The canonical avatar as versioned data: what both of Veil's renderers draw from — `AvatarRig`
/// here and the browser's canvas renderer (`web/avatar.js`), which reads it from `web/avatar-rig.json`.
///
/// It holds the face's rest control points, each blendshape's displacement field (keyed by ARKit
/// name), the directions of the outline and hair meridians, the skin loop's normals, the pivot the
/// head turns about, the solve's limits, and the named styles and backgrounds. Rig units: the head
/// is about 2 units tall, centred on the origin; x to the viewer's right, y up, z towards the viewer.
/// `veil rig` writes it from the design (`AvatarRigData.design`); `docs/avatar.md` describes the file.
public struct AvatarRigData: Codable, Equatable, Sendable {
    /// The value of `format` in every rig file.
    public static let formatName = "veil-avatar-rig"
    /// The version this code writes and reads. Any change to the meaning of a field, or to the
    /// renderers' reading of it, needs a new version.
    public static let currentVersion = 1

    /// Indices of the named control points in `points` (see docs/avatar.md).
    public struct Layout: Codable, Equatable, Sendable {
        /// The number of control points.
        public var pointCount: Int
        /// First of each eye's nine points: inner corner, upper lid ×3, outer corner, lower lid ×3, iris.
        public var rightEye: Int, leftEye: Int
        /// First of each brow's five points, inner → outer.
        public var rightBrow: Int, leftBrow: Int
        /// The nose's points; each bridge line has two (upper, lower).
        public var noseTip: Int, columella: Int
        /// See `noseTip`.
        public var rightAlar: Int, leftAlar: Int, rightNostril: Int, leftNostril: Int
        /// See `noseTip`.
        public var rightBridge: Int, leftBridge: Int
        /// The mouth corners.
        public var rightCorner: Int, leftCorner: Int
        /// First of the lip edges' points (5, 3, 3, 3; viewer's left → right) and the tongue tip.
        public var upperOuter: Int, upperInner: Int, lowerInner: Int, lowerOuter: Int, tongue: Int
        /// Cheek centres and ears.
        public var rightCheek: Int, leftCheek: Int, rightEar: Int, leftEar: Int
        /// The loop between skin and hair, and the head's centre.
        public var skinLoop: Int, skinLoopCount: Int, headCenter: Int
        /// The surface samples: `meridians` × `depthSamples` points each, front to back.
        public var headGrid: Int, hairGrid: Int, meridians: Int, depthSamples: Int

        /// The layout the renderers' code is written against (`RigPoint`).
        static let current = Layout(
            pointCount: RigPoint.count,
            rightEye: RigPoint.eye(.right), leftEye: RigPoint.eye(.left),
            rightBrow: RigPoint.brow(.right).lowerBound, leftBrow: RigPoint.brow(.left).lowerBound,
            noseTip: RigPoint.noseTip, columella: RigPoint.columella,
            rightAlar: RigPoint.alar(.right), leftAlar: RigPoint.alar(.left),
            rightNostril: RigPoint.nostril(.right), leftNostril: RigPoint.nostril(.left),
            rightBridge: RigPoint.bridge(.right), leftBridge: RigPoint.bridge(.left),
            rightCorner: RigPoint.cornerRight, leftCorner: RigPoint.cornerLeft,
            upperOuter: RigPoint.upperOuter, upperInner: RigPoint.upperInner, lowerInner: RigPoint.lowerInner,
            lowerOuter: RigPoint.lowerOuter, tongue: RigPoint.tongue,
            rightCheek: RigPoint.cheek(.right), leftCheek: RigPoint.cheek(.left),
            rightEar: RigPoint.ear(.right), leftEar: RigPoint.ear(.left),
            skinLoop: RigPoint.skinLoop, skinLoopCount: RigPoint.skinLoopCount, headCenter: RigPoint.headCenter,
            headGrid: RigPoint.headGrid, hairGrid: RigPoint.hairGrid, meridians: RigPoint.outlineMeridians,
            depthSamples: RigPoint.depthSamples)
    }

    /// Where the head sits in a view of width w and height h: scale = min(h × heightScale,
    /// w × widthScale) pixels per rig unit, centred horizontally, at centreY × h from the top.
    public struct Placement: Codable, Equatable, Sendable {
        /// See the type's description.
        public var heightScale: Float, widthScale: Float, centerY: Float
    }

    /// Limits of the solve: the largest head rotations drawn (degrees), and the smallest gaps
    /// (rig units) kept between lids and between lips however the displacements sum.
    public struct Limits: Codable, Equatable, Sendable {
        /// Largest yaw and pitch drawn, in degrees.
        public var maxYaw: Float, maxPitch: Float
        /// An upper lid stays this far above the lower lid below it.
        public var lidGap: Float
        /// The lower lip's inner edge stays this far below the upper lip's.
        public var lipGap: Float
        /// The lower lip is at least this thick.
        public var lowerLipThickness: Float
        /// The upper lip is at least this thick.
        public var upperLipThickness: Float
    }

    /// How an explicit gaze moves the eyes: iris travel at |gaze| = 1, and how far the upper lids
    /// follow a downward look (`lidFollow` × `lidProfile[k]` for lid point k).
    public struct GazeMotion: Codable, Equatable, Sendable {
        /// See the type's description.
        public var irisTravelX: Float, irisTravelY: Float, lidFollow: Float
        /// Per upper-lid point (inner → outer), its share of `lidFollow`.
        public var lidProfile: [Float]
    }

    /// How the parts of the skin loop that face away are pushed out beyond the silhouette: by
    /// smoothstep(from, to, normal z) × push head units.
    public struct SkinLoopHiding: Codable, Equatable, Sendable {
        /// See the type's description.
        public var from: Float, to: Float, push: Float
    }

    /// One blendshape's displacement field: at full strength point `points[i]` moves by `offsets[i]`.
    public struct Displacements: Codable, Equatable, Sendable {
        /// Indices of the points moved, in the order the offsets are applied.
        public var points: [Int]
        /// Each point's displacement at full strength, rig units.
        public var offsets: [SIMD3<Float>]
    }

    /// A colour written as `#rrggbb` when opaque and `rgba(r,g,b,a)` otherwise (CSS syntax).
    public struct ColorText: Codable, Equatable, Sendable {
        /// The colour.
        public var color: Color
        /// Wraps `color`.
        public init(_ color: Color) { self.color = color }

        /// Reads `#rrggbb` or `rgba(r,g,b,a)`.
        public init(from decoder: any Decoder) throws {
            let text = try decoder.singleValueContainer().decode(String.self)
            guard let color = ColorText.parse(text) else {
                throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath,
                                                        debugDescription: "\(text) is not #rrggbb or rgba(r,g,b,a)"))
            }
            self.color = color
        }

        /// Writes `#rrggbb` or `rgba(r,g,b,a)`; only 8-bit sRGB components can be written.
        public func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            let components = [color.red, color.green, color.blue].map { ($0 * 255).rounded() }
            guard zip(components, [color.red, color.green, color.blue]).allSatisfy({ Float(UInt8($0.0)) / 255 == $0.1 }) else {
                throw EncodingError.invalidValue(color, .init(codingPath: encoder.codingPath,
                                                              debugDescription: "rig colours are 8-bit sRGB"))
            }
            let bytes = components.map { UInt8($0) }
            if color.alpha == 1 {
                try container.encode("#" + bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined())
            } else {
                try container.encode("rgba(\(bytes[0]),\(bytes[1]),\(bytes[2]),\(color.alpha))")
            }
        }

        static func parse(_ text: String) -> Color? {
            if text.hasPrefix("#"), text.count == 7, let v = UInt32(text.dropFirst(), radix: 16) {
                return Color(rgb8: UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF))
            }
            guard text.hasPrefix("rgba("), text.hasSuffix(")") else { return nil }
            let parts = text.dropFirst(5).dropLast().split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            guard parts.count == 4, let r = UInt8(parts[0]), let g = UInt8(parts[1]), let b = UInt8(parts[2]),
                  let a = Float(parts[3]), a.isFinite, (0...1).contains(a) else { return nil }
            return Color(rgb8: r, g, b, alpha: a)
        }
    }

    /// A named style: line art (`sketch`) or filled shapes (`mask`), with the fields of
    /// `SketchStyle` or `MaskStyle`.
    public struct Style: Codable, Equatable, Sendable {
        /// `sketch` or `mask`.
        public var kind: String
        /// Sketch: as in `SketchStyle`.
        public var lineColor: ColorText?
        /// Sketch: as in `SketchStyle`.
        public var lineWidth: Float?
        /// Sketch: as in `SketchStyle`.
        public var mouthFillOpacity: Float?
        /// Mask: as in `MaskStyle` (`hair` and `shirt` may be absent).
        public var skin: ColorText?, skinShade: ColorText?, hair: ColorText?, brows: ColorText?
        /// See `skin`.
        public var eyeWhite: ColorText?, iris: ColorText?, pupil: ColorText?, lashes: ColorText?
        /// See `skin`.
        public var lips: ColorText?, mouthInterior: ColorText?, teeth: ColorText?, tongue: ColorText?
        /// See `skin`.
        public var blush: ColorText?, shadow: ColorText?, shirt: ColorText?
    }

    /// A named background: `none`, `solid` (`color`) or `gradient` (`top` to `bottom`).
    public struct Background: Codable, Equatable, Sendable {
        /// `none`, `solid` or `gradient`.
        public var kind: String
        /// A solid background's colour.
        public var color: ColorText?
        /// A gradient's colours.
        public var top: ColorText?
        /// See `top`.
        public var bottom: ColorText?
    }

    /// `formatName`.
    public var format: String
    /// The format version (`currentVersion` for data this code reads).
    public var version: Int
    /// What the file is, for a person opening it.
    public var about: String
    /// Indices of the named points.
    public var layout: Layout
    /// Where the head sits in a view.
    public var placement: Placement
    /// The point the head turns about (behind and below its centre, towards the neck).
    public var pivot: SIMD3<Float>
    /// Limits of the solve.
    public var limits: Limits
    /// Iris radius in rig units.
    public var irisRadius: Float
    /// How an explicit gaze moves irises and lids.
    public var gaze: GazeMotion
    /// Rest positions of all control points, in `layout` order.
    public var points: [SIMD3<Float>]
    /// Per ARKit blendshape name, its displacement field; absent names move nothing.
    public var blendShapes: [String: Displacements]
    /// Outward directions of the outline meridians and of the hair meridians.
    public var outlineDirections: [SIMD3<Float>]
    /// See `outlineDirections`.
    public var hairDirections: [SIMD3<Float>]
    /// Rest normals of the skin loop, to tell its visible parts from those behind the head.
    public var skinLoopNormals: [SIMD3<Float>]
    /// How the skin loop's hidden parts are pushed out of sight.
    public var skinLoopHiding: SkinLoopHiding
    /// Named styles (`mask`, `sketch`) and the name of the default one.
    public var styles: [String: Style]
    /// See `styles`.
    public var defaultStyle: String
    /// Named backgrounds and the name of the default one.
    public var backgrounds: [String: Background]
    /// See `backgrounds`.
    public var defaultBackground: String
}

// MARK: - Reading and writing

/// Why rig data cannot be used: a missing or unreadable file, another format or version, or data
/// that does not fit the renderers' layout.
public struct AvatarRigError: Error, CustomStringConvertible, Equatable, Sendable {
    /// The kind of failure; match with `==`.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The kind's name, e.g. `"unsupportedVersion"`.
        public let description: String
        /// The file does not exist or cannot be read.
        public static let unreadable = Code(description: "unreadable")
        /// The bytes are not JSON of the rig's shape, or name another format.
        public static let notARig = Code(description: "notARig")
        /// The file is a rig of a version this code does not read.
        public static let unsupportedVersion = Code(description: "unsupportedVersion")
        /// A value is missing, out of range or inconsistent with the layout.
        public static let invalid = Code(description: "invalid")
    }

    /// What kind of failure this is.
    public let code: Code
    /// What failed, and what to do about it.
    public let description: String

    init(_ code: Code, _ description: String) { self.code = code; self.description = description }

    /// Errors of the same kind are equal, whatever their messages.
    public static func == (a: Self, b: Self) -> Bool { a.code == b.code }
}

extension AvatarRigData {
    /// Decodes and validates rig data from JSON.
    /// - Throws: `AvatarRigError` (`notARig`, `unsupportedVersion`, `invalid`).
    public init(json: Data) throws {
        struct Header: Decodable { var format: String?; var version: Int? }
        guard let header = try? JSONDecoder().decode(Header.self, from: json) else {
            throw AvatarRigError(.notARig, "not a Veil avatar rig: the data is not a JSON object")
        }
        guard header.format == AvatarRigData.formatName else {
            throw AvatarRigError(.notARig, "not a Veil avatar rig: format is \(header.format.map { "\"\($0)\"" } ?? "missing"), not \"\(AvatarRigData.formatName)\"")
        }
        guard header.version == AvatarRigData.currentVersion else {
            throw AvatarRigError(.unsupportedVersion, "avatar rig version \(header.version.map(String.init) ?? "missing") is not supported (this Veil reads version \(AvatarRigData.currentVersion)); regenerate it with `veil rig`")
        }
        do {
            self = try JSONDecoder().decode(AvatarRigData.self, from: json)
        } catch let error as DecodingError {
            throw AvatarRigError(.notARig, "invalid avatar rig: \(AvatarRigData.describe(error))")
        }
        try validate()
    }

    /// Reads rig data from a file.
    /// - Throws: `AvatarRigError` (`unreadable` when the file is missing or unreadable, or as `init(json:)`).
    public init(contentsOf url: URL) throws {
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw AvatarRigError(.unreadable, "cannot read the avatar rig \(url.path): \(error.localizedDescription); write it with `veil rig --out \(url.path)`")
        }
        do {
            try self.init(json: data)
        } catch let error as AvatarRigError {
            throw AvatarRigError(error.code, "\(url.path): \(error.description)")
        }
    }

    /// The JSON text `veil rig` writes: keys in a fixed order, one top-level field per line and one
    /// blendshape per line, numbers as the shortest text that reads back as the same `Float`. The
    /// same data always gives the same bytes.
    public func jsonData() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        func text<T: Encodable>(_ value: T) throws -> String { String(decoding: try encoder.encode(value), as: UTF8.self) }
        var fields: [(String, String)] = [
            ("format", try text(format)), ("version", try text(version)), ("about", try text(about)),
            ("layout", try text(layout)), ("placement", try text(placement)), ("pivot", try text(pivot)),
            ("limits", try text(limits)), ("irisRadius", try text(irisRadius)), ("gaze", try text(gaze)),
            ("skinLoopHiding", try text(skinLoopHiding)),
            ("defaultStyle", try text(defaultStyle)), ("styles", try text(styles)),
            ("defaultBackground", try text(defaultBackground)), ("backgrounds", try text(backgrounds)),
            ("outlineDirections", try text(outlineDirections)), ("hairDirections", try text(hairDirections)),
            ("skinLoopNormals", try text(skinLoopNormals)), ("points", try text(points)),
        ]
        let shapes = try blendShapes.keys.sorted().map { "\(try text($0)):\(try text(blendShapes[$0]!))" }
        fields.append(("blendShapes", "{\n" + shapes.joined(separator: ",\n") + "\n}"))
        let body = try fields.map { "\(try text($0.0)):\($0.1)" }.joined(separator: ",\n")
        return Data(("{\n" + body + "\n}\n").utf8)
    }

    /// Checks everything the renderers rely on, so that a rig that passes cannot make them index
    /// out of range or draw NaNs.
    func validate() throws {
        func fail(_ what: String) -> AvatarRigError { AvatarRigError(.invalid, "invalid avatar rig: \(what)") }
        guard layout == Layout.current else {
            throw fail("its point layout differs from the one this Veil draws (\(Layout.current.pointCount) points); regenerate it with `veil rig`")
        }
        let n = layout.pointCount
        func finite(_ v: SIMD3<Float>) -> Bool { v.x.isFinite && v.y.isFinite && v.z.isFinite }
        guard points.count == n, points.allSatisfy(finite) else { throw fail("needs \(n) finite points, has \(points.count)") }
        guard outlineDirections.count == layout.meridians, hairDirections.count == layout.meridians,
              (outlineDirections + hairDirections).allSatisfy(finite) else {
            throw fail("needs \(layout.meridians) finite outline and hair directions")
        }
        guard skinLoopNormals.count == layout.skinLoopCount, skinLoopNormals.allSatisfy(finite) else {
            throw fail("needs \(layout.skinLoopCount) finite skin loop normals")
        }
        for (name, field) in blendShapes {
            guard BlendShape(name: name) != nil else { throw fail("\"\(name)\" is not an ARKit blendshape") }
            guard field.points.count == field.offsets.count else { throw fail("\(name) has \(field.points.count) points but \(field.offsets.count) offsets") }
            guard field.points.allSatisfy({ (0..<n).contains($0) }), field.offsets.allSatisfy(finite) else {
                throw fail("\(name) moves a point outside 0..<\(n) or by a non-finite offset")
            }
        }
        let scalars = [placement.heightScale, placement.widthScale, placement.centerY, limits.maxYaw, limits.maxPitch,
                       limits.lidGap, limits.lipGap, limits.lowerLipThickness, limits.upperLipThickness, irisRadius,
                       gaze.irisTravelX, gaze.irisTravelY, gaze.lidFollow, skinLoopHiding.from, skinLoopHiding.to,
                       skinLoopHiding.push] + gaze.lidProfile
        guard scalars.allSatisfy({ $0.isFinite }), finite(pivot), gaze.lidProfile.count == 3,
              skinLoopHiding.from != skinLoopHiding.to else {
            throw fail("a solve parameter is missing or not finite")
        }
        for (name, style) in styles {
            guard (try? AvatarStyle(style)) != nil else { throw fail("style \"\(name)\" lacks a field of its kind \"\(style.kind)\"") }
        }
        for (name, background) in backgrounds {
            guard (try? AvatarBackground(background)) != nil else { throw fail("background \"\(name)\" is incomplete") }
        }
        guard styles[defaultStyle] != nil, backgrounds[defaultBackground] != nil else {
            throw fail("the default style or background is not among the named ones")
        }
    }

    private static func describe(_ error: DecodingError) -> String {
        func path(_ context: DecodingError.Context) -> String {
            let keys = context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
            return keys.isEmpty ? "" : " at \(keys)"
        }
        switch error {
        case .keyNotFound(let key, let context): return "missing \"\(key.stringValue)\"\(path(context))"
        case .typeMismatch(_, let context), .valueNotFound(_, let context), .dataCorrupted(let context):
            return "\(context.debugDescription)\(path(context))"
        @unknown default: return "\(error)"
        }
    }
}

// MARK: - Styles and backgrounds as data

extension AvatarRigData.Style {
    init(_ style: AvatarStyle) {
        self.init(kind: "")
        switch style {
        case .sketch(let s):
            kind = "sketch"
            lineColor = .init(s.lineColor); lineWidth = s.lineWidth; mouthFillOpacity = s.mouthFillOpacity
        case .mask(let m):
            kind = "mask"
            skin = .init(m.skin); skinShade = .init(m.skinShade); hair = m.hair.map { .init($0) }; brows = .init(m.brows)
            eyeWhite = .init(m.eyeWhite); iris = .init(m.iris); pupil = .init(m.pupil); lashes = .init(m.lashes)
            lips = .init(m.lips); mouthInterior = .init(m.mouthInterior); teeth = .init(m.teeth); tongue = .init(m.tongue)
            blush = .init(m.blush); shadow = .init(m.shadow); shirt = m.shirt.map { .init($0) }
        }
    }

    private init(kind: String) { self.kind = kind }
}

extension AvatarStyle {
    /// The style a rig file describes.
    /// - Throws: `AvatarRigError.invalid` when a field its kind needs is missing.
    public init(_ data: AvatarRigData.Style) throws {
        func need<T>(_ value: T?, _ name: String) throws -> T {
            guard let value else { throw AvatarRigError(.invalid, "invalid avatar rig: \(data.kind) style without \(name)") }
            return value
        }
        switch data.kind {
        case "sketch":
            self = .sketch(SketchStyle(lineColor: try need(data.lineColor, "lineColor").color,
                                       lineWidth: try need(data.lineWidth, "lineWidth"),
                                       mouthFillOpacity: try need(data.mouthFillOpacity, "mouthFillOpacity")))
        case "mask":
            self = .mask(MaskStyle(skin: try need(data.skin, "skin").color, skinShade: try need(data.skinShade, "skinShade").color,
                                   hair: data.hair?.color, brows: try need(data.brows, "brows").color,
                                   eyeWhite: try need(data.eyeWhite, "eyeWhite").color, iris: try need(data.iris, "iris").color,
                                   pupil: try need(data.pupil, "pupil").color, lashes: try need(data.lashes, "lashes").color,
                                   lips: try need(data.lips, "lips").color,
                                   mouthInterior: try need(data.mouthInterior, "mouthInterior").color,
                                   teeth: try need(data.teeth, "teeth").color, tongue: try need(data.tongue, "tongue").color,
                                   blush: try need(data.blush, "blush").color, shadow: try need(data.shadow, "shadow").color,
                                   shirt: data.shirt?.color))
        default:
            throw AvatarRigError(.invalid, "invalid avatar rig: unknown style kind \"\(data.kind)\"")
        }
    }
}

extension AvatarRigData.Background {
    init?(_ background: AvatarBackground) {
        switch background {
        case .none: self.init(kind: "none")
        case .solid(let c): self.init(kind: "solid", color: .init(c))
        case .verticalGradient(let top, let bottom): self.init(kind: "gradient", top: .init(top), bottom: .init(bottom))
        case .image: return nil
        }
    }
}

extension AvatarBackground {
    /// The background a rig file describes.
    /// - Throws: `AvatarRigError.invalid` when a field its kind needs is missing.
    public init(_ data: AvatarRigData.Background) throws {
        switch (data.kind, data.color, data.top, data.bottom) {
        case ("none", _, _, _): self = .none
        case ("solid", let color?, _, _): self = .solid(color.color)
        case ("gradient", _, let top?, let bottom?): self = .verticalGradient(top: top.color, bottom: bottom.color)
        default: throw AvatarRigError(.invalid, "invalid avatar rig: background of kind \"\(data.kind)\" is incomplete")
        }
    }
}
