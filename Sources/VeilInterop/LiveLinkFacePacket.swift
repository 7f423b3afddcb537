import VeilCore

/// One packet of Live Link Face, Epic's iOS app that streams ARKit face tracking to Unreal Engine
/// over UDP (port 11111 by default). Every field is big-endian:
///
/// | bytes   | field                                                              |
/// |---------|--------------------------------------------------------------------|
/// | 1       | packet version, 6                                                  |
/// | 4 + n   | device id: Int32 byte count, then UTF-8                            |
/// | 4 + n   | subject name: Int32 byte count, then UTF-8                         |
/// | 16      | frame time: Int32 frame number, Float32 subframe, Int32 frame-rate numerator, Int32 denominator |
/// | 1       | value count, 61                                                    |
/// | 61 × 4  | Float32 values: ARKit's 52 blendshapes in ARKit's order (`BlendShape`'s), then head yaw, pitch, roll, left eye yaw, pitch, roll, right eye yaw, pitch, roll |
///
/// The angles are radians. Epic does not document their signs; Veil follows the public receivers
/// that put these curves on a VRM head (yaw positive to the face's own left, pitch positive chin
/// *down*, roll positive clockwise as seen), so Veil's pitch is negated on the wire.
public struct LiveLinkFacePacket: Equatable, Sendable {
    /// The packet version Veil reads and writes (Live Link Face's since its frame time became
    /// Unreal's `FQualifiedFrameTime`).
    public static let version: UInt8 = 6
    /// Values per packet: 52 blendshapes and 9 angles.
    public static let valueCount = 61
    /// Where Unreal's Live Link listens by default.
    public static let defaultPort: UInt16 = 11111
    /// Largest packet read or written: Unreal's receive buffer (774 bytes: the fields above with
    /// 256 bytes each for the two names).
    public static let maximumBytes = 774
    /// Longest device id or subject name accepted, in UTF-8 bytes.
    public static let maximumNameBytes = 256

    /// Unreal's `FQualifiedFrameTime`: a frame number and fraction at a rational frame rate.
    public struct FrameTime: Equatable, Sendable {
        public var frameNumber: Int32
        /// The fraction of the frame, 0 ≤ subframe < 1.
        public var subframe: Float
        /// Frames per second as numerator / denominator (60 / 1).
        public var rateNumerator: Int32
        public var rateDenominator: Int32

        /// A frame time from its fields.
        public init(frameNumber: Int32, subframe: Float, rateNumerator: Int32, rateDenominator: Int32) {
            self.frameNumber = frameNumber; self.subframe = subframe
            self.rateNumerator = rateNumerator; self.rateDenominator = rateDenominator
        }

        /// The frame time of `seconds` at `framesPerSecond` (whole frames wrap at Int32's range).
        public init(seconds: Double, framesPerSecond: Int32 = 60) {
            let rate = max(framesPerSecond, 1)
            let frames = seconds.isFinite ? max(seconds, 0) * Double(rate) : 0
            let whole = frames.rounded(.down)
            frameNumber = Int32(truncatingIfNeeded: Int64(exactly: whole) ?? 0)
            subframe = Float(frames - whole)
            rateNumerator = rate
            rateDenominator = 1
        }

        /// Seconds since frame 0, or nil when the rate is not positive or the subframe not finite.
        public var seconds: Double? {
            guard rateNumerator > 0, rateDenominator > 0, subframe.isFinite else { return nil }
            return (Double(frameNumber) + Double(subframe)) * Double(rateDenominator) / Double(rateNumerator)
        }
    }

    /// The sending device's identifier (the app sends a UUID).
    public var deviceID: String
    /// The Live Link subject the frame animates (the app's name for the face, e.g. "iPhone").
    public var subjectName: String
    public var frameTime: FrameTime
    /// The face: all 52 coefficients, the head, both eyes; `time` is `frameTime.seconds` when decoded.
    public var update: ExpressionUpdate

    /// A packet of `update` (coefficients it lacks are sent as 0, missing rotations as zero).
    public init(deviceID: String, subjectName: String, frameTime: FrameTime, update: ExpressionUpdate) {
        self.deviceID = deviceID; self.subjectName = subjectName; self.frameTime = frameTime; self.update = update
    }

