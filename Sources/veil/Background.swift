import Foundation
import VeilCore
import VeilMedia
import VeilRender

/// Parses `--background`: a named background (gradient, dark, black, white, none), #rrggbb,
/// gradient:#top,#bottom, or an image file (the avatar's virtual background).
func parseBackground(_ text: String?) throws -> AvatarBackground {
    guard let text, !text.isEmpty else { return AvatarBackground.default }
    if let named = AvatarBackground.named.first(where: { $0.name == text.lowercased() }) { return named.background }
    if let color = parseColor(text) { return .solid(color) }
    if text.lowercased().hasPrefix("gradient:") {
        let parts = text.dropFirst("gradient:".count).split(separator: ",").map(String.init)
        guard parts.count == 2, let top = parseColor(parts[0]), let bottom = parseColor(parts[1]) else {
            throw UsageError("--background gradient:TOP,BOTTOM needs two colours like #334455, not \(text)")
        }
        return .verticalGradient(top: top, bottom: bottom)
    }
    guard FileManager.default.fileExists(atPath: text) else {
        throw UsageError("--background must be \(AvatarBackground.named.map(\.name).joined(separator: ", ")), #rrggbb, gradient:#top,#bottom or an image file; \(text) is none of these")
    }
    return .image(CanvasImage(try ImageIO.load(URL(fileURLWithPath: text))))
}

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
