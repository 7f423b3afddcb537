import Foundation
import Synchronization

/// Sums mono 48 kHz audio from several remote participants on a common timeline (microseconds on
/// the local media clock), and hands out finished stretches as 16-bit samples for a recording.
final class AudioMixer: @unchecked Sendable {
    private struct State {
        var start: Int64?       // sample index of buffer[0]
        var buffer: [Float] = []
    }
    private let state = Mutex(State())
    let sampleRate: Int

    init(sampleRate: Int = 48_000) { self.sampleRate = sampleRate }

    private func index(_ micros: UInt64) -> Int64 { Int64(micros) * Int64(sampleRate) / 1_000_000 }

    /// Adds `samples` playing from `timeMicros`. Parts older than what was already drained are dropped.
    func add(_ samples: [Float], at timeMicros: UInt64) {
        let first = index(timeMicros)
        state.withLock { s in
            if s.start == nil { s.start = first }
            guard let start = s.start else { return }
            var offset = Int(first - start)
            var input = samples[...]
            if offset < 0 { input = input.dropFirst(min(-offset, input.count)); offset = 0 }
            let needed = offset + input.count
            if s.buffer.count < needed { s.buffer.append(contentsOf: repeatElement(0, count: needed - s.buffer.count)) }
            for (k, v) in input.enumerated() { s.buffer[offset + k] += v }
        }
    }

    /// Everything before `timeMicros` that is not out yet, as clipped 16-bit samples with the time
    /// of the first one; nil when there is nothing.
    func drain(before timeMicros: UInt64) -> (samples: [Int16], timeMicros: UInt64)? {
        let end = index(timeMicros)
        return state.withLock { s in
            guard let start = s.start, end > start, !s.buffer.isEmpty else { return nil }
            let count = min(Int(end - start), s.buffer.count)
            let out = s.buffer[..<count].map { Int16(max(-1, min(1, $0)) * 32767) }
            s.buffer.removeFirst(count)
            s.start = start + Int64(count)
            return (out, UInt64(start) * 1_000_000 / UInt64(sampleRate))
        }
    }
}
