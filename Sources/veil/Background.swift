import Foundation
import VeilCore
import VeilMedia
import VeilRender

/// Parses `--background`: none, black, white, #rrggbb, gradient, gradient:#top,#bottom, or an
/// image file (the avatar's virtual background).
func parseBackground(_ text: String?) throws -> AvatarBackground {
    guard let text, !text.isEmpty else { return defaultBackground }
    switch text.lowercased() {
    case "none": return .none
    case "black": return .solid(Color(white: 0))
    case "white": return .solid(Color(white: 1))
    case "gradient": return defaultBackground
    default: break
    }
    if let color = parseColor(text) { return .solid(color) }
    if text.lowercased().hasPrefix("gradient:") {
        let parts = text.dropFirst("gradient:".count).split(separator: ",").map(String.init)
        guard parts.count == 2, let top = parseColor(parts[0]), let bottom = parseColor(parts[1]) else {
            throw UsageError("--background gradient:TOP,BOTTOM needs two colours like #334455, not \(text)")
        }
        return .verticalGradient(top: top, bottom: bottom)
    }
    guard FileManager.default.fileExists(atPath: text) else {
        throw UsageError("--background must be none, black, white, #rrggbb, gradient[:#top,#bottom] or an image file; \(text) is none of these")
    }
    return .image(CanvasImage(try ImageIO.load(URL(fileURLWithPath: text))))
}

/// A dark blue gradient: calm behind either style.
let defaultBackground = AvatarBackground.verticalGradient(top: Color(rgb8: 0x3A, 0x4A, 0x6B), bottom: Color(rgb8: 0x1B, 0x22, 0x33))

func parseColor(_ text: String) -> Color? {
    guard text.hasPrefix("#"), text.count == 7, let v = UInt32(text.dropFirst(), radix: 16) else { return nil }
    return Color(rgb8: UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF))
}

func parseStyle(_ text: String?) throws -> AvatarStyle {
    switch text?.lowercased() ?? "mask" {
    case "mask": return .mask
    case "sketch": return .sketch
    default: throw UsageError("--style must be sketch or mask, not \(text ?? "")")
    }
}
