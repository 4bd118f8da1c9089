import BraidCore
import CBraid

/// The one certificate check every Braid TLS session runs (QUIC and TLS over TCP): the chain
/// against the session's trust roots and, when `hostname` is given, the name (unless the
/// verification skips both), then the SPKI pins. Nil means accepted.
package func verifyPeerCertificate(
    of session: gnutls_session_t, verification: TLSCertificateVerification, hostname: String?
) -> CertificateProblem? {
    var count: UInt32 = 0
    guard let chain = gnutls_certificate_get_peers(session, &count), count > 0 else { return .missing }
    if !verification.insecureSkipChainAndHostnameVerification {
        var status: UInt32 = 0
        let rc = gnutls_certificate_verify_peers3(session, hostname, &status)
        if rc < 0 { return .invalid(gnutlsErrorString(rc)) }
        if status != 0 { return certificateProblem(fromStatus: status, hostname: hostname ?? "") }
    }
    if !verification.pinnedSPKISHA256.isEmpty {
        guard let pin = spkiSHA256(ofCertificateDER: chain.pointee), verification.pinnedSPKISHA256.contains(pin)
        else { return .pinMismatch }
    }
    return nil
}

/// A server's check of its client (TLS and DTLS alike): a presented certificate against the
/// client CAs (no name; chain unchecked without them), its absence refused only when
/// authentication is required. Nil means accepted.
package func verifyClientCertificate(of session: gnutls_session_t, configuration: TLSServerConfiguration) -> CertificateProblem? {
    var count: UInt32 = 0
    if gnutls_certificate_get_peers(session, &count) == nil || count == 0 {
        return configuration.peerAuthentication == .required ? .missing : nil
    }
    // The caller judges the chain after the handshake (`.peerAwaitingVerdict`).
    if configuration.callerVerifiesPeer { return nil }
    var verification = TLSCertificateVerification()
    if let file = configuration.clientCertificateAuthorityFile {
        verification.trustRoots = .certificateAuthorityFile(file)
    } else {
        verification.insecureSkipChainAndHostnameVerification = true
    }
    return verifyPeerCertificate(of: session, verification: verification, hostname: nil)
}

/// SHA-256 of the DER SubjectPublicKeyInfo of a DER certificate.
package func spkiSHA256(ofCertificateDER der: gnutls_datum_t) -> [UInt8]? {
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
    guard rc == 0 else { throw TLSError.configuration("cannot read \(path): \(gnutlsErrorString(rc))") }
    defer { braid_gnutls_free(datum.data) }
    var cert: gnutls_x509_crt_t?
    guard gnutls_x509_crt_init(&cert) == 0, let cert else { throw TLSError.configuration("out of memory") }
    defer { gnutls_x509_crt_deinit(cert) }
    guard gnutls_x509_crt_import(cert, &datum, GNUTLS_X509_FMT_PEM) == 0 else {
        throw TLSError.configuration("\(path) holds no PEM certificate")
    }
    var der = gnutls_datum_t()
    guard gnutls_x509_crt_export2(cert, GNUTLS_X509_FMT_DER, &der) == 0 else {
        throw TLSError.configuration("cannot export \(path)")
    }
    defer { braid_gnutls_free(der.data) }
    guard let pin = spkiSHA256(ofCertificateDER: der) else { throw TLSError.configuration("cannot hash the key of \(path)") }
    return pin
}

/// Maps a failed `gnutls_certificate_verify_peers3` status to a problem users understand.
package func certificateProblem(fromStatus status: UInt32, hostname: String) -> CertificateProblem {
    let has = { (flag: gnutls_certificate_status_t) in status & flag.rawValue != 0 }
    if has(GNUTLS_CERT_SIGNER_NOT_FOUND) || has(GNUTLS_CERT_SIGNER_NOT_CA) { return .untrusted }
    if has(GNUTLS_CERT_EXPIRED) || has(GNUTLS_CERT_NOT_ACTIVATED) { return .expired }
    if has(GNUTLS_CERT_UNEXPECTED_OWNER) { return .nameMismatch(expected: hostname) }
    if has(GNUTLS_CERT_REVOKED) { return .invalid("revoked") }
    if has(GNUTLS_CERT_INSECURE_ALGORITHM) { return .invalid("insecure signature algorithm") }
    if has(GNUTLS_CERT_SIGNATURE_FAILURE) { return .invalid("bad signature") }
    if has(GNUTLS_CERT_PURPOSE_MISMATCH) { return .invalid("not issued for this use (key purpose)") }
    return .invalid("verification status 0x\(String(status, radix: 16))")
}

/// The alert that tells the peer why we rejected its certificate (RFC 8446 §6.2).
package func alert(for problem: CertificateProblem) -> gnutls_alert_description_t {
    switch problem {
    case .untrusted: GNUTLS_A_UNKNOWN_CA
    case .expired: GNUTLS_A_CERTIFICATE_EXPIRED
    case .missing: GNUTLS_A_CERTIFICATE_REQUIRED
    case .nameMismatch, .pinMismatch, .invalid, .rejected: GNUTLS_A_BAD_CERTIFICATE
    }
}

/// Whether `host` is an IP literal (no SNI is sent for those, RFC 6066 §3).
package func isIPLiteral(_ host: String) -> Bool {
    SocketAddress(ip: host, port: 0) != nil
}
