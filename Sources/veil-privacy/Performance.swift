import Foundation
import VeilCore
import VeilSynth

/// One session's performance: a person talking for a minute or more, drawn afresh for every
/// session from the same statistics, so that nobody performs the same thing twice and everybody
/// performs from the same distribution.
///
/// Phrases of syllables (jaw drops of varied depth, some closing fully, one in five with rounded
/// lips as in "oo") separated by pauses, as in conversation, and now and then a pucker held in a
/// pause; blinks at irregular intervals, now and then a double blink or a wink; smiles, frowns and
/// brow raises of varied length and strength; head turns and nods; glances to the side. Every
/// timing is random per session.
struct Performance {
    static let framesPerSecond = 30.0

    /// The script of `seconds` seconds drawn with `seed`.
    static func script(seed: UInt64, seconds: Double) throws -> ExpressionScript {
        typealias K = ExpressionScript.Keyframe
        var rng = SplitMix64(seed: seed)
        func uniform(_ range: ClosedRange<Double>) -> Double { Double.random(in: range, using: &rng) }
        func chance(_ p: Double) -> Bool { uniform(0...1) < p }
        var jaw: [K] = [], left: [K] = [], right: [K] = [], smile: [K] = [], brow: [K] = [], yaw: [K] = []
        var frown: [K] = [], pucker: [K] = [], pitch: [K] = []
        let end = seconds - 0.05
        // A rise, a hold and a fall back to rest, if it starts after the track's last key.
        func bump(_ track: inout [K], at start: Double, rise: Double, hold: Double, fall: Double, peak: Double) {
            guard start > (track.last?.time ?? -1), start + rise + hold + fall < end else { return }
            track += [K(time: start, value: 0), K(time: start + rise, value: peak), K(time: start + rise + hold, value: peak),
                      K(time: start + rise + hold + fall, value: 0)]
        }

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
                if chance(0.2) {
                    bump(&pucker, at: s + 0.01, rise: 0.4 * length, hold: 0.2 * length, fall: 0.35 * length, peak: uniform(0.5...0.9))
                }
                s += length
                jaw.append(K(time: s, value: chance(0.4) ? 0 : uniform(0...0.02)))
            }
            jaw.append(K(time: s + 0.02, value: 0))
            let pause = uniform(0.3...3)
            if pause > 1.4, chance(0.3) {
                bump(&pucker, at: s + 0.2, rise: uniform(0.12...0.25), hold: uniform(0.5...(pause - 0.9)), fall: uniform(0.12...0.25),
                     peak: uniform(0.5...1))
            }
            t = s + pause
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

        // A movement of the face rising over 0.12–0.4 s and falling over 0.15–0.5 s.
        func movement(_ track: inout [K], at start: Double, hold: Double, peak: Double) {
            bump(&track, at: start, rise: uniform(0.12...0.4), hold: hold, fall: uniform(0.15...0.5), peak: peak)
        }
        // Smiles every 3–15 s, 0.3–4 s long, and frowns every 8–30 s, 0.4–2 s, in between (the
        // mouth corners do one or the other); brow raises every 4–20 s, 0.2–1.5 s; head turns
        // every 2–12 s of 3–20°, held 0.3–4 s; nods every 4–15 s of 4–15° up or down, held 0.1–1 s.
        t = uniform(1...8)
        while t < end { movement(&smile, at: t, hold: uniform(0.3...4), peak: uniform(0.3...1)); t = (smile.last?.time ?? t) + uniform(3...15) }
        let smiles = stride(from: 0, to: smile.count - 3, by: 4).map { smile[$0].time...smile[$0 + 3].time }
        t = uniform(3...15)
        while t < end {
            let hold = uniform(0.4...2)
            if !smiles.contains(where: { $0.overlaps((t - 0.3)...(t + hold + 1.2)) }) {
                movement(&frown, at: t, hold: hold, peak: uniform(0.4...1))
            }
            t += hold + uniform(8...30)
        }
        t = uniform(1...10)
        while t < end { movement(&brow, at: t, hold: uniform(0.2...1.5), peak: uniform(0.4...1)); t = (brow.last?.time ?? t) + uniform(4...20) }
        t = uniform(0.5...6)
        while t < end {
            movement(&yaw, at: t, hold: uniform(0.3...4), peak: (chance(0.5) ? 1 : -1) * uniform(3...20))
            t = (yaw.last?.time ?? t) + uniform(2...12)
        }
        t = uniform(1...8)
        while t < end {
            bump(&pitch, at: t, rise: uniform(0.15...0.3), hold: uniform(0.1...1), fall: uniform(0.15...0.4),
                 peak: (chance(0.6) ? -1 : 1) * uniform(4...15))
            t = (pitch.last?.time ?? t) + uniform(4...15)
        }
        // Glances every 2–10 s: the eyes turn 8–25° to one side (one in three also 5–10° up or
        // down) in a saccade of 40–80 ms, stay 0.3–2.5 s and come back.
        var gazeYaw: [K] = [], gazePitch: [K] = []
        t = uniform(0.5...5)
        while t < end {
            let rise = uniform(0.04...0.08), hold = uniform(0.3...2.5), fall = uniform(0.04...0.08)
            let sideways = (chance(0.5) ? 1 : -1) * uniform(8...25)
            let vertical = chance(1.0 / 3) ? (chance(0.5) ? 1 : -1) * uniform(5...10) : 0
            guard t + rise + hold + fall < end else { break }
            bump(&gazeYaw, at: t, rise: rise, hold: hold, fall: fall, peak: sideways)
            if vertical != 0 { bump(&gazePitch, at: t, rise: rise, hold: hold, fall: fall, peak: vertical) }
            t += rise + hold + fall + uniform(2...10)
        }
        return try ExpressionScript(framesPerSecond: framesPerSecond, duration: seconds,
                                    tracks: [.jawDrop: jaw, .blinkLeft: left, .blinkRight: right,
                                             .smile: smile, .browRaise: brow, .headYaw: yaw,
                                             .frown: frown, .pucker: pucker, .headPitch: pitch,
                                             .gazeYaw: gazeYaw, .gazePitch: gazePitch])
    }

    /// The loudness of the voice (RMS, samples in -1…1) while the jaw is `jawDrop` open: silence
    /// with the mouth closed, ordinary speech (about 0.1) at a syllable's usual opening. The voice
    /// is the same function of the script for every face, as it is a matter of the voice and not
    /// of the face; the strict level's mouth follows it.
    static func voiceLevel(jawDrop: Double) -> Double {
        jawDrop < 0.005 ? 0.001 : 0.12 * pow(min(jawDrop / 0.08, 1.5), 0.7)
    }
}
