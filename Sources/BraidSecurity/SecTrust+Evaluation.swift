import BraidCore
import CBraid
import Foundation

extension SecTrust {
    /// Verifies the chain with GnuTLS against the anchors in force, for each policy's purpose
    /// and name: nil if trusted, else the error Apple's evaluation would give.
    func evaluate() -> CFError? {
        let settings = settings.withLock { $0 }
        var list: gnutls_x509_trust_list_t?
        guard gnutls_x509_trust_list_init(&list, 0) == 0, let list else { return Self.error(errSecParam, "cannot create a trust list") }
        // 1: the list frees the authorities added to it.
        defer { gnutls_x509_trust_list_deinit(list, 1) }
        if settings.anchors == nil || !settings.anchorsOnly {
            if let file = Self.systemAnchorsForTesting.withLock({ $0 }) {
                _ = gnutls_x509_trust_list_add_trust_file(list, file, nil, GNUTLS_X509_FMT_PEM, 0, 0)
            } else if gnutls_x509_trust_list_add_system_trust(list, 0, 0) < 0 {
                return Self.error(errSecNotTrusted, "the system's certificate authorities could not be loaded")
            }
        }
        for anchor in settings.anchors ?? [] {
            guard let imported = X509Certificate.importing(der: anchor.der) else { continue }
            var handle: gnutls_x509_crt_t? = imported
            _ = gnutls_x509_trust_list_add_cas(list, &handle, 1, 0)
        }
        let chain = settings.certificates.compactMap { X509Certificate(der: $0.der) }
        guard chain.count == settings.certificates.count, !chain.isEmpty else {
            return Self.error(errSecDecode, "a certificate of the chain cannot be read")
        }
        let leafName = chain[0].commonName ?? chain[0].subject ?? "certificate"
        for policy in settings.policies.isEmpty ? [SecPolicyCreateBasicX509()] : settings.policies {
            if let failure = verify(chain, in: list, for: policy.purpose, leafName: leafName) { return failure }
        }
        return nil
    }

    private func verify(
        _ chain: [X509Certificate], in list: gnutls_x509_trust_list_t, for purpose: SecPolicy.Purpose, leafName: String
    ) -> CFError? {
        var handles: [gnutls_x509_crt_t?] = chain.map(\.handle)
        var status: UInt32 = 0
        var hostname: String?
        var keyPurpose: String?
        if case .ssl(let server, let name) = purpose {
            hostname = name
            keyPurpose = server ? GNUTLS_KP_TLS_WWW_SERVER : GNUTLS_KP_TLS_WWW_CLIENT
        }
        let rc = withTypedData(hostname: hostname, keyPurpose: keyPurpose) { data, count in
            gnutls_x509_trust_list_verify_crt2(list, &handles, UInt32(handles.count), data, UInt32(count), 0, &status, nil)
        }
        if rc < 0 { return Self.error(errSecDecode, "“\(leafName)” could not be verified: \(String(cString: gnutls_strerror(rc)))") }
        guard status != 0 else { return nil }
        func has(_ flag: gnutls_certificate_status_t) -> Bool { status & flag.rawValue != 0 }
        if has(GNUTLS_CERT_EXPIRED) || has(GNUTLS_CERT_NOT_ACTIVATED) {
            return Self.error(errSecCertificateExpired, "“\(leafName)” has expired or is not yet valid")
        }
        if has(GNUTLS_CERT_UNEXPECTED_OWNER) {
            return Self.error(errSecHostNameMismatch, "“\(leafName)” is not valid for the name “\(hostname ?? "")”")
        }
        if has(GNUTLS_CERT_SIGNER_NOT_FOUND) || has(GNUTLS_CERT_SIGNER_NOT_CA) {
            return Self.error(errSecNotTrusted, "“\(leafName)” certificate is not trusted")
        }
        if has(GNUTLS_CERT_PURPOSE_MISMATCH) {
            return Self.error(errSecNotTrusted, "“\(leafName)” is not meant for this use")
        }
        return Self.error(errSecInvalidCertificateRef, "“\(leafName)” is invalid (revoked, a bad signature or an insecure algorithm)")
    }

    /// GnuTLS's typed data for a name and a key purpose, valid during `body`.
    private func withTypedData(
        hostname: String?, keyPurpose: String?, _ body: (UnsafeMutablePointer<gnutls_typed_vdata_st>?, Int) -> Int32
    ) -> Int32 {
        let name = hostname.map { Array($0.utf8CString) }
        let purpose = keyPurpose.map { Array($0.utf8CString) }
        return name.withOptionalBytes { namePointer in
            purpose.withOptionalBytes { purposePointer in
                var data: [gnutls_typed_vdata_st] = []
                if let namePointer {
                    data.append(gnutls_typed_vdata_st(type: GNUTLS_DT_DNS_HOSTNAME, data: namePointer, size: 0))
                }
                if let purposePointer {
                    data.append(gnutls_typed_vdata_st(type: GNUTLS_DT_KEY_PURPOSE_OID, data: purposePointer, size: 0))
                }
                return data.withUnsafeMutableBufferPointer { body($0.isEmpty ? nil : $0.baseAddress, $0.count) }
            }
        }
    }

    static func error(_ status: OSStatus, _ description: String) -> CFError {
        NSError(domain: NSOSStatusErrorDomain, code: Int(status), userInfo: [NSLocalizedDescriptionKey: description])
    }
}

extension Optional where Wrapped == [CChar] {
    /// The C string's bytes, as GnuTLS's typed data wants them, during `body` (nil when none).
    fileprivate func withOptionalBytes<R>(_ body: (UnsafeMutablePointer<UInt8>?) -> R) -> R {
        guard var bytes = self else { return body(nil) }
        return bytes.withUnsafeMutableBytes { body($0.bindMemory(to: UInt8.self).baseAddress) }
    }
}
