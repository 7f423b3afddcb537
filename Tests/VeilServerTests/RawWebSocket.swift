import Foundation
import VeilCore
#if canImport(Glibc)
import Glibc
#endif

/// A bare TCP client of the room server for hostile tests: it speaks just enough WebSocket to get
/// through the handshake and send frames, and reads only when told to, so it can be a client that
/// never reads, or one that never finishes its request.
final class RawWebSocket {
    struct Failure: Error, CustomStringConvertible { let description: String }

    let fd: Int32
    private var closed = false

    /// A blocking TCP connection to 127.0.0.1:`port`; `receiveBuffer` shrinks the socket's receive
    /// buffer (before connecting, so the window is small from the start).
    init(port: Int, receiveBuffer: Int32? = nil) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: \(String(cString: strerror(errno)))") }
        if var size = receiveBuffer {
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(truncatingIfNeeded: port).bigEndian)
        address.sin_addr.s_addr = in_addr_t(UInt32(0x7F00_0001).bigEndian)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else {
            let reason = String(cString: strerror(errno))
            Glibc.close(fd)
            throw Failure(description: "connect: \(reason)")
        }
    }

    deinit { close() }

    func close() {
        guard !closed else { return }
        closed = true
        Glibc.close(fd)
    }

    /// Opens a WebSocket on `port`: sends the upgrade request (with `headers`, each ending in CRLF)
    /// and reads exactly the 101 answer, kept in `handshakeAnswer`.
    static func open(port: Int, receiveBuffer: Int32? = nil, headers: String = "") throws -> RawWebSocket {
        let socket = try RawWebSocket(port: port, receiveBuffer: receiveBuffer)
        try socket.write(Array(("GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\(headers)\r\n").utf8))
        var answer: [UInt8] = []
        var byte: UInt8 = 0
        while !answer.ends(with: Array("\r\n\r\n".utf8)) {
            guard recv(socket.fd, &byte, 1, 0) == 1 else { throw Failure(description: "no handshake answer: \(String(decoding: answer, as: UTF8.self))") }
            answer.append(byte)
        }
        guard String(decoding: answer, as: UTF8.self).hasPrefix("HTTP/1.1 101") else {
            throw Failure(description: "not upgraded: \(String(decoding: answer, as: UTF8.self))")
        }
        socket.handshakeAnswer = String(decoding: answer, as: UTF8.self)
        return socket
    }

    /// The server's answer to the upgrade request (status line and headers).
    private(set) var handshakeAnswer = ""

    /// How the connection ended, seen from the client.
    enum End: Equatable {
        /// The server's end of stream (an orderly shutdown: everything it sent was delivered).
        case endOfStream
        /// A reset, or another failed read.
        case failed(Int32)
        /// Still open when the time ran out.
        case open
    }

    /// Reads the server's frames until its close frame, the end of the connection or `timeout`:
    /// the text messages received and the close code (nil if no close frame came).
    func readUntilClose(timeout: TimeInterval) -> (texts: [String], closeCode: UInt16?) {
        let read = read(timeout: timeout, pastClose: false)
        return (read.texts, read.closeCode)
    }

    /// Reads everything the server sends until the connection ends or `timeout`: the text
    /// messages, the close code (nil if no close frame came) and how the connection ended.
    func readUntilEnd(timeout: TimeInterval) -> (texts: [String], closeCode: UInt16?, end: End) {
        read(timeout: timeout, pastClose: true)
    }

    private func read(timeout: TimeInterval, pastClose: Bool) -> (texts: [String], closeCode: UInt16?, end: End) {
        var pending: [UInt8] = []
        var texts: [String] = []
        var closeCode: UInt16?
        var buffer = [UInt8](repeating: 0, count: 65536)
        let deadline = Date().addingTimeInterval(timeout)
        while deadline.timeIntervalSinceNow > 0 {
            // Whole frames first (server frames are unmasked).
            while pending.count >= 2 {
                var length = Int(pending[1] & 0x7F), header = 2
                if length == 126, pending.count >= 4 { length = Int(pending[2]) << 8 | Int(pending[3]); header = 4 }
                else if length == 127, pending.count >= 10 { length = pending[2..<10].reduce(0) { $0 << 8 | Int($1) }; header = 10 }
                else if length >= 126 { break }
                guard pending.count >= header + length else { break }
                let opcode = pending[0] & 0x0F, payload = Array(pending[header..<header + length])
                pending.removeFirst(header + length)
                if opcode == 1 { texts.append(String(decoding: payload, as: UTF8.self)) }
                if opcode == 8 {
                    closeCode = payload.count >= 2 ? UInt16(payload[0]) << 8 | UInt16(payload[1]) : 1005
                    if !pastClose { return (texts, closeCode, .open) }
                }
            }
            var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&entry, 1, Int32(max(1, deadline.timeIntervalSinceNow * 1000))) == 1 else { continue }
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count == 0 { return (texts, closeCode, .endOfStream) }
            if count < 0 { if errno == EAGAIN || errno == EINTR { continue } else { return (texts, closeCode, .failed(errno)) } }
            pending += buffer[0..<count]
        }
        return (texts, closeCode, .open)
    }

    /// Writes everything (blocking); false if the connection is gone.
    @discardableResult
    func write(_ bytes: [UInt8]) throws -> Bool {
        var offset = 0
        while offset < bytes.count {
            let count = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if count < 0 {
                if errno == EINTR { continue }
                if errno == EPIPE || errno == ECONNRESET { return false }
                throw Failure(description: "send: \(String(cString: strerror(errno)))")
            }
            offset += count
        }
        return true
    }

    /// A masked client frame (RFC 6455 §5.2): `opcode` 1 text, 9 ping; `final` false for a fragment
    /// that more will follow; `reserved` the RSV bits (0x40 marks a compressed frame).
    static func frame(_ payload: [UInt8], opcode: UInt8 = 1, final: Bool = true, reserved: UInt8 = 0) -> [UInt8] {
        var out: [UInt8] = [(final ? 0x80 : 0) | reserved | opcode]
        if payload.count < 126 {
            out.append(0x80 | UInt8(payload.count))
        } else if payload.count < 65536 {
            out += [0x80 | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        } else {
            out.append(0x80 | 127)
            out += (0..<8).reversed().map { UInt8((UInt64(payload.count) >> (8 * UInt64($0))) & 0xFF) }
        }
        let mask: [UInt8] = [0x12, 0x34, 0x56, 0x78]
        out += mask
        out += payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }
        return out
    }

    @discardableResult
    func send(_ message: ClientMessage) throws -> Bool { try write(Self.frame(Array(SignalingMessage.encode(message).utf8))) }

    /// Reads and discards until the server closes (true) or `timeout` passes (false).
    func drainUntilClosed(timeout: TimeInterval) -> Bool {
        var buffer = [UInt8](repeating: 0, count: 65536)
        let deadline = Date().addingTimeInterval(timeout)
        while deadline.timeIntervalSinceNow > 0 {
            var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&entry, 1, Int32(deadline.timeIntervalSinceNow * 1000) + 1) == 1 else { continue }
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count == 0 { return true }
            if count < 0 { if errno == EAGAIN || errno == EINTR { continue } else { return true } }
        }
        return false
    }
}

private extension Array where Element == UInt8 {
    func ends(with suffix: [UInt8]) -> Bool { count >= suffix.count && Array(self[(count - suffix.count)...]) == suffix }
}

/// This process's resident memory (VmRSS, KiB) and open descriptors, from /proc.
enum ProcessFootprint {
    static var residentKiB: Int {
        let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
    }

    /// CPU seconds (user + system) used so far by this process's threads named `name` (e.g. the
    /// room server's loop thread, "veil-server").
    static func cpuSeconds(ofThreadsNamed name: String) -> Double {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        var ticks = 0
        for task in tasks {
            let comm = (try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
            guard comm == name, let stat = try? String(contentsOfFile: "/proc/self/task/\(task)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { continue }
            // Fields after "(comm)": state is field 3, utime 14, stime 15.
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            if fields.count > 12 { ticks += (Int(fields[11]) ?? 0) + (Int(fields[12]) ?? 0) }
        }
        return Double(ticks) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    static var openFiles: Int { (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? 0 }
}
