// The wire format of ExpressionFrame, version 1. docs/wire-format.md describes every byte; keep the
// two in step (VeilCoreTests checks the document's golden vectors against this encoder).

// MARK: - Errors

/// Why a byte sequence received from a peer is not a valid version-1 `ExpressionFrame`.
///
/// Compare `code` with the static members of `Code` to tell the cases apart; `description` says
/// what failed in words fit for a log. The decoder checks in a fixed order (see docs/wire-format.md),
/// so one input always yields the same error.
public struct ExpressionFrameDecodingError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kind of failure. New kinds may be added; match with `==`, not exhaustively.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: String, Hashable, Sendable {
            case truncated, oversized, unsupportedVersion, checksumMismatch, reservedBitsSet
            case valueOutOfRange, trailingBytes, lostFrameHasPayload
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// The kind's name, e.g. `"checksumMismatch"`.
        public var description: String { base.rawValue }

        /// The input ends before the frame its header and presence bitmap describe (empty input included).
        public static let truncated = Code(.truncated)
        /// The input is longer than `ExpressionFrame.maximumEncodedSize`; nothing of it was read.
        public static let oversized = Code(.oversized)
        /// The first byte names a format version this decoder does not know (see `version`).
        public static let unsupportedVersion = Code(.unsupportedVersion)
        /// The CRC-16 does not match the bytes: they were corrupted (or a frame was cut and padded).
        public static let checksumMismatch = Code(.checksumMismatch)
        /// A flag bit or presence-bitmap bit that version 1 reserves is set.
        public static let reservedBitsSet = Code(.reservedBitsSet)
        /// A quantised value lies outside the range the format allows (see `field`).
        public static let valueOutOfRange = Code(.valueOutOfRange)
        /// The input continues after the checksum of the frame its header describes.
        public static let trailingBytes = Code(.trailingBytes)
        /// The frame says `lost` yet carries expression bytes or expression flags.
        public static let lostFrameHasPayload = Code(.lostFrameHasPayload)
    }

    /// A quantised value on the wire, named for `valueOutOfRange` errors.
    public struct Field: Hashable, Sendable, CustomStringConvertible {
        /// The field's name, e.g. `"yaw"` or `"coefficient jawOpen"`.
        public let description: String
        private init(_ name: String) { description = name }

        /// Head yaw, int16 in 0.01°.
        public static let yaw = Field("yaw")
        /// Head pitch, int16 in 0.01°.
        public static let pitch = Field("pitch")
        /// Head roll, int16 in 0.01°.
        public static let roll = Field("roll")
        /// Horizontal gaze, int8 in 1/127.
        public static let gazeX = Field("gazeX")
        /// Vertical gaze, int8 in 1/127.
        public static let gazeY = Field("gazeY")
        /// A blendshape coefficient marked present in the bitmap, uint8 in 1/255.
        public static func coefficient(_ shape: BlendShape) -> Field { Field("coefficient \(shape.name)") }
    }

    /// What kind of failure this is.
    public let code: Code
    /// Offset in the input of the byte (or first byte of the field) where the failure was found;
    /// for `truncated`, `oversized` and `trailingBytes` it is the length the frame should have had
    /// (at least), or the limit.
    public let byteOffset: Int
    /// For `valueOutOfRange`: the offending field.
    public let field: Field?
    /// For `unsupportedVersion`: the version byte received.
    public let version: UInt8?
    /// What failed, in words.
    public let description: String

    private init(_ code: Code, at byteOffset: Int, field: Field? = nil, version: UInt8? = nil, _ description: String) {
        self.code = code
        self.byteOffset = byteOffset
        self.field = field
        self.version = version
        self.description = "invalid expression frame: " + description
    }

    static func truncated(count: Int, needed: Int, what: String) -> Self {
        Self(.truncated, at: needed, "truncated: \(count) bytes, but \(what) needs \(needed)")
    }
    static func oversized(limit: Int) -> Self {
        Self(.oversized, at: limit, "longer than the \(limit)-byte maximum; not read")
    }
    static func unsupportedVersion(_ version: UInt8) -> Self {
        Self(.unsupportedVersion, at: 0, version: version,
             "format version \(version) is not supported (this decoder reads version \(WireFormat.version))")
    }
    static func checksumMismatch(expected: UInt16, received: UInt16, at offset: Int) -> Self {
        Self(.checksumMismatch, at: offset, "CRC-16 is \(hex(received)) but the bytes give \(hex(expected)); the frame was corrupted")
    }
    static func reservedBitsSet(at offset: Int, _ what: String) -> Self {
        Self(.reservedBitsSet, at: offset, "reserved bits set in \(what)")
    }
    static func valueOutOfRange(_ field: Field, at offset: Int, _ what: String) -> Self {
        Self(.valueOutOfRange, at: offset, field: field, "\(field) out of range: \(what)")
    }
    static func trailingBytes(count: Int, expected: Int) -> Self {
        Self(.trailingBytes, at: expected, "\(count - expected) bytes after the \(expected)-byte frame")
    }
    static func lostFrameHasPayload(at offset: Int, _ what: String) -> Self {
        Self(.lostFrameHasPayload, at: offset, "the frame says lost but \(what)")
    }

    private static func hex(_ value: UInt16) -> String {
        let digits = String(value, radix: 16, uppercase: true)
        return "0x" + String(repeating: "0", count: 4 - digits.count) + digits
    }
}

