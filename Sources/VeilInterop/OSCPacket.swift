/// What one OSC datagram holds: a message or a bundle.
public enum OSCPacket: Equatable, Sendable {
    case message(OSCMessage)
    case bundle(OSCBundle)

    /// How much a decoder accepts before it refuses a packet.
    public struct Limits: Equatable, Sendable {
        /// Largest packet (64 KiB: more than a UDP datagram's 65 507-byte payload can carry anyway).
        public var maximumPacketBytes: Int
        /// Longest address or string argument in UTF-8 bytes, the NUL not counted.
        public var maximumStringBytes: Int
        /// Most bundles nested in one another, the outermost counted.
        public var maximumBundleDepth: Int

        /// 64 KiB packets, 1 KiB strings, 8 levels of bundles.
        public static let standard = Limits(maximumPacketBytes: 65_536, maximumStringBytes: 1_024, maximumBundleDepth: 8)

        /// Limits of your own (each at least 1; bytes at most 1 GiB, depth at most 64).
        public init(maximumPacketBytes: Int, maximumStringBytes: Int, maximumBundleDepth: Int) {
            // Bounded above too, so that no limit plus a little can overflow.
            self.maximumPacketBytes = min(max(1, maximumPacketBytes), 1 << 30)
            self.maximumStringBytes = min(max(1, maximumStringBytes), 1 << 30)
            self.maximumBundleDepth = min(max(1, maximumBundleDepth), 64)
        }
    }

    /// Decodes one datagram. Throws `InteropError`: `.oversized` (packet or string beyond `limits`),
    /// `.truncated`, `.malformed`, `.unsupportedType` (a type tag other than `i f s b`: such a message
    /// is refused rather than skipped, since an unread argument would shift the ones after it) or
    /// `.nestingTooDeep`. Never traps on any input. The bytes are read where they lie (a socket's
    /// receive buffer), not copied; byte offsets in errors count from the slice's first byte.
    public init(decoding bytes: ArraySlice<UInt8>, limits: Limits = .standard) throws {
        guard bytes.count <= limits.maximumPacketBytes else {
            throw InteropError.oversized.detailed("\(bytes.count)-byte OSC packet, at most \(limits.maximumPacketBytes) accepted")
        }
        let decoder = OSCDecoder(limits: limits)
        self = try decoder.packet(WireReader(bytes), depth: 1)
    }

    /// Decodes one datagram, as `init(decoding:limits:)` does a slice.
    public init(decoding bytes: [UInt8], limits: Limits = .standard) throws {
        try self.init(decoding: bytes[...], limits: limits)
    }

    /// The packet's bytes.
    public func encoded() -> [UInt8] {
        switch self {
        case .message(let message): return message.encoded()
        case .bundle(let bundle): return bundle.encoded()
        }
    }

    /// Every message in the packet, bundles flattened depth first, in order.
    public var messages: [OSCMessage] {
        switch self {
        case .message(let message): return [message]
        case .bundle(let bundle): return bundle.messages
        }
    }
}

/// The reading half of OSC 1.0, over one packet's bytes.
private struct OSCDecoder {
    let limits: OSCPacket.Limits

    func packet(_ reader: WireReader, depth: Int) throws -> OSCPacket {
        guard let first = reader.byte(at: reader.offset) else {
            throw InteropError.truncated.detailed("empty OSC packet at byte \(reader.offset)")
        }
        guard reader.remaining % 4 == 0 else {
            throw InteropError.malformed.detailed("OSC packet of \(reader.remaining) bytes at byte \(reader.offset): not a multiple of 4")
        }
        switch first {
        case UInt8(ascii: "/"): return .message(try message(reader))
        case UInt8(ascii: "#"): return .bundle(try bundle(reader, depth: depth))
        default:
            throw InteropError.malformed.detailed("OSC packet at byte \(reader.offset) starts with \(first), neither '/' nor '#bundle'")
        }
    }

