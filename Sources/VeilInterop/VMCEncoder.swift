import VeilCore

/// Turns expression updates into what a VMC Performer sends per frame, in datagrams that fit a UDP
/// packet without IP fragmentation.
///
/// Per frame, in this order: `/VMC/Ext/OK` 1, `/VMC/Ext/T`, `/VMC/Ext/Root/Pos` (identity),
/// `/VMC/Ext/Bone/Pos` for `Head` and, when the update has them, `LeftEye` and `RightEye`, one
/// `/VMC/Ext/Blend/Val` per coefficient (ARKit's order), then `/VMC/Ext/Blend/Apply`. A full frame
/// is about 2.9 KB, more than one Ethernet frame, so the messages are split across as many bundles
/// as needed, each its own datagram, in order; the apply is always in the last.
public struct VMCEncoder: Sendable {
    /// What the encoder sends beside the expression.
    public struct Options: Equatable, Sendable {
        /// Largest datagram payload (at least 512). The default, 1 400 bytes, fits a 1 500-byte MTU
        /// with IPv6 and UDP headers and some tunnel overhead to spare.
        public var maximumDatagramBytes: Int
        /// The local positions sent with the bones. Veil knows no skeleton, so they are zero unless
        /// set; a Marionette that applies bone positions (an option in some) wants the avatar's own.
        public var headPosition: SIMD3<Float>
        public var leftEyePosition: SIMD3<Float>
        public var rightEyePosition: SIMD3<Float>

        /// 1 400-byte datagrams, zero bone positions.
        public init(maximumDatagramBytes: Int = 1_400, headPosition: SIMD3<Float> = .zero,
                    leftEyePosition: SIMD3<Float> = .zero, rightEyePosition: SIMD3<Float> = .zero) {
            self.maximumDatagramBytes = min(max(maximumDatagramBytes, 512), 65_507)
            self.headPosition = headPosition; self.leftEyePosition = leftEyePosition; self.rightEyePosition = rightEyePosition
        }
    }

    public var options: Options

    /// An encoder with `options`.
    public init(options: Options = Options()) { self.options = options }

    /// The messages of one frame, in the order they are sent. `time` defaults to the update's, else 0.
    public func messages(for update: ExpressionUpdate) -> [OSCMessage] {
        var messages = [
            OSCMessage(VMC.Address.ok, [.int32(1)]),
            OSCMessage(VMC.Address.time, [.float32(Float(update.time ?? 0))]),
            Self.transform(VMC.Address.root, VMC.Bone.root, position: .zero, rotation: .zero),
            Self.transform(VMC.Address.bone, VMC.Bone.head, position: options.headPosition, rotation: update.head ?? .zero),
        ]
        if let eye = update.leftEye {
            messages.append(Self.transform(VMC.Address.bone, VMC.Bone.leftEye, position: options.leftEyePosition, rotation: eye))
        }
        if let eye = update.rightEye {
            messages.append(Self.transform(VMC.Address.bone, VMC.Bone.rightEye, position: options.rightEyePosition, rotation: eye))
        }
        for shape in BlendShape.allCases {
            if let value = update[shape] {
                messages.append(OSCMessage(VMC.Address.blendValue, [.string(shape.name), .float32(value)]))
            }
        }
        messages.append(OSCMessage(VMC.Address.blendApply))
        return messages
    }

    /// One frame as bundles stamped `timeTag`, each at most `options.maximumDatagramBytes` encoded.
    public func bundles(for update: ExpressionUpdate, timeTag: OSCTimeTag = .immediately) -> [OSCBundle] {
        var bundles: [OSCBundle] = []
        var current: [OSCBundle.Element] = []
        var size = OSCBundle.headerBytes
        for message in messages(for: update) {
            let elementSize = 4 + message.encodedCount
            if !current.isEmpty, size + elementSize > options.maximumDatagramBytes {
                bundles.append(OSCBundle(timeTag: timeTag, elements: current))
                current = []
                size = OSCBundle.headerBytes
            }
            current.append(.message(message))
            size += elementSize
        }
        if !current.isEmpty { bundles.append(OSCBundle(timeTag: timeTag, elements: current)) }
        return bundles
    }

    /// One frame as the datagrams to send, in order.
    public func datagrams(for update: ExpressionUpdate, timeTag: OSCTimeTag = .immediately) -> [[UInt8]] {
        bundles(for: update, timeTag: timeTag).map { $0.encoded() }
    }

    /// A `/VMC/Ext/Bone/Pos` (or `Root/Pos`) message: name, position, quaternion.
    static func transform(_ address: String, _ name: String, position p: SIMD3<Float>, rotation: EulerAngles) -> OSCMessage {
        let q = rotation.unityQuaternion
        return OSCMessage(address, [.string(name), .float32(p.x), .float32(p.y), .float32(p.z),
                                    .float32(q.x), .float32(q.y), .float32(q.z), .float32(q.w)])
    }
}