// MARK: - Public API

extension ExpressionFrame {
    /// No encoded frame is longer than this, and the decoder rejects longer input unread.
    /// (A frame with all 52 coefficients, pose and gaze takes 81 bytes.)
    public static let maximumEncodedSize = 128

    /// The format version this code writes and reads, the first byte of every frame.
    public static let wireFormatVersion: UInt8 = WireFormat.version

    /// The frame's bytes in wire format version 1 (docs/wire-format.md), at most `maximumEncodedSize`.
    ///
    /// Values are quantised so that decoding gives each coefficient within 0.5/255, each angle
    /// within 0.005° and each gaze axis within 0.5/127 of the original. Coefficients that quantise
    /// to 0 (below 0.5/255) are not sent. Out-of-range inputs are made valid rather than rejected:
    /// NaN coefficients and angles become 0, coefficients are clamped to 0…1, angles to ±180°, gaze
    /// to ±1, and a gaze with a NaN axis is sent as "no gaze". `captureTimeMicros` is sent modulo
    /// 2^48 (8.9 years), like an RTP timestamp; receivers compare times by difference. A lost
    /// frame is header-only: its expression and `isVoiceDriven` are not sent.
    public func encoded() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(Self.maximumEncodedSize)
        let tracked = state == .tracked
        let gaze = tracked ? WireFormat.quantizedGaze(expression.gaze) : nil

        var flags: UInt8 = 0
        if tracked { flags |= WireFormat.trackedFlag }
        if gaze != nil { flags |= WireFormat.gazeFlag }
        if tracked && isVoiceDriven { flags |= WireFormat.voiceDrivenFlag }

        out.append(WireFormat.version)
        out.append(flags)
        WireFormat.appendLittleEndian(UInt64(sequence), byteCount: 4, to: &out)
        WireFormat.appendLittleEndian(captureTimeMicros & WireFormat.captureTimeMask, byteCount: 6, to: &out)

        if tracked {
            let values = expression.coefficients
            let quantized: [UInt8] = (0..<WireFormat.coefficientCount).map { index in
                WireFormat.quantizedCoefficient(index < values.count ? values[index] : 0)
            }
            var bitmap = [UInt8](repeating: 0, count: WireFormat.bitmapSize)
            for (index, q) in quantized.enumerated() where q != 0 {
                bitmap[index / 8] |= 1 << UInt8(index % 8)
            }
            out.append(contentsOf: bitmap)
            out.append(contentsOf: quantized.filter { $0 != 0 })

            let pose = expression.headPose
            for angle in [pose.yaw, pose.pitch, pose.roll] {
                let q = UInt16(bitPattern: WireFormat.quantizedAngle(angle))
                WireFormat.appendLittleEndian(UInt64(q), byteCount: 2, to: &out)
            }
            if let gaze {
                out.append(UInt8(bitPattern: gaze.x))
                out.append(UInt8(bitPattern: gaze.y))
            }
        }

        let crc = WireFormat.crc16(out)
        WireFormat.appendLittleEndian(UInt64(crc), byteCount: 2, to: &out)
        return out
    }

    /// Decodes one frame in wire format version 1, rejecting anything that is not exactly the
    /// bytes `encoded()` produces for some frame.
    ///
    /// Checks run in this order, and the first failure is thrown: input length ≤
    /// `maximumEncodedSize` (`oversized`, before anything is read); version byte (`unsupportedVersion`);
    /// length implied by the flags and the presence bitmap (`truncated`, `trailingBytes`, or
    /// `lostFrameHasPayload` for a lost frame longer than its header); CRC-16 (`checksumMismatch`);
    /// reserved bits and lost-frame flags (`reservedBitsSet`, `lostFrameHasPayload`); value ranges
    /// (`valueOutOfRange`).
    ///
    /// - Throws: `ExpressionFrameDecodingError`, never anything else.
    public init(decoding bytes: some Collection<UInt8>) throws {
        // Never copy more than one byte past the limit, whatever the caller hands in.
        let input = Array(bytes.prefix(Self.maximumEncodedSize + 1))
        self = try WireFormat.decode(input)
    }
}

