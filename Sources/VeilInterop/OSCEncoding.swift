/// The byte-level rules shared by OSC messages and bundles.
enum OSCEncoding {
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

    /// The size of an OSC-string of `utf8Count` bytes: the NUL and padding included.
    static func paddedStringSize(_ utf8Count: Int) -> Int { (utf8Count / 4 + 1) * 4 }
}
