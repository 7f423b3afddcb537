import Foundation

/// Reading the two binary formats a .tflite model carries, as far as registering custom operations
/// needs them: the FlatBuffers model (to find and mend its custom operator codes) and the FlexBuffers
/// bytes of a custom operation's options. Every read is bounds-checked: a malformed model gives
/// nil or an error, never a read outside the bytes.
enum ModelBytes {
    /// Little-endian unsigned integer of `width` bytes at `offset`, nil outside `bytes`.
    static func unsigned(_ bytes: UnsafeRawBufferPointer, at offset: Int, width: Int) -> UInt64? {
        guard offset >= 0, width > 0, width <= 8, offset + width <= bytes.count else { return nil }
        var value: UInt64 = 0
        for k in 0..<width { value |= UInt64(bytes[offset + k]) << (8 * UInt64(k)) }
        return value
    }

    /// Little-endian signed integer of `width` bytes at `offset`, nil outside `bytes`.
    static func signed(_ bytes: UnsafeRawBufferPointer, at offset: Int, width: Int) -> Int64? {
        guard let value = unsigned(bytes, at: offset, width: width) else { return nil }
        let shift = UInt64(64 - 8 * width)
        return Int64(bitPattern: value << shift) >> Int64(shift)
    }

    // MARK: - The model's operator codes (FlatBuffers, schema.fbs)

    /// Sets the version of each custom operator code named in `names` to 1 in a .tflite model's bytes
    /// (in place), and returns the names found. LiteRT registers a custom kernel as version 1
    /// whatever version it is given, while MediaPipe's attention mesh asks for version 2 of its
    /// operations, which would then go unresolved. Throws when the bytes are not a model.
    ///
    /// Layout: the root table (`Model`) is at the offset in the first 4 bytes; its field 1 is the
    /// vector of `OperatorCode` tables, whose field 1 is `custom_code` (a string) and field 2
    /// `version` (int32, absent when it is the default 1).
    static func customOperatorsAsVersionOne(_ raw: UnsafeMutableRawBufferPointer, names: Set<String>) throws -> Set<String> {
        let bytes = UnsafeRawBufferPointer(raw)
        func u32(_ offset: Int) throws -> Int {
            guard let value = unsigned(bytes, at: offset, width: 4) else { throw TrackingError("the model is truncated") }
            return Int(value)
        }
        /// Where field `field` of the table at `table` lies, nil when absent.
        func field(_ field: Int, of table: Int) throws -> Int? {
            guard let back = signed(bytes, at: table, width: 4) else { throw TrackingError("the model is truncated") }
            let vtable = table - Int(back)
            guard let size = unsigned(bytes, at: vtable, width: 2) else { throw TrackingError("the model is malformed") }
            let entry = 4 + 2 * field
            guard entry + 2 <= Int(size), let offset = unsigned(bytes, at: vtable + entry, width: 2), offset > 0 else { return nil }
            return table + Int(offset)
        }
        guard bytes.count >= 8, let identifier = String(bytes: bytes[4..<8], encoding: .ascii), identifier == "TFL3" else {
            throw TrackingError("not a TFLite model (no TFL3 identifier)")
        }
        let model = try u32(0)
        guard let codesField = try field(1, of: model) else { return [] }
        let codes = codesField + (try u32(codesField))
        var found: Set<String> = []
        for k in 0..<(try u32(codes)) {
            let slot = codes + 4 + 4 * k
            let code = slot + (try u32(slot))
            guard let nameField = try field(1, of: code) else { continue }
            let string = nameField + (try u32(nameField))
            let length = try u32(string)
            guard string + 4 + length <= bytes.count,
                  let name = String(bytes: bytes[(string + 4)..<(string + 4 + length)], encoding: .utf8),
                  names.contains(name) else { continue }
            found.insert(name)
            if let version = try field(2, of: code) {
                guard version + 4 <= raw.count else { throw TrackingError("the model is truncated") }
                raw.storeBytes(of: Int32(1).littleEndian, toByteOffset: version, as: Int32.self)
            }
        }
        return found
    }

    // MARK: - Custom options (FlexBuffers)

    /// A FlexBuffers value: where it lies, the width of the slot that holds it, and its packed type.
    struct FlexValue {
        let offset: Int, parentWidth: Int, packedType: UInt8
        var type: Int { Int(packedType >> 2) }
        var byteWidth: Int { 1 << Int(packedType & 3) }
    }

