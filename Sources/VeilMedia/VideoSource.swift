import Foundation
import Synchronization
import VeilCore
import VeilVision

/// Frames from a video file, a still image, an image sequence or a camera, as packed RGB.
///
/// ```swift
/// let source = try VideoSource.open("clip.mp4")
/// var frame = VideoFrame(image: RGBImage(width: 0, height: 0), timestampMicros: 0)
/// while try source.read(into: &frame) { track(frame) }
/// ```
///
/// `read` blocks until a frame is decoded: call it from a thread of your own, not from Swift's
/// cooperative pool. Failures (missing input, a file that is not media, a decoder error, a camera that
/// goes away) are thrown as ``MediaError`` with GStreamer's message; nothing waits longer than
/// ``timeout`` without an answer.
///
/// `@unchecked Sendable`: the GStreamer objects are thread-safe and only touched by the reader, which
/// sits behind a `Mutex`; concurrent `read` calls are serialised. Everything else is immutable.
public final class VideoSource: @unchecked Sendable {
    /// What this source reads, e.g. "video file /a/b.mp4" or "camera /dev/video0", for messages and logs.
    public let name: String
    /// Size of the frames as negotiated before the first frame. A stream that changes size midway
    /// delivers frames of the new size: trust `frame.image`'s size.
    public let size: (width: Int, height: Int)
    /// Frame rate from the negotiated format; nil for still images and sources that do not say.
    public let framesPerSecond: Double?
    /// Duration in seconds when the container tells it (files), nil otherwise.
    public let duration: Double?
    /// Number of frames, exact for stills, image sequences and directories, estimated from duration ×
    /// frame rate for video files (for progress bars), nil for cameras.
    public let estimatedFrameCount: Int?
    /// True for cameras: frames come in real time and the newest replaces an unread one.
    public let isLive: Bool
    /// Seconds to wait for GStreamer (start-up, each frame) before throwing a `.timedOut` error.
    public let timeout: Double

    /// The default of ``timeout``.
    public static let defaultTimeout: Double = 10

    private let reader: Mutex<any FrameReader>

    private init(name: String, reader: any FrameReader, timeout: Double) {
        let info = reader.info
        self.name = name
        self.size = (info.width, info.height)
        self.framesPerSecond = info.framesPerSecond
        self.duration = info.durationSeconds
        self.estimatedFrameCount = info.frameCount
        self.isLive = info.isLive
        self.timeout = timeout
        self.reader = Mutex(reader)
    }

    /// Opens a video file in any format GStreamer's decodebin handles (MP4, WebM, MKV, AVI, ...),
    /// optionally scaled to `width` × `height`. Giving only one of them keeps the aspect ratio; unless
    /// both are given, pixels are made square (anamorphic video is resampled).
    public convenience init(file: URL, width: Int? = nil, height: Int? = nil, timeout: Double = VideoSource.defaultTimeout) throws {
        try GStreamer.validate(timeout: timeout)
        let name = "video file \(file.path)"
        try Self.requireFile(file, name)
        let caps = try Self.rgbCaps(width: width, height: height)
        let reader = try Self.decodingReader(file: file, name: name, caps: caps, timeout: timeout)
        self.init(name: name, reader: reader, timeout: timeout)
    }

    /// Opens a still image (PNG, JPEG, binary PPM/PGM, or anything else decodebin handles), which
    /// yields exactly one frame (of a video, its first) with timestamp 0.
    public convenience init(image: URL, timeout: Double = VideoSource.defaultTimeout) throws {
        try GStreamer.validate(timeout: timeout)
        let name = "image \(image.path)"
        try Self.requireFile(image, name)
        let reader: any FrameReader
        if try Self.isPNM(image) {
            reader = try StillFilesReader(files: [image], framesPerSecond: nil, timeout: timeout)
        } else {
            let decoding = try Self.decodingReader(file: image, name: name, caps: Self.rgbCaps(width: nil, height: nil), timeout: timeout)
            decoding.info.frameCount = 1
            decoding.frameLimit = 1
            reader = decoding
        }
        self.init(name: name, reader: reader, timeout: timeout)
    }

