/// Where audio goes on a written file's timeline, as sample frames from the file's start: a pure
/// state machine, kept apart from the pipeline that pushes the samples so it is tested without I/O.
///
/// The track stays gapless, because a muxer waits for data on every track and encoders expect
/// contiguous samples:
/// - before the first chunk, and across a gap longer than the tolerance, it asks for silence;
/// - a chunk that overlaps what is already placed by more than the tolerance (late audio, or audio
///   for a stretch already filled with silence) loses its overlapping start;
/// - jitter within the tolerance is absorbed: the chunk follows the previous one directly;
/// - a chunk stamped before the previous chunk is an error: the caller's clock went backwards.
struct AudioTimeline {
    /// What to push for one chunk of audio: `silence` frames of silence (which end where the chunk
    /// starts), then the chunk without its first `droppedFrames` frames, from `startFrame` on.
    struct Placement: Equatable {
        var silence: Range<Int>
        var droppedFrames: Int
        var startFrame: Int
    }

    let sampleRate: Int
    /// Jitter absorbed without filling or dropping: one Opus frame (20 ms).
    let toleranceFrames: Int
    /// How far audio may trail the video, in frames; nil for unlimited.
    let maximumLagFrames: Int?
    /// Frames placed so far, silence included: where the next chunk would follow directly.
    private(set) var endFrame = 0
    /// Frames of written audio dropped because they overlapped what was already placed.
    private(set) var droppedFrames = 0
    private var lastTimestampMicros: UInt64?

    init(sampleRate: Int, maximumLag: Double?, tolerance: Double = 0.02) {
        self.sampleRate = sampleRate
        self.toleranceFrames = Int((tolerance * Double(sampleRate)).rounded())
        self.maximumLagFrames = maximumLag.map { Int(($0 * Double(sampleRate)).rounded()) }
    }

    /// Places a chunk of `frames` frames stamped `timestampMicros`. Throws (changing nothing) when
    /// the stamp is earlier than the previous chunk's.
    mutating func place(frames: Int, at timestampMicros: UInt64) throws -> Placement {
        if let last = lastTimestampMicros, timestampMicros < last {
            throw MediaError(.invalidArgument, "audio timestamps go backwards: a chunk at \(timestampMicros) µs follows one at \(last) µs; write audio in time order, with timestamps from one clock")
        }
        let position = frame(at: timestampMicros, unitsPerSecond: 1_000_000)
        // The first chunk is placed exactly: it fixes the audio's start against the video.
        let tolerance = lastTimestampMicros == nil && endFrame == 0 ? 0 : toleranceFrames
        lastTimestampMicros = timestampMicros
        var placement = Placement(silence: endFrame..<endFrame, droppedFrames: 0, startFrame: endFrame)
        if position > endFrame + tolerance {
            placement.silence = endFrame..<position
            placement.startFrame = position
        } else if position < endFrame - tolerance {
            placement.droppedFrames = min(frames, endFrame - position)
            droppedFrames += placement.droppedFrames
        }
        endFrame = placement.startFrame + frames - placement.droppedFrames
        return placement
    }

    /// Silence to place so the audio trails a video frame at `videoNanos` by at most the maximum lag.
    mutating func fill(forVideoAt videoNanos: UInt64) -> Range<Int> {
        guard let maximumLagFrames else { return endFrame..<endFrame }
        return fill(through: frame(at: videoNanos, unitsPerSecond: 1_000_000_000) - maximumLagFrames)
    }

    /// Silence to place so the audio lasts at least until `endNanos` (the end of the video).
    mutating func fill(throughNanos endNanos: UInt64) -> Range<Int> {
        fill(through: frame(at: endNanos, unitsPerSecond: 1_000_000_000))
    }

    private mutating func fill(through target: Int) -> Range<Int> {
        guard target > endFrame else { return endFrame..<endFrame }
        defer { endFrame = target }
        return endFrame..<target
    }

    /// The frame nearest to `value` units (µs or ns) from the start, without overflow.
    private func frame(at value: UInt64, unitsPerSecond: UInt64) -> Int {
        let product = value.multipliedFullWidth(by: UInt64(sampleRate))
        // value × rate / units < value, so the quotient fits.
        let (quotient, remainder) = unitsPerSecond.dividingFullWidth(product)
        let rounded = remainder >= unitsPerSecond / 2 ? quotient + 1 : quotient
        return Int(clamping: rounded)
    }
}