    /// The root of FlexBuffers `bytes` read as a map: its keys and values. Nil when the bytes are not
    /// a FlexBuffers map.
    static func flexMap(_ bytes: UnsafeRawBufferPointer) -> [String: FlexValue]? {
        guard bytes.count >= 3 else { return nil }
        let rootWidth = Int(bytes[bytes.count - 1])
        let root = FlexValue(offset: bytes.count - 2 - rootWidth, parentWidth: rootWidth, packedType: bytes[bytes.count - 2])
        guard [1, 2, 4, 8].contains(rootWidth), root.type == 9,  // FBT_MAP
              let map = indirect(bytes, root) else { return nil }
        let width = root.byteWidth
        guard let count = unsigned(bytes, at: map - width, width: width),
              let keysBack = unsigned(bytes, at: map - 3 * width, width: width),
              let keysWidth = unsigned(bytes, at: map - 2 * width, width: width),
              [1, 2, 4, 8].contains(keysWidth), count < 4096 else { return nil }
        let keys = map - 3 * width - Int(keysBack), kw = Int(keysWidth)
        var result: [String: FlexValue] = [:]
        for i in 0..<Int(count) {
            guard let back = unsigned(bytes, at: keys + i * kw, width: kw) else { return nil }
            var end = keys + i * kw - Int(back)
            let start = end
            while end >= 0, end < bytes.count, bytes[end] != 0 { end += 1 }
            guard start >= 0, end < bytes.count, let key = String(bytes: bytes[start..<end], encoding: .utf8),
                  map + Int(count) * width + i < bytes.count else { return nil }
            result[key] = FlexValue(offset: map + i * width, parentWidth: width, packedType: bytes[map + Int(count) * width + i])
        }
        return result
    }

    /// Where an offset value (map, vector) points, nil when outside the bytes.
    private static func indirect(_ bytes: UnsafeRawBufferPointer, _ value: FlexValue) -> Int? {
        guard let back = unsigned(bytes, at: value.offset, width: value.parentWidth) else { return nil }
        let target = value.offset - Int(back)
        return target >= 0 && target < bytes.count ? target : nil
    }

    /// An integer (inline, indirect or boolean), nil for another type.
    static func flexInt(_ bytes: UnsafeRawBufferPointer, _ value: FlexValue) -> Int? {
        switch value.type {
        case 1: return signed(bytes, at: value.offset, width: value.parentWidth).map(Int.init)             // INT
        case 2, 26: return unsigned(bytes, at: value.offset, width: value.parentWidth).map { Int(clamping: $0) } // UINT, BOOL
        case 6: return indirect(bytes, value).flatMap { signed(bytes, at: $0, width: value.byteWidth) }.map(Int.init)
        case 7: return indirect(bytes, value).flatMap { unsigned(bytes, at: $0, width: value.byteWidth) }.map { Int(clamping: $0) }
        default: return nil
        }
    }

    /// A number (float, or an integer as a float), nil for another type.
    static func flexFloat(_ bytes: UnsafeRawBufferPointer, _ value: FlexValue) -> Float? {
        func float(at offset: Int, width: Int) -> Float? {
            guard let bits = unsigned(bytes, at: offset, width: width) else { return nil }
            switch width {
            case 4: return Float(bitPattern: UInt32(bits))
            case 8: return Float(Double(bitPattern: bits))
            default: return nil
            }
        }
        switch value.type {
        case 3: return float(at: value.offset, width: value.parentWidth)                                      // FLOAT
        case 8: return indirect(bytes, value).flatMap { float(at: $0, width: value.byteWidth) }             // INDIRECT_FLOAT
        default: return flexInt(bytes, value).map(Float.init)
        }
    }

    /// A vector of integers (typed INT/UINT vector, or an untyped vector of integers), nil for another type.
    static func flexInts(_ bytes: UnsafeRawBufferPointer, _ value: FlexValue) -> [Int]? {
        guard let vector = indirect(bytes, value) else { return nil }
        let width = value.byteWidth
        guard let count = unsigned(bytes, at: vector - width, width: width), count < 65_536 else { return nil }
        switch value.type {
        case 11, 12:  // VECTOR_INT, VECTOR_UINT
            var result: [Int] = []
            for i in 0..<Int(count) {
                let offset = vector + i * width
                guard let item = value.type == 11 ? signed(bytes, at: offset, width: width).map(Int.init)
                                                  : unsigned(bytes, at: offset, width: width).map({ Int(clamping: $0) }) else { return nil }
                result.append(item)
            }
            return result
        case 10:  // VECTOR: each element's packed type follows the elements
            var result: [Int] = []
            for i in 0..<Int(count) {
                guard vector + Int(count) * width + i < bytes.count,
                      let item = flexInt(bytes, FlexValue(offset: vector + i * width, parentWidth: width,
                                                         packedType: bytes[vector + Int(count) * width + i])) else { return nil }
                result.append(item)
            }
            return result
        default: return nil
        }
    }
}
