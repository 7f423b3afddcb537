/// A straight (not premultiplied) sRGB colour with alpha, each component 0…1.
public struct Color: Equatable, Hashable, Sendable {
    /// Red, 0…1.
    public var red: Float
    /// Green, 0…1.
    public var green: Float
    /// Blue, 0…1.
    public var blue: Float
    /// Opacity, 0 (transparent) … 1 (opaque).
    public var alpha: Float

    /// A colour from components in 0…1; values outside are clamped, NaN becomes 0.
    public init(red: Float, green: Float, blue: Float, alpha: Float = 1) {
        self.red = Color.unit(red); self.green = Color.unit(green)
        self.blue = Color.unit(blue); self.alpha = Color.unit(alpha)
    }

    /// A colour from 8-bit components, e.g. `Color(rgb8: 0xF2, 0xC4, 0x9E)`.
    public init(rgb8 red: UInt8, _ green: UInt8, _ blue: UInt8, alpha: Float = 1) {
        self.init(red: Float(red) / 255, green: Float(green) / 255, blue: Float(blue) / 255, alpha: alpha)
    }

    /// A grey level 0 (black) … 1 (white).
    public init(white: Float, alpha: Float = 1) {
        self.init(red: white, green: white, blue: white, alpha: alpha)
    }

    /// The same colour with opacity `alpha`.
    public func withAlpha(_ alpha: Float) -> Color {
        Color(red: red, green: green, blue: blue, alpha: alpha)
    }

    /// The colour `t` of the way (0…1) from `self` to `other`, alpha included.
    public func mixed(with other: Color, _ t: Float) -> Color {
        let t = Color.unit(t)
        return Color(red: red + (other.red - red) * t, green: green + (other.green - green) * t,
                     blue: blue + (other.blue - blue) * t, alpha: alpha + (other.alpha - alpha) * t)
    }

    /// Fully transparent black.
    public static let clear = Color(red: 0, green: 0, blue: 0, alpha: 0)
    /// Opaque black.
    public static let black = Color(white: 0)
    /// Opaque white.
    public static let white = Color(white: 1)

    private static func unit(_ v: Float) -> Float { v.isNaN ? 0 : min(max(v, 0), 1) }
}
