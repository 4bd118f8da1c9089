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
        trust: TLSTrustRoots, certificateChainFile: String?, privateKeyFile: String?, identity: TLSIdentityMaterial? = nil
    ) throws(TLSError) -> TLSCredentials {
        let credentials = try TLSCredentials()
        try credentials.loadTrust(trust)
        if let identity {
            try credentials.load(identity)
        } else if let certificateChainFile, let privateKeyFile {
            try credentials.loadIdentity(certificateChainFile: certificateChainFile, privateKeyFile: privateKeyFile)
        }
        return credentials
    }

    /// Server credentials: certificate chain and key from PEM files, plus the roots client
    /// certificates are verified against (nil: none loaded).
    package static func server(
        certificateChainFile: String, privateKeyFile: String, identity: TLSIdentityMaterial? = nil,
        clientTrust: TLSTrustRoots? = nil
    ) throws(TLSError) -> TLSCredentials {
        let credentials = try TLSCredentials()
        if let identity {
            try credentials.load(identity)
        } else {
            try credentials.loadIdentity(certificateChainFile: certificateChainFile, privateKeyFile: privateKeyFile)
        }
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

    /// A chain and key held in memory (GnuTLS copies them into the credentials).
    private func load(_ identity: TLSIdentityMaterial) throws(TLSError) {
        var chain: [gnutls_x509_crt_t?] = []
        defer { for certificate in chain { gnutls_x509_crt_deinit(certificate) } }
        for der in identity.certificates {
            var certificate: gnutls_x509_crt_t?
            guard gnutls_x509_crt_init(&certificate) == 0 else { throw .internalError(function: "gnutls_x509_crt_init", code: -1) }
            chain.append(certificate)
            let rc = withDatum(der) { gnutls_x509_crt_import(certificate, $0, GNUTLS_X509_FMT_DER) }
            if rc < 0 { throw .configuration("the identity's certificate \(chain.count) cannot be read: \(gnutlsErrorString(rc))") }
        }
        guard !chain.isEmpty else { throw .configuration("the identity has no certificate") }
        var key: gnutls_x509_privkey_t?
        guard gnutls_x509_privkey_init(&key) == 0 else { throw .internalError(function: "gnutls_x509_privkey_init", code: -1) }
        defer { gnutls_x509_privkey_deinit(key) }
        var rc = withDatum(identity.privateKey) { gnutls_x509_privkey_import2(key, $0, GNUTLS_X509_FMT_DER, nil, 0) }
        if rc < 0 { throw .configuration("the identity's private key cannot be read: \(gnutlsErrorString(rc))") }
        rc = gnutls_certificate_set_x509_key(handle, &chain, Int32(chain.count), key)
        if rc < 0 { throw .configuration("the identity's certificate and key do not go together: \(gnutlsErrorString(rc))") }
    }

    private func withDatum(_ bytes: [UInt8], _ body: (UnsafePointer<gnutls_datum_t>) -> Int32) -> Int32 {
        var bytes = bytes
        return bytes.withUnsafeMutableBufferPointer { buffer in
            var datum = gnutls_datum_t(data: buffer.baseAddress, size: UInt32(buffer.count))
            return body(&datum)
        }
    }
}
