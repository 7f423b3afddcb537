import VeilCore

/// Reads what a VMC Performer sends, datagram by datagram, into expression updates.
///
/// A value-type state machine without I/O: give it each datagram's bytes, in arrival order. It keeps
/// the latest value of each blendshape and the latest head and eye rotations, and returns an update
/// (all it knows) at the end of every datagram that held a `/VMC/Ext/Blend/Apply`, so message order
/// within a frame does not matter and a frame split across datagrams is read whole. Unknown
/// addresses, bones and blendshape names are ignored and counted; so are messages whose arguments
/// are too few or of the wrong type (extra arguments are ignored, as the reference receiver does).
/// Values are clamped: coefficients to 0…1, angles as `EulerAngles.clamped`. Memory is bounded:
/// only the 52 ARKit coefficients, three rotations and a time are kept.
public struct VMCReceiver: Sendable {
    /// What the receiver has read and set aside.
    public struct Statistics: Equatable, Sendable {
        /// Datagrams decoded as OSC (refused ones throw and are not counted here).
        public var datagrams = 0
        /// Updates returned.
        public var updates = 0
        /// Messages to addresses Veil does not read (`/VMC/Ext/Cam`, `/VMC/Ext/Hmd/Pos`…).
        public var unknownAddresses = 0
        /// Known messages with too few arguments, arguments of the wrong type, or a zero quaternion.
        public var malformedMessages = 0
        /// `/VMC/Ext/Bone/Pos` for bones other than `Head`, `LeftEye`, `RightEye` (a body, fingers).
        public var otherBones = 0
        /// `/VMC/Ext/Blend/Val` for names that are not ARKit's (VRM's `A`, `Blink`…).
        public var unknownBlendShapes = 0

        public init() {}
    }

    public private(set) var statistics = Statistics()
    /// Limits the OSC decoder applies to each datagram.
    public var limits: OSCPacket.Limits
    private var state = ExpressionUpdate()

    /// A receiver that has read nothing yet.
    public init(limits: OSCPacket.Limits = .standard) { self.limits = limits }

    /// Reads one datagram. Returns an update when it held an apply, else nil. Throws `InteropError`
    /// when the datagram is not OSC (see `OSCPacket.init(decoding:limits:)`); the state is then unchanged.
    /// The datagram is read where it lies, not copied.
    public mutating func receive(_ datagram: ArraySlice<UInt8>) throws -> ExpressionUpdate? {
        let packet = try OSCPacket(decoding: datagram, limits: limits)
        statistics.datagrams += 1
        var applied = false
        for message in packet.messages {
            applied = read(message) || applied
        }
        guard applied else { return nil }
        statistics.updates += 1
        return state
    }

    /// Reads one datagram, as `receive(_:)` does a slice.
    public mutating func receive(_ datagram: [UInt8]) throws -> ExpressionUpdate? { try receive(datagram[...]) }

    /// Folds one message into the state; true for an apply.
    private mutating func read(_ message: OSCMessage) -> Bool {
        let arguments = message.arguments
        switch message.address {
        case VMC.Address.blendApply:
            return true
        case VMC.Address.blendValue:
            guard arguments.count >= 2, let name = arguments[0].string, let value = arguments[1].number else {
                statistics.malformedMessages += 1
                return false
            }
            guard let shape = Self.blendShape(named: name) else {
                statistics.unknownBlendShapes += 1
                return false
            }
            state[shape] = value
        case VMC.Address.bone:
            guard let (name, rotation) = transform(arguments) else { return false }
            switch name {
            case VMC.Bone.head: state.head = rotation
            case VMC.Bone.leftEye: state.leftEye = rotation
            case VMC.Bone.rightEye: state.rightEye = rotation
            default: statistics.otherBones += 1
            }
        case VMC.Address.time:
            guard let time = arguments.first?.number else {
                statistics.malformedMessages += 1
                return false
            }
            state.time = time.isFinite ? Double(time) : nil
        case VMC.Address.root, VMC.Address.ok:
            // Read for well-formedness only: a face has no use for the root or the sender's status.
            if message.address == VMC.Address.root { _ = transform(arguments) } else if arguments.first?.number == nil {
                statistics.malformedMessages += 1
            }
        default:
            statistics.unknownAddresses += 1
        }
        return false
    }

    /// The name and rotation of a `Bone/Pos` or `Root/Pos` message, or nil (counted as malformed).
    private mutating func transform(_ arguments: [OSCArgument]) -> (String, EulerAngles)? {
        guard arguments.count >= 8, let name = arguments[0].string else {
            statistics.malformedMessages += 1
            return nil
        }
        let numbers = arguments[4..<8].compactMap(\.number)
        guard numbers.count == 4, let rotation = EulerAngles(unityQuaternion: SIMD4(numbers[0], numbers[1], numbers[2], numbers[3])) else {
            statistics.malformedMessages += 1
            return nil
        }
        return (name, rotation)
    }

    /// The ARKit blendshape a VMC name stands for: ARKit's name in any letter case (VRM models'
    /// perfect-sync clips are often `EyeBlinkLeft` rather than `eyeBlinkLeft`).
    static func blendShape(named name: String) -> BlendShape? {
        if let exact = BlendShape(name: name) { return exact }
        return lowercasedNames[name.lowercased()]
    }

    private static let lowercasedNames = Dictionary(uniqueKeysWithValues: BlendShape.allCases.map { ($0.name.lowercased(), $0) })
}
