import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The room server's signing secret (≥ 32 bytes). Its bytes never appear in descriptions, dumps or logs.
///
/// Where it comes from (`ServerSecret.load`): the environment variable `VEIL_SECRET` (hex or
/// base64), else a file (default `~/.config/veil/secret`, or `$XDG_CONFIG_HOME/veil/secret`) holding
/// hex text, which `veil serve` creates with mode 0600 on first start. A file that group or others
/// can read is refused.
public struct ServerSecret: Sendable, CustomStringConvertible, CustomReflectable {
    /// The fewest bytes a secret may have.
    public static let minimumSize = 32
    /// The environment variable that can hold the secret.
    public static let environmentVariable = "VEIL_SECRET"

    let bytes: [UInt8]

    /// A secret from raw bytes.
    /// - Throws: `VeilError.invalidInput` when shorter than 32 bytes.
    public init(bytes: [UInt8]) throws {
        guard bytes.count >= Self.minimumSize else {
            throw VeilError.invalidInput("the server secret has \(bytes.count) bytes; it needs at least \(Self.minimumSize) (e.g. `head -c 32 /dev/urandom | xxd -p -c 64`)")
        }
        self.bytes = bytes
    }

    /// A secret from text: hex (an even number of hex digits) or base64 (standard or URL alphabet).
    /// Surrounding whitespace is ignored.
    public init(text: String) throws {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        if let hex = Self.hexBytes(trimmed) {
            try self.init(bytes: hex)
        } else if let data = Data(base64Encoded: Self.standardBase64(trimmed)) {
            try self.init(bytes: [UInt8](data))
        } else {
            throw VeilError.invalidInput("the server secret must be hex or base64 text of at least \(Self.minimumSize) bytes")
        }
    }

    /// 32 fresh random bytes from the system's cryptographic generator (getrandom on Linux).
    public static func random() -> ServerSecret {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<minimumSize).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        return ServerSecret(unchecked: bytes)
    }

    private init(unchecked bytes: [UInt8]) { self.bytes = bytes }

    /// Says how long it is, never what it is.
    public var description: String { "ServerSecret(\(bytes.count) bytes)" }
    /// Hides the bytes from `dump` and debuggers' summaries.
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }

    /// The secret as lowercase hex text (what the secret file holds).
    public var hexText: String { bytes.map { String(format: "%02x", $0) }.joined() }

    // MARK: Sources

    /// Where a loaded secret came from.
    public enum Source: Equatable, Sendable, CustomStringConvertible {
        /// The environment variable `VEIL_SECRET`.
        case environment
        /// A file; `created` when this load made it.
        case file(URL, created: Bool)

        public var description: String {
            switch self {
            case .environment: "$\(ServerSecret.environmentVariable)"
            case let .file(url, created): created ? "\(url.path) (created)" : url.path
            }
        }
    }

    /// The default secret file: `$XDG_CONFIG_HOME/veil/secret`, else `~/.config/veil/secret`.
    public static func defaultFile(environment: [String: String] = ProcessInfo.processInfo.environment) -> URL {
        if let config = environment["XDG_CONFIG_HOME"], config.hasPrefix("/") {
            return URL(fileURLWithPath: config).appendingPathComponent("veil/secret")
        }
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
        return URL(fileURLWithPath: home).appendingPathComponent(".config/veil/secret")
    }

    /// Loads the secret: from `VEIL_SECRET` when set (non-empty), else from `file` (the default
    /// file when nil), which is created with 32 random bytes when absent and `createIfMissing`.
    /// - Throws: `VeilError` saying what is wrong with the variable or the file and how to fix it.
    public static func load(environment: [String: String] = ProcessInfo.processInfo.environment,
                            file: URL? = nil, createIfMissing: Bool) throws -> (secret: ServerSecret, source: Source) {
        if let text = environment[environmentVariable], !text.isEmpty {
            do { return (try ServerSecret(text: text), .environment) } catch let error as VeilError {
                throw VeilError.invalidInput("$\(environmentVariable): \(error.description)")
            }
        }
        let url = file ?? defaultFile(environment: environment)
        if FileManager.default.fileExists(atPath: url.path) || !createIfMissing {
            return (try read(from: url), .file(url, created: false))
        }
        do {
            return (try create(at: url), .file(url, created: true))
        } catch where FileManager.default.fileExists(atPath: url.path) {
            // Another process created it between our check and our create: use theirs.
            return (try read(from: url), .file(url, created: false))
        }
    }

    /// Reads a secret file, refusing one that is not a regular file or that group or others can access.
    public static func read(from url: URL) throws -> ServerSecret {
        let path = url.path
        guard FileManager.default.fileExists(atPath: path) else {
            throw VeilError.missingResource("server secret \(path): start `veil serve` once to create it, pass --secret-file, or set $\(environmentVariable)")
        }
        let attributes: [FileAttributeKey: Any]
        do { attributes = try FileManager.default.attributesOfItem(atPath: path) } catch {
            throw VeilError.io("cannot inspect the server secret \(path): \(error.localizedDescription)")
        }
        guard (attributes[.type] as? FileAttributeType) == .typeRegular else {
            throw VeilError.invalidResource("server secret \(path): not a regular file")
        }
        let mode = (attributes[.posixPermissions] as? NSNumber)?.intValue ?? 0o777
        guard mode & 0o077 == 0 else {
            throw VeilError.invalidResource("server secret \(path): group or others can access it (mode \(String(mode, radix: 8))); run `chmod 600 \(path)`")
        }
        let data: Data
        do { data = try Data(contentsOf: url) } catch {
            throw VeilError.io("cannot read the server secret \(path): \(error.localizedDescription)")
        }
        do { return try ServerSecret(text: String(decoding: data, as: UTF8.self)) } catch let error as VeilError {
            throw VeilError.invalidResource("server secret \(path): \(error.description)")
        }
    }

    /// Creates a secret file with 32 random bytes as hex text, mode 0600, in a directory made with
    /// mode 0700 if needed. Fails if the file exists.
    public static func create(at url: URL) throws -> ServerSecret {
        let directory = url.deletingLastPathComponent()
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        } catch {
            throw VeilError.io("cannot create \(directory.path) for the server secret: \(error.localizedDescription)")
        }
        let secret = random()
        // O_EXCL: never overwrite, never follow a planted symlink; 0600 from the first byte on.
        let fd = open(url.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            throw VeilError.io("cannot create the server secret \(url.path): \(String(cString: strerror(errno)))")
        }
        let handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
        do {
            try handle.write(contentsOf: Data((secret.hexText + "\n").utf8))
            try handle.close()
        } catch {
            try? FileManager.default.removeItem(at: url)
            throw VeilError.io("cannot write the server secret \(url.path): \(error.localizedDescription)")
        }
        return secret
    }

    private static func hexBytes(_ text: String) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard !digits.isEmpty, digits.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        for i in stride(from: 0, to: digits.count, by: 2) {
            guard let high = hexValue(digits[i]), let low = hexValue(digits[i + 1]) else { return nil }
            bytes.append(high << 4 | low)
        }
        return bytes
    }

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    private static func standardBase64(_ text: String) -> String {
        var s = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        if !s.hasSuffix("=") { s += String(repeating: "=", count: (4 - s.utf8.count % 4) % 4) }
        return s
    }
}
