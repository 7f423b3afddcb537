/// One argument of an OSC 1.0 message: the four types every OSC implementation must understand.
public enum OSCArgument: Equatable, Sendable {
    /// Type tag `i`: 32-bit two's complement, big-endian.
    case int32(Int32)
    /// Type tag `f`: IEEE 754 single precision, big-endian.
    case float32(Float)
    /// Type tag `s`: an OSC-string (UTF-8 here, NUL-terminated, padded to 4 bytes).
    case string(String)
    /// Type tag `b`: a size count then the bytes, padded to a multiple of 4.
    case blob([UInt8])

    /// The type tag character.
    public var typeTag: UInt8 {
        switch self {
        case .int32: return UInt8(ascii: "i")
        case .float32: return UInt8(ascii: "f")
        case .string: return UInt8(ascii: "s")
        case .blob: return UInt8(ascii: "b")
        }
    }

    /// The value when this is a float (`f`) or an int (`i`, read as a number), else nil.
    public var number: Float? {
        switch self {
        case .float32(let value): return value
        case .int32(let value): return Float(value)
        default: return nil
        }
    }

    /// The value when this is a string, else nil.
    public var string: String? {
        if case .string(let value) = self { return value }
        return nil
    }
}
