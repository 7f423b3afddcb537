/// Appends big-endian fields (the counterpart of `WireReader`).
struct WireWriter {
    private(set) var bytes: [UInt8] = []

    mutating func uint8(_ value: UInt8) { bytes.append(value) }
    mutating func uint32(_ value: UInt32) { OSCEncoding.appendBigEndian(value, to: &bytes) }
    mutating func int32(_ value: Int32) { uint32(UInt32(bitPattern: value)) }
    mutating func float32(_ value: Float) { uint32(value.bitPattern) }
    mutating func append(_ data: [UInt8]) { bytes += data }
}
