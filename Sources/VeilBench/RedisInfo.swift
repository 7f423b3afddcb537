import Foundation
import VeilCore
#if canImport(Glibc)
import Glibc
#endif

/// What Redis's `INFO all` said at one moment: its `field:value` lines, and its command
/// statistics (`cmdstat_NAME:calls=…,usec=…`), which count the commands Lua scripts run too.
struct RedisInfo: Equatable {
    /// One command's totals since Redis started.
    struct Command: Equatable {
        var calls: Int
        var microseconds: Int
    }

    var fields: [String: String] = [:]
    /// By lower-case command name (`evalsha`, `publish`, `hset`, …).
    var commands: [String: Command] = [:]

    /// Reads `INFO`'s text: sections (`# Name`), `field:value` lines, CRLF or LF.
    init(parsing text: String) {
        for raw in text.split(whereSeparator: \.isNewline) {
            let line = raw.trimmingCharacters(in: .whitespaces)
            guard !line.isEmpty, !line.hasPrefix("#"), let colon = line.firstIndex(of: ":") else { continue }
            let name = String(line[..<colon]), value = String(line[line.index(after: colon)...])
            if name.hasPrefix("cmdstat_") {
                var calls: Int?, microseconds: Int?
                for pair in value.split(separator: ",") {
                    let parts = pair.split(separator: "=", maxSplits: 1)
                    guard parts.count == 2 else { continue }
                    if parts[0] == "calls" { calls = Int(parts[1]) }
                    if parts[0] == "usec" { microseconds = Int(parts[1]) }
                }
                if let calls, let microseconds {
                    commands[String(name.dropFirst("cmdstat_".count)).lowercased()] = Command(calls: calls, microseconds: microseconds)
                }
            } else {
                fields[name] = value
            }
        }
    }

    /// Commands Redis processed since it started (`total_commands_processed`).
    var totalCommands: Int { fields["total_commands_processed"].flatMap { Int($0) } ?? 0 }
    /// CPU seconds Redis used since it started: `used_cpu_user` + `used_cpu_sys` (its main thread and the others).
    var cpuSeconds: Double {
        ["used_cpu_user", "used_cpu_sys"].compactMap { fields[$0].flatMap { Double($0) } }.reduce(0, +)
    }
    /// `used_memory_rss` (what the kernel says Redis holds) and `used_memory` (what its allocator handed out), bytes.
    var residentBytes: Int { fields["used_memory_rss"].flatMap { Int($0) } ?? 0 }
    var usedMemoryBytes: Int { fields["used_memory"].flatMap { Int($0) } ?? 0 }
    /// Clients connected now.
    var connectedClients: Int { fields["connected_clients"].flatMap { Int($0) } ?? 0 }

    /// `INFO all` from the Redis on 127.0.0.1:`port`, over a plain socket (3 s timeout).
    static func read(port: Int) throws -> RedisInfo {
        let request = "*2\r\n$4\r\nINFO\r\n$3\r\nall\r\n"
        return RedisInfo(parsing: try bulkString(port: port, request: request))
    }

    /// Sends one RESP `request` and reads its bulk-string reply (`$LENGTH\r\n…\r\n`).
    private static func bulkString(port: Int, request: String) throws -> String {
        let connection: LoopbackConnection
        do { connection = try LoopbackConnection(port: port) } catch { throw VeilError.io("Redis: \(error)") }
        try connection.send(request)
        var reply: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16384)
        while reply.count < 1 << 22 {
            // Complete once the header's length of bytes and the final CRLF are in.
            if let end = reply.firstIndex(of: UInt8(ascii: "\n")) {
                let header = String(decoding: reply[..<end], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
                guard header.hasPrefix("$"), let length = Int(header.dropFirst()), length >= 0 else {
                    throw VeilError.io("Redis on 127.0.0.1:\(port) answered \(header.prefix(200))")
                }
                let start = end + 1
                if reply.count >= start + length + 2 { return String(decoding: reply[start..<(start + length)], as: UTF8.self) }
            }
            let count = connection.receive(into: &buffer)
            guard count > 0 else {
                throw VeilError.io("Redis on 127.0.0.1:\(port) did not finish its answer within \(connection.timeoutSeconds) s")
            }
            reply.append(contentsOf: buffer[0..<count])
        }
        throw VeilError.io("Redis on 127.0.0.1:\(port) answered more than 4 MiB")
    }
}
