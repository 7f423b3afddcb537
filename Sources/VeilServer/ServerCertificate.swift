internal import CGLib
internal import COpenSSL
internal import CSoup
import Foundation
import VeilCore
import VeilGLib

/// The room server's TLS identity: its certificate chain and private key, read from PEM files and
/// held as a GLib `GTlsCertificate`, which GLib's TLS backend (glib-networking) serves `https://`
/// and `wss://` with.
///
/// Everything that can be wrong with the files is found here, before the server listens: a file
/// missing or unreadable, not PEM, a key under a passphrase, a key that does not belong to the
/// certificate (GLib would take the pair and fail every handshake), or no TLS backend at all.
///
/// `@unchecked Sendable`: the `GTlsCertificate` is immutable once made, and GLib's TLS connections
/// share it across threads.
public final class ServerCertificate: @unchecked Sendable {
    /// The certificate (with the key), one reference of our own.
    let handle: UnsafeMutablePointer<GTlsCertificate>
    /// The certificate's subject, as OpenSSL prints it (`/CN=…`), for the log.
    public let subject: String
    /// When the certificate stops being valid.
    public let notAfter: Date?

    /// Reads `certificateFile` (PEM: the server's certificate, then any intermediates) and
    /// `keyFile` (PEM, unencrypted).
    /// - Throws: `VeilError.invalidInput` saying which file is wrong and how, or `VeilError.io`
    ///   when GLib has no TLS backend.
    public init(certificateFile: URL, keyFile: URL) throws {
        let certificatePath = certificateFile.path, keyPath = keyFile.path
        for (option, path) in [("--tls-cert", certificatePath), ("--tls-key", keyPath)] {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
                throw VeilError.invalidInput("\(option) \(path): no such file")
            }
            guard !isDirectory.boolValue else { throw VeilError.invalidInput("\(option) \(path) is a directory, not a PEM file") }
            guard FileManager.default.isReadableFile(atPath: path) else {
                throw VeilError.invalidInput("\(option) \(path): not readable by this user (check its permissions)")
            }
        }
        let (subject, notAfter) = try Self.checkPair(certificatePath: certificatePath, keyPath: keyPath)
        guard g_tls_backend_supports_tls(g_tls_backend_get_default()) != 0 else {
            throw VeilError.io("GLib has no TLS backend, so the server cannot speak TLS: install glib-networking (apt-get install glib-networking)")
        }
        var error: UnsafeMutablePointer<GError>?
        guard let certificate = g_tls_certificate_new_from_files(certificatePath, keyPath, &error) else {
            throw VeilError.invalidInput("--tls-cert \(certificatePath) with --tls-key \(keyPath): " + GLibError(consuming: error, what: "GLib's TLS backend refused them").message)
        }
        handle = certificate
        self.subject = subject
        self.notAfter = notAfter
    }

    deinit { g_object_unref(UnsafeMutableRawPointer(handle)) }

    /// Whether the certificate has expired at `date`.
    public func hasExpired(at date: Date = Date()) -> Bool { notAfter.map { $0 < date } ?? false }

    /// Reads both files with libcrypto and checks that the key is the certificate's; returns the
    /// certificate's subject and end of validity.
    private static func checkPair(certificatePath: String, keyPath: String) throws -> (String, Date?) {
        guard let certificateBIO = BIO_new_file(certificatePath, "r") else {
            throw VeilError.invalidInput("--tls-cert \(certificatePath): cannot be opened")
        }
        defer { BIO_free(certificateBIO) }
        guard let certificate = PEM_read_bio_X509(certificateBIO, nil, nil, nil) else {
            ERR_clear_error()
            throw VeilError.invalidInput("--tls-cert \(certificatePath): not a PEM certificate (expected -----BEGIN CERTIFICATE-----)")
        }
        defer { X509_free(certificate) }
        guard let keyBIO = BIO_new_file(keyPath, "r") else {
            throw VeilError.invalidInput("--tls-key \(keyPath): cannot be opened")
        }
        defer { BIO_free(keyBIO) }
        // A key under a passphrase would make OpenSSL ask on the terminal: refuse it instead.
        let noPassphrase: @convention(c) (UnsafeMutablePointer<CChar>?, Int32, Int32, UnsafeMutableRawPointer?) -> Int32 = { _, _, _, _ in -1 }
        guard let key = PEM_read_bio_PrivateKey(keyBIO, nil, noPassphrase, nil) else {
            ERR_clear_error()
            throw VeilError.invalidInput("--tls-key \(keyPath): not an unencrypted PEM private key (a key under a passphrase must be decrypted first: openssl pkey -in KEY -out PLAIN)")
        }
        defer { EVP_PKEY_free(key) }
        guard X509_check_private_key(certificate, key) == 1 else {
            ERR_clear_error()
            throw VeilError.invalidInput("--tls-key \(keyPath) does not belong to --tls-cert \(certificatePath): the key's public half is not the certificate's; give the key the certificate was issued for")
        }
        var subject = "?"
        if let name = X509_get_subject_name(certificate) {
            var buffer = [CChar](repeating: 0, count: 512)
            if X509_NAME_oneline(name, &buffer, Int32(buffer.count)) != nil { subject = String(cString: buffer) }
        }
        var notAfter: Date?
        if let end = X509_get0_notAfter(certificate) {
            var tm = tm()
            if ASN1_TIME_to_tm(end, &tm) == 1 { notAfter = Date(timeIntervalSince1970: TimeInterval(timegm(&tm))) }
        }
        return (subject, notAfter)
    }
}
