/// An OSC message: an address pattern and typed arguments.
public struct OSCMessage: Equatable, Sendable {
    /// Starts with `/`, e.g. `/VMC/Ext/Blend/Val`.
    public var address: String
    /// The arguments in order.
    public var arguments: [OSCArgument]

    /// A message to `address` with `arguments`.
    public init(_ address: String, _ arguments: [OSCArgument] = []) {
        self.address = address; self.arguments = arguments
    }

    /// The size of `encoded()`, counted without encoding (a sender packing messages into
    /// datagrams measures each one).
    public var encodedCount: Int {
        func stringSize(_ string: String) -> Int { OSCEncoding.paddedStringSize(string.utf8.lazy.filter { $0 != 0 }.count) }
        var size = stringSize(address) + OSCEncoding.paddedStringSize(1 + arguments.count)
        for argument in arguments {
            switch argument {
            case .int32, .float32: size += 4
            case .string(let value): size += stringSize(value)
            case .blob(let data): size += 4 + (data.count + 3) / 4 * 4
            }
        }
        return size
    }

    /// The message's bytes: the address and the type tag string (`,` then one tag per argument)
    /// as OSC-strings, then each argument; every part a multiple of 4 bytes.
    public func encoded() -> [UInt8] {
        var bytes: [UInt8] = []
        OSCEncoding.appendString(address, to: &bytes)
        OSCEncoding.appendString(String(decoding: [UInt8(ascii: ",")] + arguments.map(\.typeTag), as: UTF8.self), to: &bytes)
        for argument in arguments {
            switch argument {
            case .int32(let value): OSCEncoding.appendBigEndian(UInt32(bitPattern: value), to: &bytes)
            case .float32(let value): OSCEncoding.appendBigEndian(value.bitPattern, to: &bytes)
            case .string(let value): OSCEncoding.appendString(value, to: &bytes)
            case .blob(let data):
                OSCEncoding.appendBigEndian(UInt32(truncatingIfNeeded: data.count), to: &bytes)
                bytes += data
                OSCEncoding.pad(&bytes)
            }
        }
        return bytes
    }
}
