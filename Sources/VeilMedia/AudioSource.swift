import CGStreamer
import Foundation
import Synchronization

/// The sound of a media file (MP4, WebM, MKV, WAV, Ogg, ...), decoded and converted to 16-bit
/// signed PCM at one rate and channel count, in chunks of fixed duration with their timestamps.
///
/// ```swift
/// let source = try AudioSource(file: url)             // 48 kHz mono, 20 ms chunks
/// var chunk: [Int16] = []
/// while let micros = try source.read(into: &chunk) { play(chunk, at: micros) }
/// ```
///
/// `read` blocks until a chunk is decoded: call it from a thread of your own, not from Swift's
/// cooperative pool. Failures (missing file, no audio in it, a decoder error) are thrown as
/// ``MediaError``; nothing waits longer than ``timeout`` without an answer.
///
/// `@unchecked Sendable`: the GStreamer objects are thread-safe and only touched by the reader, which
/// sits behind a `Mutex`; concurrent `read` calls are serialised. Everything else is immutable.
public final class AudioSource: @unchecked Sendable {
    /// What this source reads, e.g. "audio of /a/b.mp4", for messages and logs.
    public let name: String
    /// Samples per second per channel of what `read` delivers.
    public let sampleRate: Int
    /// Channels of what `read` delivers: 1, or 2 interleaved (left, right).
    public let channels: Int
    /// Seconds of audio per chunk; the last chunk (and one before a gap in the stream) may be shorter.
    public let chunkDuration: Double
    /// Duration in seconds when the container tells it, nil otherwise.
    public let duration: Double?
    /// Seconds to wait for GStreamer (start-up, each chunk) before throwing a `.timedOut` error.
    public let timeout: Double

    /// The default of ``timeout``.
    public static let defaultTimeout: Double = 10

    private let reader: Mutex<AudioReader>

    /// Opens the first audio stream of `file` (a video's other streams are ignored) and converts it
    /// to `channels` channels (1 or 2) at `sampleRate` (8 000…96 000), in chunks of `chunkDuration`
    /// seconds (1 ms…10 s; 20 ms by default, an Opus frame).
    public init(file: URL, sampleRate: Int = 48_000, channels: Int = 1, chunkDuration: Double = 0.02,
                timeout: Double = AudioSource.defaultTimeout) throws {
        try GStreamer.validate(timeout: timeout)
        let name = "audio of \(file.path)"
        guard (8_000...96_000).contains(sampleRate) else {
            throw MediaError(.invalidArgument, "sample rate \(sampleRate) Hz for \(name) is out of range; give 8000…96000")
        }
        guard (1...2).contains(channels) else {
            throw MediaError(.invalidArgument, "\(channels) channels for \(name) are not supported; give 1 (mono) or 2 (stereo)")
        }
        guard chunkDuration.isFinite, chunkDuration >= 0.001, chunkDuration <= 10 else {
            throw MediaError(.invalidArgument, "chunk duration \(chunkDuration) s for \(name) is out of range; give 0.001…10 seconds")
        }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: file.path, isDirectory: &isDirectory) else {
            throw MediaError(.notFound, "\(file.path) does not exist; check the path")
        }
        guard !isDirectory.boolValue else {
            throw MediaError(.invalidArgument, "\(file.path) is a directory; give a media file")
        }
        let reader = try AudioReader(file: file, name: name, sampleRate: sampleRate, channels: channels,
                                     chunkDuration: chunkDuration, timeout: timeout)
        self.name = name
        self.sampleRate = sampleRate
        self.channels = channels
        self.chunkDuration = chunkDuration
        self.duration = reader.durationSeconds
        self.timeout = timeout
        self.reader = Mutex(reader)
    }

    /// Replaces `samples` with the next chunk (interleaved, ``channels`` per frame), reusing its
    /// storage, and returns the time of its first sample in microseconds from the start of the
    /// file; nil at the end. After an error every call throws it again.
    public func read(into samples: inout [Int16]) throws -> UInt64? {
        try reader.withLock { try $0.read(into: &samples) }
    }
}

/// Owns the decoding pipeline: filesrc → decodebin → audioconvert → audioresample → fixed-size
/// chunks (audiobuffersplit) → appsink, read through an `AppSinkReader` like `PipelineReader`'s.
private final class AudioReader {
    private let reader: AppSinkReader
    private(set) var durationSeconds: Double?

    init(file: URL, name: String, sampleRate: Int, channels: Int, chunkDuration: Double, timeout: Double) throws {
        // Stereo is front left and right: without a mask audioconvert would mix both into each.
        let caps = "audio/x-raw,format=S16LE,layout=interleaved,rate=(int)\(sampleRate),channels=(int)\(channels)"
            + (channels == 2 ? ",channel-mask=(bitmask)0x3" : "")
        let (numerator, denominator) = GStreamer.fraction(chunkDuration)
        let pipeline = try MediaPipeline(description: """
            filesrc name=src ! decodebin ! audioconvert name=convert ! audioresample ! \(caps) \
            ! audiobuffersplit output-buffer-duration=\(numerator)/\(denominator) \
            ! appsink name=sink sync=false max-buffers=16 caps="\(caps)"
            """)
        try GStreamer.setString(pipeline.element(named: "src"), "location", file.path)
        let noAudio = MediaError(.unsupportedInput, "\(name) is empty: the file holds no audio stream; give a file with sound")
        let wording = AppSinkReader.Wording(name: name, missingKind: .notFound, missingAdvice: "check that the file exists and is readable",
                                            prerollAdvice: "check that the file is readable media",
                                            startAdvice: "check the file and the GStreamer installation",
                                            undecodable: "cannot be decoded", missingStream: noAudio,
                                            input: "file", sample: "audio", samples: "chunks")
        reader = try AppSinkReader(pipeline: pipeline, wording: wording, timeout: timeout)
        // Preroll (the first chunk is decoded), learn the duration, and start playing.
        try reader.preroll()
        if let nanoseconds = pipeline.durationNanoseconds() { durationSeconds = Double(nanoseconds) / 1e9 }
        try reader.play()
    }

    func read(into samples: inout [Int16]) throws -> UInt64? {
        try reader.pull { try copy($0, into: &samples) }
    }

    /// Copies the sample's S16LE data into `samples`; returns its stream time in microseconds.
    private func copy(_ sample: OpaquePointer, into samples: inout [Int16]) throws -> UInt64 {
        let name = reader.wording.name
        guard let buffer = gst_sample_get_buffer(sample) else {
            throw MediaError(.streamFailed, "\(name) delivered a chunk without data; check the file")
        }
        var map = GstMapInfo()
        guard gst_buffer_map(buffer, &map, GST_MAP_READ) != 0 else {
            throw MediaError(.streamFailed, "a chunk of \(name) could not be mapped into memory; check the file")
        }
        defer { gst_buffer_unmap(buffer, &map) }
        let count = Int(map.size) / MemoryLayout<Int16>.size
        samples.removeAll(keepingCapacity: true)
        if count > 0, let data = map.data {
            // Buffer memory is allocated with at least 8-byte alignment.
            let values = UnsafeBufferPointer(start: UnsafeRawPointer(data).assumingMemoryBound(to: Int16.self), count: count)
            #if _endian(little)
            samples.append(contentsOf: values)
            #else
            samples.append(contentsOf: values.lazy.map { Int16(littleEndian: $0) })
            #endif
        }
        return AppSinkReader.streamTimeMicros(sample, buffer) ?? 0
    }
}
