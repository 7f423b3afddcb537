/// Line art of the canonical face: outline, brows, eyes with irises, nose, lips.
public struct SketchStyle: Sendable, Equatable {
    /// Colour of the lines.
    public var lineColor: Color
    /// Line width as a fraction of the head's height (never thinner than one pixel).
    public var lineWidth: Float
    /// Opacity of the mouth's interior fill when the mouth is open, 0 for none.
    public var mouthFillOpacity: Float

    /// A sketch style; light lines by default, which read on dark and on image backgrounds.
    public init(lineColor: Color = Color(rgb8: 0xF2, 0xF5, 0xFA), lineWidth: Float = 0.011,
                mouthFillOpacity: Float = 0.35) {
        self.lineColor = lineColor; self.lineWidth = lineWidth; self.mouthFillOpacity = mouthFillOpacity
    }
}

/// Filled, friendly shapes readable at thumbnail size: a shaded face with hair, ears, neck and
/// shoulders, dark eyes and brows, lips and an open mouth's interior with teeth.
public struct MaskStyle: Sendable, Equatable {
    /// Lit skin colour.
    public var skin: Color
    /// Skin colour in shade (face edges, ears, neck).
    public var skinShade: Color
    /// Hair colour; nil for no hair.
    public var hair: Color?
    /// Brow colour.
    public var brows: Color
    /// Eye white.
    public var eyeWhite: Color
    /// Iris colour.
    public var iris: Color
    /// Pupil colour.
    public var pupil: Color
    /// Upper lid line.
    public var lashes: Color
    /// Lip colour.
    public var lips: Color
    /// The open mouth's interior.
    public var mouthInterior: Color
    /// Teeth.
    public var teeth: Color
    /// Tongue.
    public var tongue: Color
    /// Cheek blush (its alpha is the strength at the centre).
    public var blush: Color
    /// The translucent shadow along the head's lower and far edges.
    public var shadow: Color
    /// Shirt colour; nil for no neck and shoulders.
    public var shirt: Color?

    /// A mask style with a warm default palette.
    public init(skin: Color = Color(rgb8: 0xF3, 0xC9, 0xA4), skinShade: Color = Color(rgb8: 0xD8, 0x9F, 0x7C),
                hair: Color? = Color(rgb8: 0x4E, 0x35, 0x2A), brows: Color = Color(rgb8: 0x3E, 0x2B, 0x23),
                eyeWhite: Color = Color(rgb8: 0xFC, 0xFA, 0xF6), iris: Color = Color(rgb8: 0x5A, 0x3E, 0x2C),
                pupil: Color = Color(rgb8: 0x17, 0x11, 0x10), lashes: Color = Color(rgb8: 0x2C, 0x1F, 0x1B),
                lips: Color = Color(rgb8: 0xC9, 0x6E, 0x6C), mouthInterior: Color = Color(rgb8: 0x4D, 0x17, 0x1E),
                teeth: Color = Color(rgb8: 0xFB, 0xF8, 0xF1), tongue: Color = Color(rgb8: 0xE0, 0x7C, 0x80),
                blush: Color = Color(rgb8: 0xF2, 0x86, 0x7E, alpha: 0.38),
                shadow: Color = Color(rgb8: 0x8A, 0x4A, 0x32, alpha: 0.16),
                shirt: Color? = Color(rgb8: 0x3C, 0x8C, 0x98)) {
        self.skin = skin; self.skinShade = skinShade; self.hair = hair; self.brows = brows
        self.eyeWhite = eyeWhite; self.iris = iris; self.pupil = pupil; self.lashes = lashes
        self.lips = lips; self.mouthInterior = mouthInterior; self.teeth = teeth; self.tongue = tongue
        self.blush = blush; self.shadow = shadow; self.shirt = shirt
    }
}

/// How the canonical face is drawn. Styles only decide how the rig's curves are painted; the face's
/// geometry is the same in all of them.
public enum AvatarStyle: Sendable, Equatable {
    /// Anti-aliased line art.
    case sketch(SketchStyle)
    /// Filled shapes.
    case mask(MaskStyle)

    /// Line art with the default colours.
    public static let sketch = AvatarStyle.sketch(SketchStyle())
    /// Filled shapes with the default palette.
    public static let mask = AvatarStyle.mask(MaskStyle())
}

/// What is drawn behind the avatar in its view.
public enum AvatarBackground: Sendable {
    /// Nothing: the view is cleared to transparent (black on an opaque output).
    case none
    /// One colour.
    case solid(Color)
    /// A gradient from `top` to `bottom`.
    case verticalGradient(top: Color, bottom: Color)
    /// A picture scaled to cover the view (aspect ratio kept, centred, the overflow cropped). Keep
    /// the same `CanvasImage` from frame to frame so that the backend can reuse its conversion.
    case image(CanvasImage)
}

extension AvatarStyle {
    /// The named styles, the default first: what `--style` and the browser's renderer accept.
    public static let named: [(name: String, style: AvatarStyle)] = [("mask", .mask), ("sketch", .sketch)]
}

extension AvatarBackground {
    /// What the avatar is drawn on unless told otherwise: `gradient`.
    public static let `default` = gradient

    /// The default background: a dark blue gradient, calm behind either style.
    public static let gradient = AvatarBackground.verticalGradient(top: Color(rgb8: 0x3A, 0x4A, 0x6B),
                                                                   bottom: Color(rgb8: 0x1B, 0x22, 0x33))

    /// The named backgrounds, the default first: what `--background` and the browser's renderer accept.
    public static let named: [(name: String, background: AvatarBackground)] = [
        ("gradient", .gradient), ("dark", .solid(Color(rgb8: 0x1F, 0x1F, 0x1F))),
        ("black", .solid(.black)), ("white", .solid(.white)), ("none", .none),
    ]
}
