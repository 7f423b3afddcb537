/// Indices of the canonical face's control points in `AvatarRig.base` and `AvatarPose.points`.
///
/// Sides are the person's own: `.left` lies at +x (the viewer's right). Groups that run across the
/// face go from the viewer's left (-x) to the viewer's right (+x).
enum RigPoint {
    // Each eye: +0 inner corner, +1…3 upper lid (inner → outer), +4 outer corner,
    // +5…7 lower lid (outer → inner), +8 iris centre.
    static func eye(_ side: FaceSide) -> Int { side == .right ? 0 : 9 }
    static func upperLid(_ side: FaceSide, _ k: Int) -> Int { eye(side) + 1 + k }
    /// The lower-lid point under upper-lid point `k`.
    static func lowerLid(_ side: FaceSide, _ k: Int) -> Int { eye(side) + 7 - k }
    static func innerCorner(_ side: FaceSide) -> Int { eye(side) }
    static func outerCorner(_ side: FaceSide) -> Int { eye(side) + 4 }
    static func iris(_ side: FaceSide) -> Int { eye(side) + 8 }
    static func eyeLoop(_ side: FaceSide) -> [Int] { Array(eye(side)..<(eye(side) + 8)) }

    /// Five brow points, inner → outer.
    static func brow(_ side: FaceSide) -> Range<Int> { side == .right ? 18..<23 : 23..<28 }

    static let noseTip = 28
    static let columella = 29
    static func alar(_ side: FaceSide) -> Int { side == .right ? 30 : 31 }
    static func nostril(_ side: FaceSide) -> Int { side == .right ? 32 : 33 }
    /// Two points of the nose's side line, upper then lower.
    static func bridge(_ side: FaceSide) -> Int { side == .right ? 34 : 36 }
    static let nose = Array(28..<38)

    static let cornerRight = 38
    static let cornerLeft = 39
    static func corner(_ side: FaceSide) -> Int { side == .right ? cornerRight : cornerLeft }
    /// Five points of the upper lip's outer edge (-x → +x), the middle one the centre.
    static let upperOuter = 40
    /// Three points each (-x, centre, +x).
    static let upperInner = 45
    static let lowerInner = 48
    static let lowerOuter = 51
    static let tongue = 54

    static func cheek(_ side: FaceSide) -> Int { side == .right ? 55 : 56 }
    static func ear(_ side: FaceSide) -> Int { side == .right ? 57 : 58 }
    /// A closed loop on the head's surface around the face's skin: the hairline over the forehead,
    /// the temples, behind the ears and round the nape; the hair is on the far side of it.
    static let skinLoop = 59
    static let skinLoopCount = 96
    static let headCenter = skinLoop + skinLoopCount
    static let featureCount = headCenter + 1

    /// Surface samples: for each outline meridian, `depthSamples` points from the front to the back.
    static let outlineMeridians = 48
    static let hairMeridians = outlineMeridians
    static let depthSamples = 15
    static let headGrid = featureCount
    static let hairGrid = headGrid + outlineMeridians * depthSamples
    static let count = hairGrid + hairMeridians * depthSamples

    static let outerLipsLoop: [Int] = [cornerRight] + Array(upperOuter..<(upperOuter + 5)) + [cornerLeft]
        + [lowerOuter + 2, lowerOuter + 1, lowerOuter]
    static let innerLipsLoop: [Int] = [cornerRight] + Array(upperInner..<(upperInner + 3)) + [cornerLeft]
        + [lowerInner + 2, lowerInner + 1, lowerInner]
}
