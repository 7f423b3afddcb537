import VeilCore

/// What `ExpressionFrame(decoding:)` promises (docs/wire-format.md), checked on arbitrary bytes.
///
/// Each input is decoded as it is and, when it has at least 3 bytes, once more with its last two
/// bytes replaced by the correct CRC-16, so that mutations get past the checksum to the checks
/// behind it (reserved bits, value ranges). For each:
/// - a rejection is an `ExpressionFrameDecodingError` (nothing else is thrown, nothing traps), the
///   same input is rejected the same way again, and the error is consistent: `field` exactly for
///   `valueOutOfRange`, `version` exactly for `unsupportedVersion`, `byteOffset` within 0…128;
/// - an accepted input is at most `maximumEncodedSize` bytes and canonical: `encoded()` gives back
///   exactly the input, and decoding that gives the same frame;
/// - an accepted frame's values lie in their documented ranges (coefficients 0…1, angles ±180°,
///   gaze ±1, all finite), and a lost frame carries the neutral expression and no voice mark.
public enum ExpressionFrameInvariants {
    static let harness = FuzzHarness.expressionFrame.rawValue

    /// Checks one input (see the type's documentation).
    public static func check(_ input: [UInt8]) throws(InvariantViolation) {
        try checkOne(input)
        if input.count >= 3 && input.count <= ExpressionFrame.maximumEncodedSize {
            var repaired = input
            let crc = crc16(repaired.dropLast(2))
            repaired[repaired.count - 2] = UInt8(truncatingIfNeeded: crc)
            repaired[repaired.count - 1] = UInt8(truncatingIfNeeded: crc >> 8)
            if repaired != input { try checkOne(repaired) }
        }
    }

    private static func checkOne(_ input: [UInt8]) throws(InvariantViolation) {
        func fail(_ what: String) -> InvariantViolation { InvariantViolation(harness, "\(what); input \(hex(input))") }

        let frame: ExpressionFrame
        do {
            frame = try ExpressionFrame(decoding: input)
        } catch let error as ExpressionFrameDecodingError {
            try checkRejection(error, of: input, fail)
            return
        } catch {
            throw fail("the decoder threw \(type(of: error)) (\(error)), not an ExpressionFrameDecodingError")
        }

        guard input.count <= ExpressionFrame.maximumEncodedSize else {
            throw fail("accepted \(input.count) bytes, more than the \(ExpressionFrame.maximumEncodedSize)-byte maximum")
        }
        let encoded = frame.encoded()
        guard encoded == input else {
            throw fail("accepted a non-canonical frame: it re-encodes to \(hex(encoded))")
        }
        do {
            let again = try ExpressionFrame(decoding: encoded)
            guard again == frame else { throw fail("the re-encoded frame decodes to \(again), not \(frame)") }
        } catch let violation as InvariantViolation {
            throw violation
        } catch {
            throw fail("the re-encoded frame is rejected: \(error)")
        }
        try checkRanges(frame, fail)
    }

    private static func checkRejection(_ error: ExpressionFrameDecodingError, of input: [UInt8],
                                       _ fail: (String) -> InvariantViolation) throws(InvariantViolation) {
        do {
            _ = try ExpressionFrame(decoding: input)
            throw fail("rejected once (\(error)), then accepted")
        } catch let again as ExpressionFrameDecodingError {
            guard again == error else { throw fail("rejected as \(error), then as \(again)") }
        } catch let violation as InvariantViolation {
            throw violation
        } catch {
            throw fail("the decoder threw \(type(of: error)) on the second try")
        }
        guard (error.field != nil) == (error.code == .valueOutOfRange) else {
            throw fail("\(error.code) error with field \(String(describing: error.field))")
        }
        guard (error.version != nil) == (error.code == .unsupportedVersion) else {
            throw fail("\(error.code) error with version \(String(describing: error.version))")
        }
        guard (0...ExpressionFrame.maximumEncodedSize).contains(error.byteOffset) else {
            throw fail("\(error.code) error at byte offset \(error.byteOffset)")
        }
        guard error.description.hasPrefix("invalid expression frame: ") else {
            throw fail("error description \(quoted(error.description)) does not say what it is about")
        }
    }

    private static func checkRanges(_ frame: ExpressionFrame, _ fail: (String) -> InvariantViolation) throws(InvariantViolation) {
        let e = frame.expression
        switch frame.state {
        case .lost:
            guard e == .neutral, !frame.isVoiceDriven else { throw fail("a lost frame carries \(e), voice \(frame.isVoiceDriven)") }
        case .tracked:
            guard e.coefficients.count == BlendShape.allCases.count else {
                throw fail("\(e.coefficients.count) coefficients instead of \(BlendShape.allCases.count)")
            }
            for shape in BlendShape.allCases where !(0...1).contains(e[shape]) {
                throw fail("coefficient \(shape.name) = \(e[shape]) is outside 0…1")
            }
            let pose = e.headPose
            for (name, angle) in [("yaw", pose.yaw), ("pitch", pose.pitch), ("roll", pose.roll)] where !(-180...180).contains(angle) {
                throw fail("\(name) = \(angle)° is outside ±180°")
            }
            if let gaze = e.gaze, !(-1...1).contains(gaze.x) || !(-1...1).contains(gaze.y) {
                throw fail("gaze (\(gaze.x), \(gaze.y)) is outside ±1")
            }
        }
    }

    /// CRC-16/CCITT-FALSE (polynomial 0x1021, initial 0xFFFF, unreflected, no final XOR), written
    /// here from the document rather than borrowed from VeilCore, so the two check each other.
    static func crc16(_ bytes: some Sequence<UInt8>) -> UInt16 {
        var crc: UInt16 = 0xFFFF
        for byte in bytes {
            crc ^= UInt16(byte) << 8
            for _ in 0..<8 { crc = (crc & 0x8000) == 0 ? crc << 1 : (crc << 1) ^ 0x1021 }
        }
        return crc
    }
}
