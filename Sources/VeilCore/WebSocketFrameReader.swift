// RFC 6455 as the room server reads it from clients: strict, incremental, and bounded before any
// byte of a payload is kept. No I/O: the server's `WebSocketSession` feeds it what it reads, the
// tests and the fuzz harness feed it bytes directly.

/// Reads a client's WebSocket frames and reassembles its messages.
///
/// Strict where leniency would cost the server:
/// - no extension is ever negotiated, so a frame with a reserved bit set (a compressed frame, say)
///   is a protocol error, and nothing is ever inflated;
/// - the size of a message is checked against `messageLimit` when each frame's header announces its
///   length, over all of the message's fragments together, before its payload is kept;
/// - client frames must be masked; control frames must be final and at most 125 bytes; lengths use
///   their shortest encoding; text must be UTF-8.
///
/// Call `append` with bytes as they arrive, then `next()` until it returns nil. `messageLimit` may
/// change between calls to `next()` (the server lowers it for connections that have not joined).
/// After a violation the reader is spent: `next()` throws it again.
public struct WebSocketFrameReader: Sendable {
    /// What a client sent.
    public enum Event: Equatable, Sendable {
        /// A whole text message (valid UTF-8).
        case text([UInt8])
        /// A whole binary message.
        case binary([UInt8])
        /// A ping frame and its payload (the answer is a pong with the same payload).
        case ping([UInt8])
        /// A pong frame.
        case pong
        /// A close frame: the status code the client gave, if any.
        case close(code: UInt16?)
    }

    /// Why the connection must end, with the close code to give.
    public struct Violation: Error, Equatable, Sendable, CustomStringConvertible {
        /// 1002 protocol error, 1007 invalid data, 1009 message too big.
        public let closeCode: UInt16
        /// What was wrong, for the error message and the log.
        public let reason: String
        /// For 1009: the size the message announced (so far).
        public var announcedBytes: Int? = nil
        public var description: String { reason }

        static func protocolError(_ reason: String) -> Violation { Violation(closeCode: 1002, reason: reason) }
    }

    /// The largest message accepted, in bytes of payload over all its fragments.
    public var messageLimit: Int

    private var buffer: [UInt8] = []
    private var offset = 0                        // where the unread part of `buffer` starts
    private var message: [UInt8] = []             // fragments of the message in progress
    private var messageOpcode: UInt8?             // 1 or 2 while a fragmented message is in progress
    private var violation: Violation?

    /// Bytes received and not yet returned as events (partial frames and unfinished messages).
    public var bufferedBytes: Int { buffer.count - offset + message.count }

    /// A reader of messages of at most `messageLimit` bytes.
    public init(messageLimit: Int) { self.messageLimit = messageLimit }