    /// Opens numbered PNG or JPEG files such as `out/frame_%05d.png`, numbered from 0 or 1 without
    /// gaps (reading stops at the first missing number). Frame `i` has timestamp `i / framesPerSecond`.
    public convenience init(imageSequence pattern: String, framesPerSecond: Double,
                            timeout: Double = VideoSource.defaultTimeout) throws {
        try GStreamer.validate(timeout: timeout)
        let name = "image sequence \(pattern)"
        let frames = try FramePattern(pattern)
        guard framesPerSecond.isFinite, framesPerSecond > 0, framesPerSecond <= 1000 else {
            throw MediaError(.invalidArgument, "frame rate \(framesPerSecond) for \(name) is out of range; give a rate between 0 and 1000")
        }
        let mediaType: String
        switch frames.fileExtension {
        case "png": mediaType = "image/png"
        case "jpg", "jpeg": mediaType = "image/jpeg"
        default:
            throw MediaError(.invalidArgument, "\(name): image sequences must be .png or .jpg files; convert the frames or use a video file")
        }
        let fileManager = FileManager.default
        guard let start = [0, 1].first(where: { fileManager.fileExists(atPath: frames.path(for: $0)) }) else {
            throw MediaError(.notFound, "\(name) has no first frame (neither \(frames.path(for: 0)) nor \(frames.path(for: 1)) exists); check the pattern and directory")
        }
        var count = 0
        while count < 10_000_000, fileManager.fileExists(atPath: frames.path(for: start + count)) { count += 1 }

        let (numerator, denominator) = GStreamer.fraction(framesPerSecond)
        let pipeline = try MediaPipeline(description: """
            multifilesrc name=src start-index=\(start) caps="\(mediaType),framerate=(fraction)\(numerator)/\(denominator)" \
            ! decodebin ! videoconvert name=convert dither=none ! \(Self.appSink(caps: Self.rgbCaps(width: nil, height: nil)))
            """)
        try GStreamer.setString(pipeline.element(named: "src"), "location", frames.pattern)
        let subject = PipelineReader.Subject(name: name, missingKind: .notFound, missingAdvice: "check that the files exist and are readable")
        let reader = try PipelineReader(pipeline: pipeline, subject: subject, live: false, timeout: timeout)
        reader.info.frameCount = count
        reader.info.durationSeconds = Double(count) / framesPerSecond
        self.init(name: name, reader: reader, timeout: timeout)
    }