// MARK: - Format

/// Constants, quantisation and the decoder of wire format version 1.
enum WireFormat {
    static let version: UInt8 = 1

    static let trackedFlag: UInt8 = 1 << 0
    static let gazeFlag: UInt8 = 1 << 1
    static let voiceDrivenFlag: UInt8 = 1 << 2
    static let reservedFlags: UInt8 = 0b1111_1000

    static let coefficientCount = 52
    /// version, flags, sequence (4), capture time (6).
    static let headerSize = 12
    static let bitmapSize = 7
    /// Bits 52…55 of the bitmap: the high nibble of its last byte.
    static let reservedBitmapBits: UInt8 = 0xF0
    static let poseSize = 6
    static let gazeSize = 2
    static let checksumSize = 2
    static let lostFrameSize = headerSize + checksumSize
    static let captureTimeMask: UInt64 = (1 << 48) - 1

    /// Largest magnitude of an angle on the wire, in 0.01° (180°).
    static let angleLimit: Int16 = 18_000
    /// Largest magnitude of a gaze axis on the wire (1.0); -128 is invalid.
    static let gazeLimit: Int8 = 127

    // MARK: Quantisation (round to nearest, ties away from zero)

    static func quantizedCoefficient(_ value: Float) -> UInt8 {
        guard !value.isNaN else { return 0 }
        return UInt8((min(max(value, 0), 1) * 255).rounded())
    }

    static func quantizedAngle(_ degrees: Float) -> Int16 {
        guard !degrees.isNaN else { return 0 }
        return Int16((min(max(degrees, -180), 180) * 100).rounded())
    }

    static func quantizedGaze(_ gaze: Gaze?) -> (x: Int8, y: Int8)? {
        guard let gaze, !gaze.x.isNaN, !gaze.y.isNaN else { return nil }
        func axis(_ v: Float) -> Int8 { Int8((min(max(v, -1), 1) * Float(gazeLimit)).rounded()) }
        return (axis(gaze.x), axis(gaze.y))
    }

    // MARK: Bytes

    static func appendLittleEndian(_ value: UInt64, byteCount: Int, to out: inout [UInt8]) {
        for i in 0..<byteCount { out.append(UInt8(truncatingIfNeeded: value >> (8 * UInt64(i)))) }
    }

    static func readLittleEndian(_ bytes: [UInt8], at offset: Int, byteCount: Int) -> UInt64 {
        var value: UInt64 = 0
        for i in 0..<byteCount { value |= UInt64(bytes[offset + i]) << (8 * UInt64(i)) }
        return value
    }

    /// CRC-16/CCITT-FALSE: polynomial 0x1021, initial value 0xFFFF, no reflection, no final XOR
    /// (check value 0x29B1 for the ASCII bytes "123456789"). Detects every error of 1–3 bits and
    /// every burst up to 16 bits in a frame of this size.
    static func crc16(_ bytes: some Sequence<UInt8>) -> UInt16 {
        var crc: UInt16 = 0xFFFF
        for byte in bytes {
            crc ^= UInt16(byte) << 8
            for _ in 0..<8 {
                crc = crc & 0x8000 != 0 ? (crc << 1) ^ 0x1021 : crc << 1
            }
        }
        return crc
    }

    // MARK: Decoding

    typealias DecodingError = ExpressionFrameDecodingError

