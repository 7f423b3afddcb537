extension ExpressionScript {
    /// A 9-second, 30 fps "talking" performance: four spoken phrases with syllables of varied
    /// jaw drop (up to 0.12 of face height, some closing fully mid-phrase) separated by closed-mouth
    /// pauses, five blinks of both eyes (150–250 ms, at least 0.8 s apart), three smiles, two brow
    /// raises and one head turn of 10° to the person's own left and back.
    public static let talking: ExpressionScript = {
        typealias K = Keyframe
        // (syllable length s, peak jaw drop, jaw drop at the syllable's end)
        let phrases: [(start: Double, syllables: [(Double, Double, Double)])] = [
            (0.50, [(0.22, 0.05, 0.010), (0.24, 0.09, 0.000), (0.18, 0.03, 0.015), (0.26, 0.07, 0.005),
                    (0.24, 0.11, 0.020), (0.20, 0.04, 0.000), (0.22, 0.06, 0.000)]),
            (2.90, [(0.24, 0.08, 0.010), (0.18, 0.02, 0.000), (0.22, 0.06, 0.015), (0.28, 0.10, 0.005),
                    (0.20, 0.05, 0.010), (0.18, 0.035, 0.000), (0.26, 0.09, 0.010), (0.22, 0.04, 0.000)]),
            (5.55, [(0.20, 0.04, 0.005), (0.24, 0.07, 0.010), (0.28, 0.12, 0.000), (0.22, 0.05, 0.015),
                    (0.18, 0.03, 0.000), (0.24, 0.08, 0.010), (0.22, 0.06, 0.000)]),
            (7.50, [(0.22, 0.06, 0.010), (0.26, 0.09, 0.000), (0.20, 0.04, 0.010), (0.24, 0.05, 0.000)]),
        ]
        var jaw: [K] = [K(time: 0, value: 0)]
        for phrase in phrases {
            var t = phrase.start
            jaw.append(K(time: t, value: 0))
            for (length, peak, end) in phrase.syllables {
                jaw.append(K(time: t + length / 2, value: peak))
                t += length
                jaw.append(K(time: t, value: end))
            }
        }
        // Both eyes; closing takes 40% of a blink, opening the rest.
        var blink: [K] = []
        for (start, length) in [(1.30, 0.18), (3.10, 0.22), (4.60, 0.15), (6.05, 0.25), (7.90, 0.20)] {
            blink += [K(time: start, value: 0), K(time: start + 0.4 * length, value: 1), K(time: start + length, value: 0)]
        }
        let smile: [K] = [
            K(time: 0.6, value: 0), K(time: 1.0, value: 0.7), K(time: 1.9, value: 0.7), K(time: 2.3, value: 0),
            K(time: 4.1, value: 0), K(time: 4.5, value: 1.0), K(time: 5.2, value: 0.9), K(time: 5.7, value: 0),
            K(time: 7.2, value: 0), K(time: 7.6, value: 0.5), K(time: 8.3, value: 0.5), K(time: 8.7, value: 0),
        ]
        let brow: [K] = [
            K(time: 2.0, value: 0), K(time: 2.3, value: 1.0), K(time: 2.8, value: 1.0), K(time: 3.1, value: 0),
            K(time: 6.3, value: 0), K(time: 6.6, value: 0.8), K(time: 7.1, value: 0.8), K(time: 7.4, value: 0),
        ]
        let yaw: [K] = [K(time: 3.3, value: 0), K(time: 4.1, value: 10), K(time: 4.7, value: 10), K(time: 5.5, value: 0)]
        let tracks: [FacialAction: [K]] = [.jawDrop: jaw, .blinkLeft: blink, .blinkRight: blink,
                                           .smile: smile, .browRaise: brow, .headYaw: yaw]
        // The literals above satisfy every check; an empty script is the unreachable fallback.
        return (try? ExpressionScript(framesPerSecond: 30, duration: 9, tracks: tracks))
            ?? ExpressionScript(unchecked: 30, duration: 9)
    }()

    private init(unchecked fps: Double, duration: Double) {
        framesPerSecond = fps; self.duration = duration; tracks = [:]
    }
}