    /// The packet's bytes. Throws `InteropError.oversized` when a name is longer than
    /// `maximumNameBytes` or the packet longer than `maximumBytes`.
    public func encoded() throws -> [UInt8] {
        var writer = WireWriter()
        writer.uint8(Self.version)
        for (what, name) in [("device id", deviceID), ("subject name", subjectName)] {
            let utf8 = Array(name.utf8)
            guard utf8.count <= Self.maximumNameBytes else {
                throw InteropError.oversized.detailed("Live Link \(what) of \(utf8.count) bytes, at most \(Self.maximumNameBytes)")
            }
            writer.int32(Int32(utf8.count))
            writer.append(utf8)
        }
        writer.int32(frameTime.frameNumber)
        writer.float32(frameTime.subframe)
        writer.int32(frameTime.rateNumerator)
        writer.int32(frameTime.rateDenominator)
        writer.uint8(UInt8(Self.valueCount))
        for shape in BlendShape.allCases { writer.float32(update[shape] ?? 0) }
        for angles in [update.head, update.leftEye, update.rightEye] {
            let wire = Self.wireAngles(angles ?? .zero)
            writer.float32(wire.yaw); writer.float32(wire.pitch); writer.float32(wire.roll)
        }
        guard writer.bytes.count <= Self.maximumBytes else {
            throw InteropError.oversized.detailed("\(writer.bytes.count)-byte Live Link packet, at most \(Self.maximumBytes)")
        }
        return writer.bytes
    }

    /// Decodes one datagram. Throws `InteropError`: `.oversized` (packet or a name beyond the
    /// maxima), `.unknownVersion`, `.truncated`, `.malformed` (negative length, bad UTF-8, bytes
    /// after the values), `.wrongCount`. Coefficients are clamped to 0…1 and angles as
    /// `EulerAngles.clamped` (NaN becomes 0). The bytes are read where they lie (a socket's receive
    /// buffer), not copied; byte offsets in errors count from the slice's first byte.
    public init(decoding bytes: ArraySlice<UInt8>) throws {
        guard bytes.count <= Self.maximumBytes else {
            throw InteropError.oversized.detailed("\(bytes.count)-byte Live Link packet, at most \(Self.maximumBytes)")
        }
        var reader = WireReader(bytes)
        let version = try reader.uint8("packet version")
        guard version == Self.version else {
            throw InteropError.unknownVersion.detailed("Live Link packet version \(version); Veil reads version \(Self.version)")
        }
        func name(_ what: String) throws -> String {
            let at = reader.offset
            let length = Int(try reader.int32("\(what) length"))
            guard length >= 0 else { throw InteropError.malformed.detailed("\(what) length \(length) at byte \(at)") }
            guard length <= Self.maximumNameBytes else {
                throw InteropError.oversized.detailed("\(what) of \(length) bytes at byte \(at), at most \(Self.maximumNameBytes)")
            }
            return try WireReader.text(try reader.take(length, what), what, at: at + 4)
        }
        deviceID = try name("device id")
        subjectName = try name("subject name")
        frameTime = FrameTime(frameNumber: try reader.int32("frame number"), subframe: try reader.float32("subframe"),
                              rateNumerator: try reader.int32("frame rate numerator"), rateDenominator: try reader.int32("frame rate denominator"))
        let count = try reader.uint8("value count")
        guard Int(count) == Self.valueCount else {
            throw InteropError.wrongCount.detailed("Live Link packet with \(count) values; version \(Self.version) has \(Self.valueCount)")
        }
        var update = ExpressionUpdate(time: frameTime.seconds)
        for shape in BlendShape.allCases { update[shape] = try reader.float32(shape.name) }
        func angles(_ what: String) throws -> EulerAngles {
            Self.veilAngles(EulerAngles(yaw: try reader.float32("\(what) yaw"), pitch: try reader.float32("\(what) pitch"),
                                        roll: try reader.float32("\(what) roll")))
        }
        update.head = try angles("head")
        update.leftEye = try angles("left eye")
        update.rightEye = try angles("right eye")
        guard reader.isAtEnd else {
            throw InteropError.malformed.detailed("\(reader.remaining) bytes after the \(Self.valueCount) values")
        }
        self.update = update
    }

    /// Decodes one datagram, as `init(decoding:)` does a slice.
    public init(decoding bytes: [UInt8]) throws {
        try self.init(decoding: bytes[...])
    }

    /// Veil's angles as Live Link carries them (pitch negated; `0 - x` so that 0 stays +0), clamped.
    private static func wireAngles(_ angles: EulerAngles) -> EulerAngles {
        let a = angles.clamped
        return EulerAngles(yaw: a.yaw, pitch: 0 - a.pitch, roll: a.roll)
    }

    /// Live Link's angles in Veil's conventions, clamped.
    private static func veilAngles(_ wire: EulerAngles) -> EulerAngles {
        EulerAngles(yaw: wire.yaw, pitch: 0 - wire.pitch, roll: wire.roll).clamped
    }
}
