import CBraid

/// Owns a `gnutls_certificate_credentials_t`. Credentials are immutable once built and GnuTLS
/// documents them as shareable between sessions on any thread, hence `@unchecked Sendable`.
package final class TLSCredentials: @unchecked Sendable {
    package let handle: gnutls_certificate_credentials_t

    private init() throws(TLSError) {
        var handle: gnutls_certificate_credentials_t?
        let rc = gnutls_certificate_allocate_credentials(&handle)
        guard rc == 0, let handle else { throw .internalError(function: "gnutls_certificate_allocate_credentials", code: rc) }
        self.handle = handle
    }

    deinit { gnutls_certificate_free_credentials(handle) }

    /// Client credentials: the trust roots to verify servers against, plus an optional identity.
    package static func client(
        trust: TLSTrustRoots, certificateChainFile: String?, privateKeyFile: String?
    ) throws(TLSError) -> TLSCredentials {
        let credentials = try TLSCredentials()
        try credentials.loadTrust(trust)
        if let certificateChainFile, let privateKeyFile {
            try credentials.loadIdentity(certificateChainFile: certificateChainFile, privateKeyFile: privateKeyFile)
        }
        return credentials
    }

    /// Server credentials: certificate chain and key from PEM files, plus the roots client
    /// certificates are verified against (nil: none loaded).
    package static func server(
        certificateChainFile: String, privateKeyFile: String, clientTrust: TLSTrustRoots? = nil
    ) throws(TLSError) -> TLSCredentials {
        let credentials = try TLSCredentials()
        try credentials.loadIdentity(certificateChainFile: certificateChainFile, privateKeyFile: privateKeyFile)
        if let clientTrust { try credentials.loadTrust(clientTrust) }
        return credentials
    }

    private func loadTrust(_ trust: TLSTrustRoots) throws(TLSError) {
        switch trust {
        case .system:
            let rc = gnutls_certificate_set_x509_system_trust(handle)
            if rc < 0 { throw .configuration("cannot load the system trust store: \(gnutlsErrorString(rc))") }
        case .certificateAuthorityFile(let path):
            let rc = gnutls_certificate_set_x509_trust_file(handle, path, GNUTLS_X509_FMT_PEM)
            if rc < 0 { throw .configuration("cannot read CA file \(path): \(gnutlsErrorString(rc))") }
            if rc == 0 { throw .configuration("CA file \(path) contains no PEM certificate") }
        }
    }

    private func loadIdentity(certificateChainFile: String, privateKeyFile: String) throws(TLSError) {
        let rc = gnutls_certificate_set_x509_key_file(handle, certificateChainFile, privateKeyFile, GNUTLS_X509_FMT_PEM)
        if rc < 0 {
            throw .configuration(
                "cannot load certificate \(certificateChainFile) with key \(privateKeyFile): \(gnutlsErrorString(rc))")
        }
    }
}
