import VeilCore

/// Expressions for tests of what carries them.
public enum TestExpressions {
    /// A random expression with every field set: coefficients anywhere in 0…1, the head within
    /// ±170° yaw and roll and ±80° pitch, a gaze within ±1. The same `seed` gives the same one.
    public static func random(seed: UInt64) -> VeilCore.Expression {
        var random = SplitMix64(seed: seed &* 0x9E37 &+ 1)
        var expression = VeilCore.Expression(headPose: HeadPose(yaw: .random(in: -170...170, using: &random),
                                                                pitch: .random(in: -80...80, using: &random),
                                                                roll: .random(in: -170...170, using: &random)),
                                             gaze: Gaze(x: .random(in: -1...1, using: &random), y: .random(in: -1...1, using: &random)))
        for shape in BlendShape.allCases { expression[shape] = .random(in: 0...1, using: &random) }
        return expression
    }
}
