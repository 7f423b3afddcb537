import Foundation
import VeilCore

/// What each privacy level sends for one recorded session, computed from the estimator's output as
/// `veil call` would compute it (the same stages, then the wire's encoding), so that a recording's
/// streams can be made again after a level changes (`veil-privacy --refilter`) without tracking
/// the faces again.
enum Streams {
    /// The levels written per session, the default first, and their streams' names.
    static let levels = [PrivacyLevel.default] + PrivacyLevel.allCases.filter { $0 != .default }
    static let names = levels.map(\.rawValue)

    /// Writes `<stem>.<level>.f32` for every level from the session's estimator rows and truth rows.
    static func write(stem: String, in directory: URL, estimate: [Float], truth: [Float], framesPerSecond: Double) throws {
        let width = Recorder.streamWidth, truthWidth = Recorder.truthColumns.count
        let frames = estimate.count / width
        guard frames * width == estimate.count, truth.count == frames * truthWidth else {
            throw VeilError.invalidInput("\(stem): \(estimate.count) estimate values and \(truth.count) truth values do not make whole frames")
        }
        // Per frame, once for every level: its time, the estimator's expression (nil: lost) and the
        // jaw opening the voice makes then.
        let jaw = Recorder.truthColumns.firstIndex(of: .jawDrop)!
        var voice = VoiceExpressionGenerator(seed: Recorder.hash(stem))
        let inputs = (0..<frames).map { n -> (time: Double, expression: VeilCore.Expression?, mouth: Float) in
            let time = Double(n) / framesPerSecond
            let speech = voice.update(level: Performance.voiceLevel(jawDrop: Double(truth[n * truthWidth + jaw])), at: time)
            return (time, Self.expression(Array(estimate[(n * width)..<((n + 1) * width)])), speech[.jawOpen])
        }
        for level in levels {
            var privacy = ExpressionPrivacy(level: level, seed: Recorder.hash(stem) ^ 0x5EED)
            var rows: [Float] = []
            rows.reserveCapacity(estimate.count)
            for (n, input) in inputs.enumerated() {
                let micros = UInt64((input.time * 1e6).rounded())
                var frame = ExpressionFrame(sequence: UInt32(n), captureTimeMicros: micros, state: .lost)
                if let e = input.expression {
                    frame = ExpressionFrame(sequence: UInt32(n), captureTimeMicros: micros, state: .tracked,
                                            expression: privacy.apply(e, at: input.time, voiceMouth: input.mouth))
                }
                rows += Recorder.row(try ExpressionFrame(decoding: frame.encoded()))
            }
            try Recorder.write(rows, to: directory.appendingPathComponent("\(stem).\(level.rawValue).f32"))
        }
    }

    /// The expression of one estimate row, nil for a lost frame.
    static func expression(_ row: [Float]) -> VeilCore.Expression? {
        guard row.last == 1 else { return nil }
        let shapes = BlendShape.allCases.count
        var e = VeilCore.Expression()
        for (k, shape) in BlendShape.allCases.enumerated() { e[shape] = row[k] }
        e.headPose = HeadPose(yaw: row[shapes], pitch: row[shapes + 1], roll: row[shapes + 2])
        if row[shapes + 3].isFinite, row[shapes + 4].isFinite { e.gaze = Gaze(x: row[shapes + 3], y: row[shapes + 4]) }
        return e
    }

    /// Makes every session's streams in `directory` again from its estimate and truth files.
    static func refilter(_ directory: URL, quiet: Bool) throws {
        let index = directory.appendingPathComponent("index.jsonl")
        let lines = try String(contentsOf: index, encoding: .utf8).split(separator: "\n")
        for (k, line) in lines.enumerated() {
            let session: Recorder.Session
            do { session = try JSONDecoder().decode(Recorder.Session.self, from: Data(line.utf8)) } catch {
                throw VeilError.invalidInput("\(index.path):\(k + 1): not a session (\(error))")
            }
            let stem = "\(session.person).\(session.session)"
            func floats(_ name: String) throws -> [Float] {
                let data = try Data(contentsOf: directory.appendingPathComponent("\(stem).\(name).f32"))
                return data.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }
            }
            try write(stem: stem, in: directory, estimate: try floats("estimate"), truth: try floats("truth"), framesPerSecond: session.framesPerSecond)
            if !quiet, (k + 1) % 20 == 0 || k + 1 == lines.count {
                FileHandle.standardError.write(Data("refiltered \(k + 1)/\(lines.count) sessions\n".utf8))
            }
        }
        try Recorder.writeColumns(to: directory)
    }
}
