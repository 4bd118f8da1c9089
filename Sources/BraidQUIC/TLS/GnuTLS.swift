import CBraid

/// TLS 1.3 only, QUIC-compatible (no middlebox compatibility mode), AEADs QUIC defines.
let quicPriority =
    "%DISABLE_TLS13_COMPAT_MODE:NORMAL:-VERS-ALL:+VERS-TLS1.3:-CIPHER-ALL:+AES-128-GCM:+AES-256-GCM:+CHACHA20-POLY1305:+AES-128-CCM:-GROUP-ALL:+GROUP-X25519:+GROUP-SECP256R1:+GROUP-SECP384R1:+GROUP-SECP521R1"

func gnutlsErrorString(_ code: Int32) -> String {
    String(cString: gnutls_strerror(code))
}

func ngtcp2ErrorName(_ code: Int32) -> String {
    String(cString: ngtcp2_strerror(code))
}

/// Owns a `gnutls_certificate_credentials_t`. Credentials are immutable once built and GnuTLS
/// documents them as shareable between sessions on any thread, hence `@unchecked Sendable`.
final class TLSCredentials: @unchecked Sendable {
    let handle: gnutls_certificate_credentials_t

    private init() throws {
        var handle: gnutls_certificate_credentials_t?
        let rc = gnutls_certificate_allocate_credentials(&handle)
        guard rc == 0, let handle else { throw QUICError.tls("cannot allocate credentials: \(gnutlsErrorString(rc))") }
        self.handle = handle
    }

    deinit { gnutls_certificate_free_credentials(handle) }

    /// Client credentials: the trust roots to verify servers against, plus an optional identity.
    static func client(trust: QUICTrustRoots, certificateChainFile: String?, privateKeyFile: String?) throws -> TLSCredentials {
        let credentials = try TLSCredentials()
        switch trust {
        case .system:
            let rc = gnutls_certificate_set_x509_system_trust(credentials.handle)
            if rc < 0 { throw QUICError.configuration("cannot load the system trust store: \(gnutlsErrorString(rc))") }
        case .certificateAuthorityFile(let path):
            let rc = gnutls_certificate_set_x509_trust_file(credentials.handle, path, GNUTLS_X509_FMT_PEM)
            if rc < 0 { throw QUICError.configuration("cannot read CA file \(path): \(gnutlsErrorString(rc))") }
            if rc == 0 { throw QUICError.configuration("CA file \(path) contains no PEM certificate") }
        }
        if let certificateChainFile, let privateKeyFile {
            try credentials.loadIdentity(certificateChainFile: certificateChainFile, privateKeyFile: privateKeyFile)
        }
        return credentials
    }

    /// Server credentials: certificate chain and key from PEM files.
    static func server(certificateChainFile: String, privateKeyFile: String) throws -> TLSCredentials {
        let credentials = try TLSCredentials()
        try credentials.loadIdentity(certificateChainFile: certificateChainFile, privateKeyFile: privateKeyFile)
        return credentials
    }

    private func loadIdentity(certificateChainFile: String, privateKeyFile: String) throws {
        let rc = gnutls_certificate_set_x509_key_file(handle, certificateChainFile, privateKeyFile, GNUTLS_X509_FMT_PEM)
        if rc < 0 {
            throw QUICError.configuration(
                "cannot load certificate \(certificateChainFile) with key \(privateKeyFile): \(gnutlsErrorString(rc))")
        }
    }
}

/// Builds the ALPN datum list GnuTLS wants and calls `body` while the bytes are alive.
func withALPNDatums<R>(_ protocols: [String], _ body: (UnsafePointer<gnutls_datum_t>, Int) -> R) -> R {
    let encoded = protocols.map { Array($0.utf8) }
    let buffers = encoded.map { bytes -> UnsafeMutablePointer<UInt8> in
        let p = UnsafeMutablePointer<UInt8>.allocate(capacity: max(bytes.count, 1))
        p.initialize(from: bytes, count: bytes.count)
        return p
    }
    defer { buffers.forEach { $0.deallocate() } }
    let datums = zip(buffers, encoded).map { gnutls_datum_t(data: $0, size: UInt32($1.count)) }
    return datums.withUnsafeBufferPointer { body($0.baseAddress!, $0.count) }
}