    /// The decoder proper; `input` holds at most `maximumEncodedSize + 1` bytes.
    static func decode(_ input: [UInt8]) throws -> ExpressionFrame {
        let count = input.count
        let limit = ExpressionFrame.maximumEncodedSize

        // 1. Size limit, before reading a single byte.
        guard count <= limit else { throw DecodingError.oversized(limit: limit) }

        // 2. Version: the only byte whose meaning every future version keeps.
        guard let versionByte = input.first else {
            throw DecodingError.truncated(count: 0, needed: lostFrameSize, what: "the smallest frame")
        }
        guard versionByte == version else { throw DecodingError.unsupportedVersion(versionByte) }

        // 3. Length implied by the structure. Only the tracked and gaze flags and the bitmap's
        //    population count are read here, to find where the checksum must be.
        guard count >= lostFrameSize else {
            throw DecodingError.truncated(count: count, needed: lostFrameSize, what: "the smallest frame")
        }
        let flags = input[1]
        let tracked = flags & trackedFlag != 0
        let hasGaze = flags & gazeFlag != 0
        let expectedCount: Int
        if tracked {
            let bitmapEnd = headerSize + bitmapSize
            guard count >= bitmapEnd + poseSize + checksumSize else {
                throw DecodingError.truncated(count: count, needed: bitmapEnd + poseSize + checksumSize,
                                              what: "a tracked frame with no coefficients")
            }
            expectedCount = bitmapEnd + presentCoefficients(in: input).count + poseSize
                + (hasGaze ? gazeSize : 0) + checksumSize
            guard count >= expectedCount else {
                throw DecodingError.truncated(count: count, needed: expectedCount,
                                              what: "the tracked frame its flags and presence bitmap describe")
            }
            guard count == expectedCount else { throw DecodingError.trailingBytes(count: count, expected: expectedCount) }
        } else {
            expectedCount = lostFrameSize
            guard count == expectedCount else {
                throw DecodingError.lostFrameHasPayload(at: headerSize, "\(count - lostFrameSize) bytes follow its header")
            }
        }

        // 4. Checksum over everything before it.
        let checksumOffset = expectedCount - checksumSize
        let received = UInt16(readLittleEndian(input, at: checksumOffset, byteCount: 2))
        let computed = crc16(input[..<checksumOffset])
        guard received == computed else {
            throw DecodingError.checksumMismatch(expected: computed, received: received, at: checksumOffset)
        }

        // 5. Structure: reserved bits, and a lost frame's flags.
        guard flags & reservedFlags == 0 else {
            throw DecodingError.reservedBitsSet(at: 1, "flags (0x\(String(flags, radix: 16)))")
        }
        let sequence = UInt32(readLittleEndian(input, at: 2, byteCount: 4))
        let captureTime = readLittleEndian(input, at: 6, byteCount: 6)
        guard tracked else {
            if flags & (gazeFlag | voiceDrivenFlag) != 0 {
                throw DecodingError.lostFrameHasPayload(at: 1, "its flags claim gaze or a voice-driven expression")
            }
            return ExpressionFrame(sequence: sequence, captureTimeMicros: captureTime, state: .lost)
        }
        let lastBitmapByte = headerSize + bitmapSize - 1
        guard input[lastBitmapByte] & reservedBitmapBits == 0 else {
            throw DecodingError.reservedBitsSet(at: lastBitmapByte, "the presence bitmap (bits 52…55)")
        }

        // 6. Values.
        var expression = Expression()
        var offset = headerSize + bitmapSize
        for shape in presentCoefficients(in: input) {
            let q = input[offset]
            guard q != 0 else {
                throw DecodingError.valueOutOfRange(.coefficient(shape), at: offset,
                                                    "0 is never sent; present coefficients are 1…255")
            }
            expression[shape] = Float(q) / 255
            offset += 1
        }
        var angles: [Float] = []
        for field in [DecodingError.Field.yaw, .pitch, .roll] {
            let q = Int16(bitPattern: UInt16(readLittleEndian(input, at: offset, byteCount: 2)))
            guard (-angleLimit...angleLimit).contains(q) else {
                throw DecodingError.valueOutOfRange(field, at: offset, "\(q) × 0.01° is beyond ±180°")
            }
            angles.append(Float(q) / 100)
            offset += 2
        }
        expression.headPose = HeadPose(yaw: angles[0], pitch: angles[1], roll: angles[2])
        if hasGaze {
            var axes: [Float] = []
            for field in [DecodingError.Field.gazeX, .gazeY] {
                let q = Int8(bitPattern: input[offset])
                guard q >= -gazeLimit else {
                    throw DecodingError.valueOutOfRange(field, at: offset, "\(q) is beyond -127…127")
                }
                axes.append(Float(q) / Float(gazeLimit))
                offset += 1
            }
            expression.gaze = Gaze(x: axes[0], y: axes[1])
        }
        return ExpressionFrame(sequence: sequence, captureTimeMicros: captureTime, state: .tracked,
                               expression: expression, isVoiceDriven: flags & voiceDrivenFlag != 0)
    }

    /// The shapes whose bits are set among bits 0…51 of the bitmap, in index order.
    /// `input` must hold at least `headerSize + bitmapSize` bytes.
    private static func presentCoefficients(in input: [UInt8]) -> [BlendShape] {
        BlendShape.allCases.filter { shape in
            input[headerSize + shape.rawValue / 8] & (1 << UInt8(shape.rawValue % 8)) != 0
        }
    }
}
