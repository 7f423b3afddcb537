import CGStreamer
import CSoup
import Foundation
import VeilCore
import VeilGLib

/// Whom a call trusts to vouch for a `wss://` room server's certificate: the system's trust store
/// (Debian's ca-certificates, through GLib's TLS backend), or the certificate authorities of one
/// PEM file instead (`veil call --ca-file`), for a server whose certificate a private authority
/// issued. Plain `ws://` ignores it.
public struct ServerTrust: Sendable, Equatable {
    /// The PEM file of trusted authorities, or nil for the system's trust store.
    public let certificateAuthorities: URL?

    /// The system's trust store.
    public static let system = ServerTrust(checked: nil)

    private init(checked file: URL?) { certificateAuthorities = file }

    /// Trusts the authorities in `file` (PEM certificates), and no others.
    /// - Throws: `VeilError.invalidInput` when the file is missing, unreadable or holds no
    ///   certificate GLib can read.
    public init(certificateAuthorities file: URL) throws {
        guard FileManager.default.isReadableFile(atPath: file.path) else {
            throw VeilError.invalidInput("--ca-file \(file.path): no such file, or not readable")
        }
        let database = try Self.database(file)
        g_object_unref(UnsafeMutableRawPointer(database))
        certificateAuthorities = file
    }

    /// A new GLib certificate database of `file`'s authorities (the caller unrefs it).
    static func database(_ file: URL) throws -> UnsafeMutablePointer<GTlsDatabase> {
        var error: UnsafeMutablePointer<GError>?
        guard let database = g_tls_file_database_new(file.path, &error) else {
            throw VeilError.invalidInput("--ca-file \(file.path): " + GLibError(consuming: error, what: "not a PEM file of certificates").message)
        }
        return UnsafeMutableRawPointer(database).assumingMemoryBound(to: GTlsDatabase.self)
    }
}

/// A `wss://` server's certificate that the call refused, and why: GLib's verdict
/// (`GTlsCertificateFlags`) in words.
public struct ServerCertificateError: Error, CustomStringConvertible, Sendable, Equatable {
    /// What is wrong with the certificate (GLib names at least one problem, not always all).
    public struct Problems: OptionSet, Sendable, Hashable {
        public let rawValue: UInt32
        public init(rawValue: UInt32) { self.rawValue = rawValue }
        /// No trusted authority signed it (`G_TLS_CERTIFICATE_UNKNOWN_CA`).
        public static let unknownAuthority = Problems(rawValue: 1 << 0)
        /// It does not name the host connected to (`G_TLS_CERTIFICATE_BAD_IDENTITY`).
        public static let wrongHostName = Problems(rawValue: 1 << 1)
        /// Its validity has not begun (`G_TLS_CERTIFICATE_NOT_ACTIVATED`).
        public static let notYetValid = Problems(rawValue: 1 << 2)
        /// Its validity has ended (`G_TLS_CERTIFICATE_EXPIRED`).
        public static let expired = Problems(rawValue: 1 << 3)
        /// Its authority revoked it (`G_TLS_CERTIFICATE_REVOKED`).
        public static let revoked = Problems(rawValue: 1 << 4)
        /// It uses an algorithm considered insecure (`G_TLS_CERTIFICATE_INSECURE`).
        public static let insecure = Problems(rawValue: 1 << 5)
        /// Something else (`G_TLS_CERTIFICATE_GENERIC_ERROR`).
        public static let other = Problems(rawValue: 1 << 6)
    }

    /// The server's URL.
    public var server: URL
    /// What was wrong.
    public var problems: Problems
    /// When the certificate stops (or stopped) being valid, if GLib said.
    public var notAfter: Date?
    /// When it starts being valid, if GLib said.
    public var notBefore: Date?

    public init(server: URL, problems: Problems, notBefore: Date? = nil, notAfter: Date? = nil) {
        self.server = server; self.problems = problems; self.notBefore = notBefore; self.notAfter = notAfter
    }

    /// Each problem, worded for the person running the call.
    public var reasons: [String] {
        let host = server.host ?? "the server"
        let day = ISO8601DateFormatter()
        var reasons: [String] = []
        if problems.contains(.unknownAuthority) {
            reasons.append("unknown authority: no certificate authority this machine trusts signed it (if you trust the server, give its authority's certificate with --ca-file FILE)")
        }
        if problems.contains(.expired) {
            reasons.append("expired: it was valid until \(notAfter.map { day.string(from: $0) } ?? "a date now past"); the server's operator must renew it")
        }
        if problems.contains(.notYetValid) {
            reasons.append("not yet valid: it is valid from \(notBefore.map { day.string(from: $0) } ?? "a later date") (check this machine's clock)")
        }
        if problems.contains(.wrongHostName) {
            reasons.append("wrong host name: it is not issued for \(host); connect with a name the certificate holds")
        }
        if problems.contains(.revoked) { reasons.append("revoked by its authority") }
        if problems.contains(.insecure) { reasons.append("insecure: it is signed with an algorithm no longer trusted") }
        if problems.contains(.other) || reasons.isEmpty { reasons.append("it could not be verified") }
        return reasons
    }

    public var description: String {
        "refused the TLS certificate of \(server.absoluteString): " + reasons.joined(separator: "; ")
    }
}
