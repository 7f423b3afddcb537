import Foundation
import VeilCore

// Open Sound Control 1.0 (opensoundcontrol.org/spec-1_0), the encoding side only, and the VMC
// protocol's face messages on top of it: what an avatar app following VMC sends per frame, so that
// `veil bench` can weigh it against an ExpressionFrame. Veil itself never sends OSC.

/// One argument of an OSC message.
enum OSCArgument: Equatable {
    /// Type tag `i`: 32-bit two's complement, big-endian.
    case int32(Int32)
    /// Type tag `f`: IEEE 754 single precision, big-endian.
    case float32(Float)
    /// Type tag `s`: an OSC-string.
    case string(String)
    /// Type tag `b`: a size count then the bytes, padded to a multiple of 4.
    case blob([UInt8])

    /// The type tag character.
    var typeTag: UInt8 {
        switch self {
        case .int32: return UInt8(ascii: "i")
        case .float32: return UInt8(ascii: "f")
        case .string: return UInt8(ascii: "s")
        case .blob: return UInt8(ascii: "b")
        }
    }
}

/// An OSC time tag: NTP format, seconds since 1900-01-01 and a 32-bit binary fraction.
struct OSCTimeTag: Equatable {
    var seconds: UInt32
    var fraction: UInt32

    /// The special value 1: "immediately".
    static let immediately = OSCTimeTag(seconds: 0, fraction: 1)

    /// Seconds between the NTP epoch (1900) and the Unix epoch (1970).
    static let ntpToUnixSeconds: UInt64 = 2_208_988_800

    init(seconds: UInt32, fraction: UInt32) { self.seconds = seconds; self.fraction = fraction }

    /// The time `unixMicros` microseconds after 1970-01-01 (NTP seconds wrap in 2036, as NTP's do).
    init(unixMicros: UInt64) {
        let whole = unixMicros / 1_000_000, micros = unixMicros % 1_000_000
        seconds = UInt32(truncatingIfNeeded: whole + Self.ntpToUnixSeconds)
        fraction = UInt32(truncatingIfNeeded: (micros << 32) / 1_000_000)
    }
}

/// An OSC message: an address pattern and typed arguments.
struct OSCMessage: Equatable {
    /// Starts with `/`, e.g. `/VMC/Ext/Blend/Val`.
    var address: String
    var arguments: [OSCArgument]

    init(_ address: String, _ arguments: [OSCArgument] = []) {
        self.address = address; self.arguments = arguments
    }

    /// The message's bytes: the address and the type tag string (`,` then one tag per argument)
    /// as OSC-strings, then each argument; every part a multiple of 4 bytes.
    func encoded() -> [UInt8] {
        var bytes: [UInt8] = []
        OSC.appendString(address, to: &bytes)
        OSC.appendString(String(decoding: [UInt8(ascii: ",")] + arguments.map(\.typeTag), as: UTF8.self), to: &bytes)
        for argument in arguments {
            switch argument {
            case .int32(let value): OSC.appendBigEndian(UInt32(bitPattern: value), to: &bytes)
            case .float32(let value): OSC.appendBigEndian(value.bitPattern, to: &bytes)
            case .string(let value): OSC.appendString(value, to: &bytes)
            case .blob(let data):
                OSC.appendBigEndian(UInt32(truncatingIfNeeded: data.count), to: &bytes)
                bytes += data
                OSC.pad(&bytes)
            }
        }
        return bytes
    }
}

/// An OSC bundle: `#bundle`, a time tag, then each element preceded by its size.
struct OSCBundle: Equatable {
    /// The elements of a bundle: messages or nested bundles.
    indirect enum Element: Equatable {
        case message(OSCMessage)
        case bundle(OSCBundle)

        func encoded() -> [UInt8] {
            switch self {
            case .message(let message): return message.encoded()
            case .bundle(let bundle): return bundle.encoded()
            }
        }
    }

    var timeTag: OSCTimeTag
    var elements: [Element]

    /// The bundle's bytes; each element's size is an int32 (always a multiple of 4).
    func encoded() -> [UInt8] {
        var bytes: [UInt8] = []
        OSC.appendString("#bundle", to: &bytes)
        OSC.appendBigEndian(timeTag.seconds, to: &bytes)
        OSC.appendBigEndian(timeTag.fraction, to: &bytes)
        for element in elements {
            let content = element.encoded()
            OSC.appendBigEndian(UInt32(truncatingIfNeeded: content.count), to: &bytes)
            bytes += content
        }
        return bytes
    }
}

