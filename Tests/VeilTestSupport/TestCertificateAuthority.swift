import Foundation
import XCTest

/// A certificate authority made for one test with `openssl` (OpenSSL 3.0, Debian 12), and the
/// server certificates it issues: valid ones for 127.0.0.1 and localhost, an expired one, one for
/// another host name, each with its own key (PEM files in `directory`). Also a self-signed
/// certificate for a test that needs no authority, and the key pin Chromium takes.
public struct TestCertificateAuthority {
    public let directory: URL
    /// The authority's certificate, for `--ca-file`.
    public var certificate: URL { directory.appendingPathComponent("ca.pem") }

    /// A server certificate and its key.
    public struct Issued {
        public let certificate: URL
        public let key: URL
    }

    /// Makes the authority (an EC P-256 key and a self-signed certificate) in `directory`.
    public init(in directory: URL) throws {
        self.directory = directory.appendingPathComponent("ca")
        try FileManager.default.createDirectory(at: self.directory.appendingPathComponent("issued"), withIntermediateDirectories: true)
        try Data().write(to: self.directory.appendingPathComponent("index.txt"))
        try Data("01\n".utf8).write(to: self.directory.appendingPathComponent("serial"))
        try Data(Self.configuration.utf8).write(to: self.directory.appendingPathComponent("ca.cnf"))
        try Self.openssl(in: self.directory, ["req", "-x509", "-config", "ca.cnf", "-extensions", "ca_ext", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                     "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2"])
    }

    /// A certificate for `name`, with the subject alternative names of `extensions` (a section of
    /// the configuration below), valid from `start` to `end` (openssl's YYYYMMDDHHMMSSZ), or for
    /// two days from now.
    public func issue(_ name: String, extensions: String = "server_ext", start: String? = nil, end: String? = nil) throws -> Issued {
        try Self.openssl(in: directory, ["req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                     "-keyout", "\(name).key", "-out", "\(name).csr", "-subj", "/CN=\(name)"])
        var arguments = ["ca", "-batch", "-config", "ca.cnf", "-extensions", extensions, "-notext", "-in", "\(name).csr", "-out", "\(name).pem"]
        if let start { arguments += ["-startdate", start] }
        if let end { arguments += ["-enddate", end] }
        try Self.openssl(in: directory, arguments)
        return Issued(certificate: directory.appendingPathComponent("\(name).pem"), key: directory.appendingPathComponent("\(name).key"))
    }

    /// For 127.0.0.1 and localhost, valid now.
    public func server() throws -> Issued { try issue("server") }
    /// For 127.0.0.1 and localhost, valid during January 2020 only.
    public func expired() throws -> Issued { try issue("expired", start: "20200101000000Z", end: "20200201000000Z") }
    /// For veil.example.org only, valid now.
    public func wrongHost() throws -> Issued { try issue("wronghost", extensions: "wrong_host_ext") }

    /// A self-signed certificate for `commonName` with `subjectAltName` (openssl's syntax, e.g.
    /// "IP:127.0.0.1,DNS:localhost"), valid for two days: its own authority. Written to
    /// `server.pem` and `server.key` in `directory`.
    public static func selfSigned(in directory: URL, commonName: String, subjectAltName: String) throws -> Issued {
        let issued = Issued(certificate: directory.appendingPathComponent("server.pem"), key: directory.appendingPathComponent("server.key"))
        try openssl(in: directory, ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
                                    "-keyout", issued.key.path, "-out", issued.certificate.path, "-subj", "/CN=\(commonName)",
                                    "-addext", "subjectAltName=\(subjectAltName)"])
        return issued
    }

    /// The base64 SHA-256 of `key`'s public key (SubjectPublicKeyInfo, DER): what Chromium's
    /// `--ignore-certificate-errors-spki-list` takes.
    public static func publicKeyPin(of key: URL) throws -> String {
        let directory = key.deletingLastPathComponent()
        let der = directory.appendingPathComponent(key.lastPathComponent + ".spki.der")
        try openssl(in: directory, ["pkey", "-in", key.path, "-pubout", "-outform", "DER", "-out", der.path])
        return try openssl(in: directory, ["dgst", "-sha256", "-binary", der.path]).base64EncodedString()
    }

    /// Runs `openssl arguments` in `directory`; returns its standard output. Skips the test when
    /// openssl is not installed (scripts/bootstrap installs it); throws when it fails.
    @discardableResult
    private static func openssl(in directory: URL, _ arguments: [String]) throws -> Data {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/openssl") else {
            throw XCTSkip("openssl is not installed (scripts/bootstrap installs it)")
        }
        let process = Process(), out = Pipe(), err = Pipe()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = arguments
        process.currentDirectoryURL = directory
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let output = out.fileHandleForReading.readDataToEndOfFile()
        let message = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw NSError(domain: "openssl", code: Int(process.terminationStatus),
                          userInfo: [NSLocalizedDescriptionKey: "openssl \(arguments.joined(separator: " ")): \(message)"])
        }
        return output
    }

    /// `openssl req` and `openssl ca` settings: the authority, and the extensions it issues with.
    private static let configuration = """
    [ca]
    default_ca = test_ca
    [test_ca]
    dir = .
    database = ./index.txt
    new_certs_dir = ./issued
    serial = ./serial
    certificate = ./ca.pem
    private_key = ./ca.key
    default_md = sha256
    default_days = 2
    policy = any_name
    unique_subject = no
    [any_name]
    commonName = supplied
    [req]
    distinguished_name = dn
    prompt = no
    [dn]
    CN = Veil Test CA
    [ca_ext]
    basicConstraints = critical, CA:TRUE
    keyUsage = critical, keyCertSign, cRLSign
    subjectKeyIdentifier = hash
    [server_ext]
    basicConstraints = critical, CA:FALSE
    keyUsage = critical, digitalSignature
    extendedKeyUsage = serverAuth
    subjectAltName = IP:127.0.0.1, DNS:localhost
    [wrong_host_ext]
    basicConstraints = critical, CA:FALSE
    keyUsage = critical, digitalSignature
    extendedKeyUsage = serverAuth
    subjectAltName = DNS:veil.example.org
    """
}