/// The negotiated ALPN, if any.
func negotiatedALPN(_ session: gnutls_session_t) -> String? {
    var datum = gnutls_datum_t()
    guard gnutls_alpn_get_selected_protocol(session, &datum) == 0, let data = datum.data else { return nil }
    return String(decoding: UnsafeBufferPointer(start: data, count: Int(datum.size)), as: UTF8.self)
}

/// SHA-256 of the DER SubjectPublicKeyInfo of a DER certificate.
func spkiSHA256(ofCertificateDER der: gnutls_datum_t) -> [UInt8]? {
    var der = der
    var cert: gnutls_x509_crt_t?
    guard gnutls_x509_crt_init(&cert) == 0, let cert else { return nil }
    defer { gnutls_x509_crt_deinit(cert) }
    guard gnutls_x509_crt_import(cert, &der, GNUTLS_X509_FMT_DER) == 0 else { return nil }
    var key: gnutls_pubkey_t?
    guard gnutls_pubkey_init(&key) == 0, let key else { return nil }
    defer { gnutls_pubkey_deinit(key) }
    guard gnutls_pubkey_import_x509(key, cert, 0) == 0 else { return nil }
    var spki = gnutls_datum_t()
    guard gnutls_pubkey_export2(key, GNUTLS_X509_FMT_DER, &spki) == 0 else { return nil }
    defer { braid_gnutls_free(spki.data) }
    var digest = [UInt8](repeating: 0, count: 32)
    guard gnutls_hash_fast(GNUTLS_DIG_SHA256, spki.data, Int(spki.size), &digest) == 0 else { return nil }
    return digest
}

/// SHA-256 SPKI pin of the first certificate in a PEM file (for configuring pins).
public func spkiSHA256Pin(ofPEMCertificateFile path: String) throws -> [UInt8] {
    var datum = gnutls_datum_t()
    let rc = gnutls_load_file(path, &datum)
    guard rc == 0 else { throw QUICError.configuration("cannot read \(path): \(gnutlsErrorString(rc))") }
    defer { braid_gnutls_free(datum.data) }
    var cert: gnutls_x509_crt_t?
    guard gnutls_x509_crt_init(&cert) == 0, let cert else { throw QUICError.configuration("out of memory") }
    defer { gnutls_x509_crt_deinit(cert) }
    guard gnutls_x509_crt_import(cert, &datum, GNUTLS_X509_FMT_PEM) == 0 else {
        throw QUICError.configuration("\(path) holds no PEM certificate")
    }
    var der = gnutls_datum_t()
    guard gnutls_x509_crt_export2(cert, GNUTLS_X509_FMT_DER, &der) == 0 else { throw QUICError.configuration("cannot export \(path)") }
    defer { braid_gnutls_free(der.data) }
    guard let pin = spkiSHA256(ofCertificateDER: der) else { throw QUICError.configuration("cannot hash the key of \(path)") }
    return pin
}

/// Maps a failed `gnutls_certificate_verify_peers3` status to a problem users understand.
func certificateProblem(fromStatus status: UInt32, hostname: String) -> CertificateProblem {
    let has = { (flag: gnutls_certificate_status_t) in status & flag.rawValue != 0 }
    if has(GNUTLS_CERT_SIGNER_NOT_FOUND) || has(GNUTLS_CERT_SIGNER_NOT_CA) { return .untrusted }
    if has(GNUTLS_CERT_EXPIRED) || has(GNUTLS_CERT_NOT_ACTIVATED) { return .expired }
    if has(GNUTLS_CERT_UNEXPECTED_OWNER) { return .nameMismatch(expected: hostname) }
    if has(GNUTLS_CERT_REVOKED) { return .invalid("revoked") }
    if has(GNUTLS_CERT_INSECURE_ALGORITHM) { return .invalid("insecure signature algorithm") }
    if has(GNUTLS_CERT_SIGNATURE_FAILURE) { return .invalid("bad signature") }
    return .invalid("verification status 0x\(String(status, radix: 16))")
}

/// Whether `host` is an IP literal (no SNI is sent for those, RFC 6066 §3).
func isIPLiteral(_ host: String) -> Bool {
    QUICAddress(ip: host, port: 0) != nil
}
