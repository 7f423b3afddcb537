/// An OSC bundle: `#bundle`, a time tag, then each element preceded by its size.
public struct OSCBundle: Equatable, Sendable {
    /// The elements of a bundle: messages or nested bundles.
    public indirect enum Element: Equatable, Sendable {
        case message(OSCMessage)
        case bundle(OSCBundle)

        /// The element's bytes (without its size prefix).
        public func encoded() -> [UInt8] {
            switch self {
            case .message(let message): return message.encoded()
            case .bundle(let bundle): return bundle.encoded()
            }
        }
    }

    /// When the receiver should act on the bundle.
    public var timeTag: OSCTimeTag
    /// The elements in order.
    public var elements: [Element]

    /// A bundle of `elements` stamped with `timeTag`.
    public init(timeTag: OSCTimeTag = .immediately, elements: [Element]) {
        self.timeTag = timeTag; self.elements = elements
    }

    /// The bundle's bytes; each element's size is an int32 (always a multiple of 4).
    public func encoded() -> [UInt8] {
        var bytes: [UInt8] = []
        OSCEncoding.appendString("#bundle", to: &bytes)
        OSCEncoding.appendBigEndian(timeTag.seconds, to: &bytes)
        OSCEncoding.appendBigEndian(timeTag.fraction, to: &bytes)
        for element in elements {
            let content = element.encoded()
            OSCEncoding.appendBigEndian(UInt32(truncatingIfNeeded: content.count), to: &bytes)
            bytes += content
        }
        return bytes
    }

    /// Every message in the bundle and its nested bundles, depth first, in order.
    public var messages: [OSCMessage] {
        elements.flatMap { element -> [OSCMessage] in
            switch element {
            case .message(let message): return [message]
            case .bundle(let bundle): return bundle.messages
            }
        }
    }

    /// Bytes of `#bundle` and the time tag, before the first element.
    static let headerBytes = 16
}
