import COpenSSL
import Foundation
import VeilCore

/// A connection's own DTLS certificate: a fresh ECDSA P-256 key and a self-signed certificate,
/// made for one `PeerConnection` and forgotten with it.
///
/// A peer sees the certificate's fingerprint in the session description and the certificate itself
/// in the DTLS handshake. GStreamer's DTLS elements otherwise make one RSA certificate per process
/// and use it for every connection, so two calls from one process, in different rooms under
/// different names, would show the same fingerprint. This one is shaped like a browser's (what
/// Chrome makes for each `RTCPeerConnection`): ECDSA P-256, common name "WebRTC", valid from a day
/// before it was made for 30 days, a random serial number. Making it takes well under a millisecond.
///
/// webrtcbin (1.22) computes the fingerprint it writes into descriptions over every base64 line of
/// the decoder's PEM, the private key's included, which gives a wrong one for a certificate given
/// with its key. `fingerprint` is the right one (SHA-256 of the certificate's DER, RFC 8122), and
/// the connection writes it into each description it sends (`describing(_:)`).
struct DTLSCertificate: Sendable {
    /// The certificate and its private key, PEM (what dtlssrtpdec's `pem` property takes).
    let pem: String
    /// `sha-256 XX:XX:…` of the certificate, as an `a=fingerprint:` attribute carries it.
    let fingerprint: String

    /// `sdp` with every `a=fingerprint:` attribute set to this certificate's.
    func describing(_ sdp: String) -> String {
        var lines = sdp.components(separatedBy: "\r\n")
        for index in lines.indices where lines[index].hasPrefix("a=fingerprint:") {
            lines[index] = "a=fingerprint:" + fingerprint
        }
        return lines.joined(separator: "\r\n")
    }

    /// A new certificate; nil when libcrypto fails (the connection then uses GStreamer's own).
    static func make() -> DTLSCertificate? {
        guard let context = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else { return nil }
        defer { EVP_PKEY_CTX_free(context) }
        var key: OpaquePointer?
        guard EVP_PKEY_keygen_init(context) == 1, EVP_PKEY_CTX_set_group_name(context, "P-256") == 1,
              EVP_PKEY_generate(context, &key) == 1, let key else { return nil }
        defer { EVP_PKEY_free(key) }
        guard let certificate = X509_new() else { return nil }
        defer { X509_free(certificate) }
        var serial = [UInt8](repeating: 0, count: 8)
        guard RAND_bytes(&serial, Int32(serial.count)) == 1 else { return nil }
        serial[0] &= 0x7F // positive
        let name = X509_get_subject_name(certificate)
        guard X509_set_version(certificate, 2) == 1,
              ASN1_INTEGER_set_uint64(X509_get_serialNumber(certificate), serial.reduce(0) { $0 << 8 | UInt64($1) }) == 1,
              X509_gmtime_adj(X509_getm_notBefore(certificate), -86_400) != nil,
              X509_gmtime_adj(X509_getm_notAfter(certificate), 30 * 86_400) != nil,
              X509_set_pubkey(certificate, key) == 1,
              X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, Array("WebRTC".utf8), -1, -1, 0) == 1,
              X509_set_issuer_name(certificate, name) == 1,
              X509_sign(certificate, key, EVP_sha256()) > 0,
              let bio = BIO_new(BIO_s_mem()) else { return nil }
        defer { BIO_free(bio) }
        guard PEM_write_bio_X509(bio, certificate) == 1,
              PEM_write_bio_PrivateKey(bio, key, nil, nil, 0, nil, nil) == 1 else { return nil }
        let size = Int(BIO_ctrl_pending(bio))
        var bytes = [UInt8](repeating: 0, count: size)
        guard size > 0, BIO_read(bio, &bytes, Int32(size)) == Int32(size) else { return nil }
        let length = i2d_X509(certificate, nil)
        guard length > 0 else { return nil }
        var der = [UInt8](repeating: 0, count: Int(length))
        let written = der.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var cursor = buffer.baseAddress
            return i2d_X509(certificate, &cursor)
        }
        guard written == length else { return nil }
        let digest = SHA256.hash(der).map { String(format: "%02X", $0) }
        return DTLSCertificate(pem: String(decoding: bytes, as: UTF8.self), fingerprint: "sha-256 " + digest.joined(separator: ":"))
    }
}
