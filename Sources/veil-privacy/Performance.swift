import VeilCore
import VeilSynth

/// One session's performance: a person talking for a minute or more, drawn afresh for every
/// session from the same statistics, so that nobody performs the same thing twice and everybody
/// performs from the same distribution.
///
/// Phrases of syllables (jaw drops of varied depth, some closing fully) separated by pauses, as in
/// conversation; blinks at irregular intervals, now and then a double blink or a wink; smiles and
/// brow raises of varied length and strength; head turns. Every timing is random per session.
struct Performance {
    static let framesPerSecond = 30.0

    /// The script of `seconds` seconds drawn with `seed`.
    static func script(seed: UInt64, seconds: Double) throws -> ExpressionScript {
        typealias K = ExpressionScript.Keyframe
        var rng = SplitMix64(seed: seed)
        func uniform(_ range: ClosedRange<Double>) -> Double { Double.random(in: range, using: &rng) }
        func chance(_ p: Double) -> Bool { uniform(0...1) < p }
        var jaw: [K] = [], left: [K] = [], right: [K] = [], smile: [K] = [], brow: [K] = [], yaw: [K] = []
        let end = seconds - 0.05

        // Speech: phrases of 1–5 s with pauses of 0.3–3 s; talking about 60 % of the time.
        var t = uniform(0...0.8)
        while t < end - 0.6 {
            let phrase = min(uniform(1...5), end - 0.3 - t)
            let stop = t + phrase
            jaw.append(K(time: t, value: 0))
            var s = t
            while true {
                let length = uniform(0.14...0.30)
                guard s + length <= stop else { break }
                jaw.append(K(time: s + length / 2, value: uniform(0.02...0.13)))
                s += length
                jaw.append(K(time: s, value: chance(0.4) ? 0 : uniform(0...0.02)))
            }
            jaw.append(K(time: s + 0.02, value: 0))
            t = s + uniform(0.3...3)
        }

        // Blinks every 1.5–7 s; one in eight doubled, one in twelve a wink of one eye.
        t = uniform(0.3...3)
        while t < end - 0.5 {
            let length = uniform(0.12...0.30)
            let wink = chance(1.0 / 12), eye = chance(0.5)
            let closed = [K(time: t, value: 0), K(time: t + 0.4 * length, value: 1), K(time: t + length, value: 0)]
            if !wink || eye { left += closed }
            if !wink || !eye { right += closed }
            if !wink, chance(1.0 / 8), t + 2.3 * length < end {
                let again = t + length + uniform(0.05...0.2)
                let second = [K(time: again, value: 0), K(time: again + 0.4 * length, value: 1), K(time: again + length, value: 0)]
                left += second; right += second
                t = again + length
            } else {
                t += length
            }
            t += uniform(1.5...7)
        }

        // A rise, a hold and a fall back to rest.
        func bump(_ track: inout [K], at start: Double, hold: Double, peak: Double) {
            let rise = uniform(0.12...0.4), fall = uniform(0.15...0.5)
            guard start + rise + hold + fall < end else { return }
            track += [K(time: start, value: 0), K(time: start + rise, value: peak), K(time: start + rise + hold, value: peak),
                      K(time: start + rise + hold + fall, value: 0)]
        }
        // Smiles every 3–15 s, 0.3–4 s long; brow raises every 4–20 s, 0.2–1.5 s; head turns every
        // 2–12 s of 3–20°, held 0.3–4 s.
        t = uniform(1...8)
        while t < end { bump(&smile, at: t, hold: uniform(0.3...4), peak: uniform(0.3...1)); t = (smile.last?.time ?? t) + uniform(3...15) }
        t = uniform(1...10)
        while t < end { bump(&brow, at: t, hold: uniform(0.2...1.5), peak: uniform(0.4...1)); t = (brow.last?.time ?? t) + uniform(4...20) }
        t = uniform(0.5...6)
        while t < end {
            bump(&yaw, at: t, hold: uniform(0.3...4), peak: (chance(0.5) ? 1 : -1) * uniform(3...20))
            t = (yaw.last?.time ?? t) + uniform(2...12)
        }
        return try ExpressionScript(framesPerSecond: framesPerSecond, duration: seconds,
                                    tracks: [.jawDrop: jaw, .blinkLeft: left, .blinkRight: right,
                                             .smile: smile, .browRaise: brow, .headYaw: yaw])
    }
}