/// The byte-level rules shared by messages and bundles.
enum OSC {
    /// An OSC-string: the characters (UTF-8; a NUL inside would end the string, so it is left
    /// out), then 1…4 NULs to reach a multiple of 4 bytes.
    static func appendString(_ string: String, to bytes: inout [UInt8]) {
        bytes += string.utf8.filter { $0 != 0 }
        bytes.append(0)
        pad(&bytes)
    }

    /// NULs up to the next multiple of 4 bytes.
    static func pad(_ bytes: inout [UInt8]) {
        while bytes.count % 4 != 0 { bytes.append(0) }
    }

    static func appendBigEndian(_ value: UInt32, to bytes: inout [UInt8]) {
        bytes += [UInt8(truncatingIfNeeded: value >> 24), UInt8(truncatingIfNeeded: value >> 16),
                  UInt8(truncatingIfNeeded: value >> 8), UInt8(truncatingIfNeeded: value)]
    }
}

/// What a sender following the VMC protocol (Virtual Motion Capture, OSC over UDP) sends per frame
/// for a face: one bundle with the time, the head and eye bones, every blendshape and an apply.
///
/// - `/VMC/Ext/T` (f): the sender's time in seconds.
/// - `/VMC/Ext/Bone/Pos` (s f f f f f f f): bone name, local position x y z, rotation quaternion
///   x y z w; for `Head`, and for `LeftEye` and `RightEye` when there is a gaze.
/// - `/VMC/Ext/Blend/Val` (s f): one per blendshape, all 52 every frame under ARKit's names (VMC's
///   "perfect sync" set), as VMC senders do.
/// - `/VMC/Ext/Blend/Apply` (no arguments): apply the values just sent.
///
/// That is the same information an `ExpressionFrame` carries.
enum VMCFrame {
    /// The bundle for `expression` at `timeSeconds`, stamped with `timeTag`.
    static func bundle(for expression: VeilCore.Expression, timeSeconds: Double,
                       timeTag: OSCTimeTag = .immediately) -> OSCBundle {
        var elements: [OSCBundle.Element] = [.message(OSCMessage("/VMC/Ext/T", [.float32(Float(timeSeconds))]))]
        let pose = expression.headPose
        elements.append(bone("Head", rotation: quaternion(yawDegrees: pose.yaw, pitchDegrees: pose.pitch, rollDegrees: pose.roll)))
        if let gaze = expression.gaze {
            // Eyes turned by up to 30° across the gaze's −1…1 range.
            let eye = quaternion(yawDegrees: gaze.x * 30, pitchDegrees: gaze.y * 30, rollDegrees: 0)
            elements.append(bone("LeftEye", rotation: eye))
            elements.append(bone("RightEye", rotation: eye))
        }
        for shape in BlendShape.allCases {
            elements.append(.message(OSCMessage("/VMC/Ext/Blend/Val", [.string(shape.name), .float32(expression[shape])])))
        }
        elements.append(.message(OSCMessage("/VMC/Ext/Blend/Apply")))
        return OSCBundle(timeTag: timeTag, elements: elements)
    }

    private static func bone(_ name: String, rotation q: SIMD4<Float>) -> OSCBundle.Element {
        .message(OSCMessage("/VMC/Ext/Bone/Pos", [.string(name), .float32(0), .float32(0), .float32(0),
                                                  .float32(q.x), .float32(q.y), .float32(q.z), .float32(q.w)]))
    }

    /// Unit quaternion (x, y, z, w) of yaw about y, then pitch about x, then roll about z.
    static func quaternion(yawDegrees: Float, pitchDegrees: Float, rollDegrees: Float) -> SIMD4<Float> {
        func axis(_ degrees: Float, _ x: Float, _ y: Float, _ z: Float) -> SIMD4<Float> {
            let half = degrees * .pi / 360
            return SIMD4(x * sin(half), y * sin(half), z * sin(half), cos(half))
        }
        func multiply(_ a: SIMD4<Float>, _ b: SIMD4<Float>) -> SIMD4<Float> {
            SIMD4(a.w * b.x + a.x * b.w + a.y * b.z - a.z * b.y,
                  a.w * b.y - a.x * b.z + a.y * b.w + a.z * b.x,
                  a.w * b.z + a.x * b.y - a.y * b.x + a.z * b.w,
                  a.w * b.w - a.x * b.x - a.y * b.y - a.z * b.z)
        }
        return multiply(multiply(axis(yawDegrees, 0, 1, 0), axis(pitchDegrees, 1, 0, 0)), axis(rollDegrees, 0, 0, 1))
    }
}