    func bundle(_ start: WireReader, depth: Int) throws -> OSCBundle {
        guard depth <= limits.maximumBundleDepth else {
            throw InteropError.nestingTooDeep.detailed("bundle at byte \(start.offset) nested \(depth) deep, at most \(limits.maximumBundleDepth)")
        }
        var reader = start
        let at = reader.offset
        guard try string(&reader, "bundle header") == "#bundle" else {
            throw InteropError.malformed.detailed("'#' at byte \(at) does not begin '#bundle'")
        }
        let timeTag = OSCTimeTag(seconds: try reader.uint32("time tag"), fraction: try reader.uint32("time tag"))
        var elements: [OSCBundle.Element] = []
        while !reader.isAtEnd {
            let sizeAt = reader.offset
            let size = Int(try reader.int32("bundle element size"))
            guard size > 0, size % 4 == 0 else {
                throw InteropError.malformed.detailed("bundle element size \(size) at byte \(sizeAt): must be a positive multiple of 4")
            }
            guard size <= reader.remaining else {
                throw InteropError.truncated.detailed("bundle element of \(size) bytes at byte \(sizeAt), \(reader.remaining) left")
            }
            let element = WireReader(reader.bytes, from: reader.offset, to: reader.offset + size)
            switch try packet(element, depth: depth + 1) {
            case .message(let message): elements.append(.message(message))
            case .bundle(let nested): elements.append(.bundle(nested))
            }
            _ = try reader.take(size, "bundle element")
        }
        return OSCBundle(timeTag: timeTag, elements: elements)
    }

    func message(_ start: WireReader) throws -> OSCMessage {
        var reader = start
        let address = try string(&reader, "address")
        let tagsAt = reader.offset
        guard !reader.isAtEnd else {
            throw InteropError.malformed.detailed("message \(address) has no type tag string (byte \(tagsAt))")
        }
        let tags = Array(try string(&reader, "type tag string").utf8)
        guard tags.first == UInt8(ascii: ",") else {
            throw InteropError.malformed.detailed("type tag string of \(address) at byte \(tagsAt) does not start with ','")
        }
        var arguments: [OSCArgument] = []
        arguments.reserveCapacity(tags.count - 1)
        for tag in tags.dropFirst() {
            switch tag {
            case UInt8(ascii: "i"): arguments.append(.int32(try reader.int32("int32 argument of \(address)")))
            case UInt8(ascii: "f"): arguments.append(.float32(try reader.float32("float32 argument of \(address)")))
            case UInt8(ascii: "s"): arguments.append(.string(try string(&reader, "string argument of \(address)")))
            case UInt8(ascii: "b"):
                let sizeAt = reader.offset
                let size = Int(try reader.int32("blob size of \(address)"))
                guard size >= 0 else { throw InteropError.malformed.detailed("blob size \(size) at byte \(sizeAt)") }
                let data = try reader.take(size, "blob of \(address)")
                _ = try reader.take((4 - size % 4) % 4, "blob padding of \(address)")
                arguments.append(.blob(Array(data)))
            default:
                let shown = (32...126).contains(tag) ? "'\(Character(Unicode.Scalar(tag)))'" : "byte \(tag)"
                throw InteropError.unsupportedType.detailed("type tag \(shown) in message \(address): Veil reads only i, f, s, b")
            }
        }
        guard reader.isAtEnd else {
            throw InteropError.malformed.detailed("\(reader.remaining) bytes after the arguments of \(address) at byte \(reader.offset)")
        }
        return OSCMessage(address, arguments)
    }

    /// An OSC-string: bytes up to a NUL, then padding to a multiple of 4.
    func string(_ reader: inout WireReader, _ what: String) throws -> String {
        let start = reader.offset
        let searchEnd = start + min(reader.remaining, limits.maximumStringBytes + 1)
        guard let nul = reader.firstNUL(in: start..<searchEnd) else {
            if searchEnd < reader.end || reader.remaining > limits.maximumStringBytes {
                throw InteropError.oversized.detailed("\(what) at byte \(start) longer than \(limits.maximumStringBytes) bytes")
            }
            throw InteropError.truncated.detailed("\(what) at byte \(start) has no terminating NUL")
        }
        let length = nul - start
        let text = try WireReader.text(reader[start..<nul], what, at: start)
        _ = try reader.take(OSCEncoding.paddedStringSize(length), "\(what) padding")
        return text
    }
}
