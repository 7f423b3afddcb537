import Foundation

/// Where a `PeerConnection` takes the voice it sends. Whatever the input, it is converted to
/// 48 kHz mono and encoded with Opus (voice mode, 20 ms frames, in-band FEC) before it leaves.
public enum AudioInput: Sendable, Equatable {
    /// A live sine tone of `frequency` Hz (for tests and demos).
    case testTone(frequency: Double)
    /// Any audio file GStreamer's decodebin can read (WAV from espeak-ng, Ogg, MP3, …). It starts
    /// playing when the connection is first established and is followed by silence when it ends
    /// (the audio track stays up).
    case file(URL)
    /// Real capture from PulseAudio (or PipeWire's PulseAudio server): the default source when
    /// `device` is nil, otherwise the named source (see `pactl list short sources`).
    case pulse(device: String?)
    /// Digital silence (the track is up; Opus sends it in a few bytes per frame).
    case silence
}

/// Where a `PeerConnection` plays the voice it receives.
public enum AudioOutput: Sendable {
    /// PulseAudio playback on the default sink when `device` is nil, otherwise the named sink.
    case pulse(device: String?)
    /// A 16-bit PCM WAV file at 48 kHz mono, finalised when the connection is closed.
    case file(URL)
    /// Decoded audio handed to a closure on a GStreamer streaming thread at its playout time:
    /// for tests, meters, and muxing into a recording. The closure must return quickly.
    case callback(@Sendable (ReceivedAudio) -> Void)
    /// Decoded and dropped (statistics are still counted).
    case discard
}

/// One buffer of decoded remote audio, with the times a lip-sync layer needs.
///
/// All times are media times in microseconds (see `PeerConnection.mediaTimeMicros`): the receiver's
/// monotonic clock for `presentationTimeMicros` and `playoutTimeMicros`, the sender's for
/// `senderMediaTimeMicros`.
public struct ReceivedAudio: Sendable {
    /// Mono samples in -1…1 at `sampleRate`.
    public var samples: [Float]
    /// Samples per second (48 000).
    public var sampleRate: Int
    /// The buffer's timestamp on the receiver's media clock (jitter-buffer output time), before
    /// the pipeline's playout latency.
    public var presentationTimeMicros: UInt64
    /// When the first sample is played: `presentationTimeMicros` plus the receive pipeline's latency.
    public var playoutTimeMicros: UInt64
    /// When the sender captured the first sample, on the sender's media clock — the clock its
    /// `ExpressionFrame.captureTimeMicros` uses. Nil until the first RTCP sender report arrived
    /// (about a second into the call).
    public var senderMediaTimeMicros: UInt64?

    /// A buffer of `samples`; see the properties for the meaning of the times.
    public init(samples: [Float], sampleRate: Int, presentationTimeMicros: UInt64, playoutTimeMicros: UInt64,
                senderMediaTimeMicros: UInt64?) {
        self.samples = samples
        self.sampleRate = sampleRate
        self.presentationTimeMicros = presentationTimeMicros
        self.playoutTimeMicros = playoutTimeMicros
        self.senderMediaTimeMicros = senderMediaTimeMicros
    }

    /// Root mean square of the samples (0 for silence, about 0.14 for a sine at amplitude 0.2).
    public var rms: Float {
        guard !samples.isEmpty else { return 0 }
        return (samples.reduce(0) { $0 + $1 * $1 } / Float(samples.count)).squareRoot()
    }
}

/// A sound-server sink the received voices can play on: one entry of
/// `CallSession.audioOutputDevices()`, to pass to `setAudioOutputDevice(_:)` or
/// `AudioOutput.pulse(device:)` by its `name`.
public struct AudioDevice: Sendable, Hashable {
    /// The sink's name on the sound server (what `pactl list short sinks` shows), e.g.
    /// "alsa_output.pci-0000_00_1f.3.analog-stereo".
    public var name: String
    /// The name the sound server shows people, e.g. "Built-in Audio Analog Stereo".
    public var description: String
    /// Whether this is the server's default sink (where `.pulse(device: nil)` plays).
    public var isDefault: Bool
    /// What kind of device it is when the server knows (PulseAudio's `device.form_factor`:
    /// "speaker", "headset", "headphone", "handset", "hands-free", "internal", …); nil otherwise.
    public var formFactor: String?

    /// A sink as the sound server describes it.
    public init(name: String, description: String, isDefault: Bool, formFactor: String? = nil) {
        self.name = name
        self.description = description
        self.isDefault = isDefault
        self.formFactor = formFactor
    }
}