    /// Adds bytes as they came off the connection.
    public mutating func append(_ bytes: some Collection<UInt8>) {
        if offset > 0, offset == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            offset = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// The next complete event, nil if more bytes are needed.
    /// - Throws: `Violation`; from then on every call throws it.
    public mutating func next() throws(Violation) -> Event? {
        if let violation { throw violation }
        do {
            return try parse()
        } catch {
            violation = error
            buffer = []
            message = []
            offset = 0
            throw error
        }
    }

    private mutating func parse() throws(Violation) -> Event? {
        while true {
            let available = buffer.count - offset
            guard available >= 2 else { return nil }
            let first = buffer[offset], second = buffer[offset + 1]
            let final = first & 0x80 != 0, opcode = first & 0x0F
            guard first & 0x70 == 0 else {
                throw .protocolError("a frame with reserved bits set: no extension (compression included) is negotiated")
            }
            guard second & 0x80 != 0 else { throw .protocolError("client frames must be masked") }
            let isControl = opcode & 0x08 != 0
            switch opcode {
            case 0x0: guard messageOpcode != nil else { throw .protocolError("a continuation frame outside a fragmented message") }
            case 0x1, 0x2: guard messageOpcode == nil else { throw .protocolError("a new message inside a fragmented one") }
            case 0x8, 0x9, 0xA: guard final else { throw .protocolError("a fragmented control frame") }
            default: throw .protocolError("unknown opcode \(opcode)")
            }

            var length = Int(second & 0x7F)
            var headerLength = 2
            if length == 126 {
                guard available >= 4 else { return nil }
                length = Int(buffer[offset + 2]) << 8 | Int(buffer[offset + 3])
                headerLength = 4
                guard length >= 126 else { throw .protocolError("a frame length not in its shortest form") }
            } else if length == 127 {
                guard available >= 10 else { return nil }
                var long: UInt64 = 0
                for index in 2..<10 { long = long << 8 | UInt64(buffer[offset + index]) }
                guard long >> 63 == 0 else { throw .protocolError("a frame length with its top bit set") }
                guard long > 0xFFFF else { throw .protocolError("a frame length not in its shortest form") }
                length = Int(clamping: long)
                headerLength = 10
            }
            if isControl {
                guard length <= 125 else { throw .protocolError("a control frame of \(length) bytes (at most 125)") }
            } else if length > messageLimit - message.count {
                let announced = message.count.addingReportingOverflow(length)
                throw Violation(closeCode: 1009, reason: "a message of at least \(announced.overflow ? Int.max : announced.partialValue) bytes (the limit is \(messageLimit))",
                                announcedBytes: announced.overflow ? Int.max : announced.partialValue)
            }
            headerLength += 4 // the mask
            guard available >= headerLength + length else { return nil }

            let maskStart = offset + headerLength - 4
            let mask = (buffer[maskStart], buffer[maskStart + 1], buffer[maskStart + 2], buffer[maskStart + 3])
            let payloadStart = offset + headerLength
            offset = payloadStart + length
            var payload = Array(buffer[payloadStart..<offset])
            payload.withUnsafeMutableBufferPointer { bytes in
                for index in bytes.indices {
                    switch index & 3 {
                    case 0: bytes[index] ^= mask.0
                    case 1: bytes[index] ^= mask.1
                    case 2: bytes[index] ^= mask.2
                    default: bytes[index] ^= mask.3
                    }
                }
            }
            compact()

            switch opcode {
            case 0x8:
                guard payload.count != 1 else { throw .protocolError("a close frame with a one-byte payload") }
                guard payload.count < 2 || String(validating: payload[2...], as: UTF8.self) != nil else {
                    throw Violation(closeCode: 1007, reason: "a close reason that is not UTF-8")
                }
                return .close(code: payload.count >= 2 ? UInt16(payload[0]) << 8 | UInt16(payload[1]) : nil)
            case 0x9:
                return .ping(payload)
            case 0xA:
                return .pong
            default:
                break
            }
            let kind = opcode == 0 ? messageOpcode ?? 1 : opcode
            if !final {
                messageOpcode = kind
                message.append(contentsOf: payload)
                continue
            }
            var whole = payload
            if messageOpcode != nil {
                message.append(contentsOf: payload)
                whole = message
                message = []
                messageOpcode = nil
            }
            if kind == 0x2 { return .binary(whole) }
            guard String(validating: whole, as: UTF8.self) != nil else {
                throw Violation(closeCode: 1007, reason: "a text message that is not UTF-8")
            }
            return .text(whole)
        }
    }

    /// Drops what has been read once it is most of the buffer.
    private mutating func compact() {
        if offset == buffer.count {
            buffer.removeAll(keepingCapacity: buffer.capacity <= 1 << 17)
            offset = 0
        } else if offset > 1 << 16, offset * 2 > buffer.count {
            buffer.removeFirst(offset)
            offset = 0
        }
    }
}

/// Frames the room server sends (unmasked, RFC 6455 §5.2).
public enum WebSocketFrame {
    /// Opcodes the server sends.
    public static let text: UInt8 = 0x1, close: UInt8 = 0x8, pong: UInt8 = 0xA

    /// One final frame of `opcode` carrying `payload`.
    public static func encode(_ opcode: UInt8, _ payload: some Collection<UInt8>) -> [UInt8] {
        var frame: [UInt8] = [0x80 | opcode]
        let count = payload.count
        frame.reserveCapacity(count + 10)
        if count < 126 {
            frame.append(UInt8(count))
        } else if count <= 0xFFFF {
            frame += [126, UInt8(count >> 8), UInt8(count & 0xFF)]
        } else {
            frame.append(127)
            for shift in stride(from: 56, through: 0, by: -8) { frame.append(UInt8((UInt64(count) >> UInt64(shift)) & 0xFF)) }
        }
        frame.append(contentsOf: payload)
        return frame
    }

    /// A close frame with `code` and a reason (cut to fit a control frame's 125 bytes).
    public static func close(code: UInt16, reason: String = "") -> [UInt8] {
        var reasonBytes = Array(reason.utf8.prefix(123))
        while String(validating: reasonBytes, as: UTF8.self) == nil { reasonBytes.removeLast() }
        return encode(close, [UInt8(code >> 8), UInt8(code & 0xFF)] + reasonBytes)
    }
}
