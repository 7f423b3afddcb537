import Foundation

/// Reads big-endian fields from untrusted bytes. Every read checks what is left first (as a
/// subtraction, so no offset arithmetic can overflow) and throws `InteropError.truncated`.
///
/// The bytes are a slice, read where they lie (a socket's receive buffer, a bundle's element):
/// nothing is copied. Offsets count from the slice's first byte, wherever it starts in its buffer.
struct WireReader {
    let bytes: ArraySlice<UInt8>
    private(set) var offset: Int
    let end: Int

    init(_ bytes: ArraySlice<UInt8>, from start: Int = 0, to end: Int? = nil) {
        self.bytes = bytes; offset = start; self.end = end ?? bytes.count
    }

    var remaining: Int { end - offset }
    var isAtEnd: Bool { offset >= end }

    /// The bytes at `range`, offsets from the first byte (within `0...bytes.count`).
    subscript(range: Range<Int>) -> ArraySlice<UInt8> {
        bytes[(bytes.startIndex + range.lowerBound)..<(bytes.startIndex + range.upperBound)]
    }

    /// The byte at `offset` from the first, or nil past the reader's end.
    func byte(at offset: Int) -> UInt8? { offset >= 0 && offset < end ? bytes[bytes.startIndex + offset] : nil }

    /// The offset of the first NUL in `range`, if any.
    func firstNUL(in range: Range<Int>) -> Int? { self[range].firstIndex(of: 0).map { $0 - bytes.startIndex } }

    mutating func take(_ count: Int, _ what: String) throws -> ArraySlice<UInt8> {
        guard count >= 0 else { throw InteropError.malformed.detailed("\(what): negative size \(count) at byte \(offset)") }
        guard count <= remaining else {
            throw InteropError.truncated.detailed("\(what): \(count) bytes needed at byte \(offset), \(remaining) left")
        }
        defer { offset += count }
        return self[offset..<(offset + count)]
    }

    mutating func uint8(_ what: String) throws -> UInt8 { try take(1, what).first ?? 0 }

    mutating func uint32(_ what: String) throws -> UInt32 {
        try take(4, what).reduce(0) { $0 << 8 | UInt32($1) }
    }

    mutating func int32(_ what: String) throws -> Int32 { Int32(bitPattern: try uint32(what)) }

    mutating func float32(_ what: String) throws -> Float { Float(bitPattern: try uint32(what)) }

    /// UTF-8 text, or `malformed` when the bytes are not UTF-8.
    static func text(_ slice: ArraySlice<UInt8>, _ what: String, at offset: Int) throws -> String {
        guard let string = String(bytes: slice, encoding: .utf8) else {
            throw InteropError.malformed.detailed("\(what) at byte \(offset) is not UTF-8")
        }
        return string
    }
}