    /// Opens every PNG, JPEG and PPM/PGM file in `directory`, in natural name order (`2.png` before
    /// `10.png`). Frame `i` has timestamp `i / framesPerSecond`; each frame has its own file's size.
    public convenience init(imageDirectory directory: URL, framesPerSecond: Double,
                            timeout: Double = VideoSource.defaultTimeout) throws {
        try GStreamer.validate(timeout: timeout)
        let name = "image directory \(directory.path)"
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory.path, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw MediaError(.notFound, "\(name) does not exist; check the path")
        }
        guard framesPerSecond.isFinite, framesPerSecond > 0, framesPerSecond <= 1000 else {
            throw MediaError(.invalidArgument, "frame rate \(framesPerSecond) for \(name) is out of range; give a rate between 0 and 1000")
        }
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        } catch {
            throw MediaError(.notFound, "\(name) cannot be listed (\(error.localizedDescription)); check its permissions")
        }
        let files = names
            .filter { Self.stillExtensions.contains(($0 as NSString).pathExtension.lowercased()) && !$0.hasPrefix(".") }
            .sorted { $0.compare($1, options: [.numeric]) == .orderedAscending }
            .map { directory.appendingPathComponent($0) }
        guard !files.isEmpty else {
            throw MediaError(.notFound, "\(name) contains no PNG, JPEG or PPM files; put the frames there or give another path")
        }
        let reader = try StillFilesReader(files: files, framesPerSecond: framesPerSecond, timeout: timeout)
        self.init(name: name, reader: reader, timeout: timeout)
    }

    /// Opens a V4L2 camera. The camera's own mode closest to the request is converted to
    /// `width` × `height` RGB at `framesPerSecond`. A missing or unusable device throws at once
    /// (`.cameraUnavailable`); a camera that sends nothing throws after ``timeout``.
    public convenience init(camera device: String = "/dev/video0", width: Int = 640, height: Int = 480,
                            framesPerSecond: Int = 30, timeout: Double = VideoSource.defaultTimeout) throws {
        try GStreamer.validate(timeout: timeout)
        let name = "camera \(device)"
        guard FileManager.default.fileExists(atPath: device) else {
            throw MediaError(.cameraUnavailable, "no camera at \(device); connect one, or pick another device (ls /dev/video*)")
        }
        guard (1...1000).contains(framesPerSecond) else {
            throw MediaError(.invalidArgument, "camera frame rate \(framesPerSecond) is out of range; give 1…1000")
        }
        let caps = try Self.rgbCaps(width: width, height: height) + ",framerate=(fraction)\(framesPerSecond)/1"
        let pipeline = try MediaPipeline(description: """
            v4l2src name=src ! videoconvert ! videoscale ! videorate ! \(Self.appSink(caps: caps, live: true))
            """)
        try GStreamer.setString(pipeline.element(named: "src"), "device", device)
        let subject = PipelineReader.Subject(name: name, missingKind: .cameraUnavailable,
                                             missingAdvice: "check that \(device) is a camera, that no other program uses it, and that you may open it (group video)")
        do {
            let reader = try PipelineReader(pipeline: pipeline, subject: subject, live: true, timeout: timeout)
            self.init(name: name, reader: reader, timeout: timeout)
        } catch let error as MediaError where error.kind == .unsupportedInput || error.kind == .streamFailed {
            throw MediaError(.cameraUnavailable, error.message, debugInfo: error.debugInfo)
        }
    }

    /// Opens `path` as what it looks like: `/dev/video*` is a camera, a directory holds images, an
    /// existing file with an image extension is a still, a name with `%` (e.g. `frame_%05d.png`) is
    /// an image sequence at `sequenceFramesPerSecond`, anything else a video file.
    public static func open(_ path: String, sequenceFramesPerSecond: Double = 30) throws -> VideoSource {
        if path.hasPrefix("/dev/video") { return try VideoSource(camera: path) }
        let url = URL(fileURLWithPath: path)
        var isDirectory: ObjCBool = false
        let exists = FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory)
        if exists, isDirectory.boolValue {
            return try VideoSource(imageDirectory: url, framesPerSecond: sequenceFramesPerSecond)
        }
        if !exists, path.contains("%") {
            return try VideoSource(imageSequence: path, framesPerSecond: sequenceFramesPerSecond)
        }
        if stillExtensions.contains(url.pathExtension.lowercased()) { return try VideoSource(image: url) }
        return try VideoSource(file: url)
    }

    /// Fills `frame` with the next frame, reusing `frame.image`'s storage (no allocation while the size
    /// stays the same). Returns false at the end of the input; after an error every call throws it again.
    public func read(into frame: inout VideoFrame) throws -> Bool {
        try reader.withLock { reader in try reader.read(into: &frame) }
    }

    // MARK: Helpers shared by the initialisers

    /// Extensions `open` treats as still images.
    static let stillExtensions: Set<String> = ["png", "jpg", "jpeg", "ppm", "pgm", "pnm", "bmp", "gif", "tif", "tiff", "webp"]

    static func requireFile(_ url: URL, _ name: String) throws {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) else {
            throw MediaError(.notFound, "\(name) does not exist; check the path")
        }
        guard !isDirectory.boolValue else {
            throw MediaError(.invalidArgument, "\(name) is a directory; give a file, or open the directory with VideoSource(imageDirectory:framesPerSecond:)")
        }
        guard FileManager.default.isReadableFile(atPath: url.path) else {
            throw MediaError(.notFound, "\(name) is not readable; check its permissions")
        }
    }

    /// True when the file starts like a binary PPM/PGM (which GStreamer cannot parse here).
    static func isPNM(_ url: URL) throws -> Bool {
        guard let handle = FileHandle(forReadingAtPath: url.path) else {
            throw MediaError(.notFound, "\(url.path) cannot be opened; check that it exists and is readable")
        }
        defer { try? handle.close() }
        let head = (try? handle.read(upToCount: 2)) ?? Data()
        return PNM.looksLikePNM(head)
    }

    /// `video/x-raw,format=RGB` with the requested size; square pixels unless both sides are given.
    static func rgbCaps(width: Int?, height: Int?) throws -> String {
        for side in [width, height].compactMap({ $0 }) where !(1...16384).contains(side) {
            throw MediaError(.invalidArgument, "frame size \(side) is out of range; give 1…16384 pixels")
        }
        var caps = "video/x-raw,format=RGB"
        if let width { caps += ",width=(int)\(width)" }
        if let height { caps += ",height=(int)\(height)" }
        if width == nil || height == nil { caps += ",pixel-aspect-ratio=(fraction)1/1" }
        return caps
    }

    /// The appsink every reading pipeline ends in. Files keep a short queue and block the decoder;
    /// live sources keep only the newest frame.
    static func appSink(caps: String, live: Bool = false) -> String {
        "appsink name=sink sync=false max-buffers=\(live ? 1 : 4) drop=\(live) caps=\"\(caps)\""
    }

    /// A filesrc ! decodebin pipeline for `file`, started and prerolled.
    static func decodingReader(file: URL, name: String, caps: String, timeout: Double) throws -> PipelineReader {
        let pipeline = try MediaPipeline(description: "filesrc name=src ! decodebin ! videoconvert name=convert dither=none ! videoscale ! \(appSink(caps: caps))")
        try GStreamer.setString(pipeline.element(named: "src"), "location", file.path)
        let subject = PipelineReader.Subject(name: name, missingKind: .notFound, missingAdvice: "check that it exists and is readable")
        return try PipelineReader(pipeline: pipeline, subject: subject, live: false, timeout: timeout)
    }
}
