/// The audio track of a ``VideoWriter``: what the caller writes (16-bit signed PCM, interleaved
/// when stereo) and how far audio may trail the video before the writer fills silence.
///
/// The codec follows the container: AAC-LC in `.mp4`/`.m4v` (plays in browsers, QuickTime, phones,
/// VLC), Opus in `.mkv` and `.webm`.
public struct AudioTrackFormat: Sendable, Equatable {
    /// Samples per second per channel, 8 000…96 000 (48 000 is what calls use).
    public var sampleRate: Int
    /// 1 (mono) or 2 (stereo, samples interleaved left, right).
    public var channels: Int
    /// Seconds audio may trail the video. When a video frame is written this far past the end of
    /// the audio, the writer fills the audio with silence up to that distance, so a muted peer never
    /// makes the muxer hold the video back; audio written later for the filled stretch is dropped.
    /// nil never fills ahead: the muxer then keeps the encoded video in memory until the audio
    /// catches up or ``VideoWriter/finish()`` (fine for tools that write all video, then all audio).
    public var maximumLag: Double?

    /// The default of ``maximumLag``: far more than a call's audio trails its video.
    public static let defaultMaximumLag: Double = 2

    /// A track of `channels` channels at `sampleRate`; see ``maximumLag``.
    public init(sampleRate: Int = 48_000, channels: Int = 1, maximumLag: Double? = AudioTrackFormat.defaultMaximumLag) {
        self.sampleRate = sampleRate
        self.channels = channels
        self.maximumLag = maximumLag
    }

    /// Throws unless the rate, channel count and lag are usable.
    func validate(for output: String) throws {
        guard (8_000...96_000).contains(sampleRate) else {
            throw MediaError(.invalidArgument, "audio sample rate \(sampleRate) Hz for \(output) is out of range; give 8000…96000 (calls use 48000)")
        }
        guard (1...2).contains(channels) else {
            throw MediaError(.invalidArgument, "\(channels) audio channels for \(output) are not supported; give 1 (mono) or 2 (stereo)")
        }
        if let maximumLag, !(maximumLag.isFinite && maximumLag >= 0 && maximumLag <= 3600) {
            throw MediaError(.invalidArgument, "maximum audio lag \(maximumLag) s for \(output) is out of range; give 0…3600 seconds, or nil to never fill ahead")
        }
    }
}
