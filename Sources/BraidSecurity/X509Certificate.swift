import CBraid

/// One parsed certificate, GnuTLS's `gnutls_x509_crt_t`, freed with the value.
final class X509Certificate {
    let handle: gnutls_x509_crt_t

    /// Nil unless `der` is one X.509 certificate.
    convenience init?(der: [UInt8]) {
        guard let handle = Self.importing(der: der) else { return nil }
        self.init(taking: handle)
    }

    /// Takes over a certificate GnuTLS made.
    init(taking handle: gnutls_x509_crt_t) {
        self.handle = handle
    }

    /// A certificate of GnuTLS's own from DER, for calls that keep what they are given (a
    /// trust list frees it); nil unless `der` is one X.509 certificate.
    static func importing(der: [UInt8]) -> gnutls_x509_crt_t? {
        var created: gnutls_x509_crt_t?
        guard !der.isEmpty, gnutls_x509_crt_init(&created) == 0, let created else { return nil }
        let rc = der.withUnsafeBufferPointer { bytes in
            var datum = gnutls_datum_t(data: UnsafeMutablePointer(mutating: bytes.baseAddress), size: UInt32(bytes.count))
            return gnutls_x509_crt_import(created, &datum, GNUTLS_X509_FMT_DER)
        }
        guard rc == 0 else {
            gnutls_x509_crt_deinit(created)
            return nil
        }
        return created
    }

    deinit { gnutls_x509_crt_deinit(handle) }

    /// The DER encoding of a certificate GnuTLS holds.
    static func der(of handle: gnutls_x509_crt_t) -> [UInt8]? {
        var datum = gnutls_datum_t()
        guard gnutls_x509_crt_export2(handle, GNUTLS_X509_FMT_DER, &datum) == 0, let bytes = datum.data else { return nil }
        defer { braid_gnutls_free(bytes) }
        return Array(UnsafeBufferPointer(start: bytes, count: Int(datum.size)))
    }

    /// The SubjectPublicKeyInfo, DER.
    func subjectPublicKeyInfo() -> [UInt8]? {
        var key: gnutls_pubkey_t?
        guard gnutls_pubkey_init(&key) == 0, let key else { return nil }
        defer { gnutls_pubkey_deinit(key) }
        guard gnutls_pubkey_import_x509(key, handle, 0) == 0 else { return nil }
        var spki = gnutls_datum_t()
        guard gnutls_pubkey_export2(key, GNUTLS_X509_FMT_DER, &spki) == 0, let bytes = spki.data else { return nil }
        defer { braid_gnutls_free(bytes) }
        return Array(UnsafeBufferPointer(start: bytes, count: Int(spki.size)))
    }

    /// The subject's first common name.
    var commonName: String? {
        var size = 0
        guard gnutls_x509_crt_get_dn_by_oid(handle, GNUTLS_OID_X520_COMMON_NAME, 0, 0, nil, &size) == GNUTLS_E_SHORT_MEMORY_BUFFER
        else { return nil }
        var buffer = [UInt8](repeating: 0, count: size + 1)
        guard gnutls_x509_crt_get_dn_by_oid(handle, GNUTLS_OID_X520_COMMON_NAME, 0, 0, &buffer, &size) == 0 else { return nil }
        return String(decoding: buffer[..<size], as: UTF8.self)
    }

    /// The whole subject, RFC 4514 form.
    var subject: String? {
        var datum = gnutls_datum_t()
        guard gnutls_x509_crt_get_dn3(handle, &datum, 0) == 0, let bytes = datum.data else { return nil }
        defer { braid_gnutls_free(bytes) }
        return String(decoding: UnsafeBufferPointer(start: bytes, count: Int(datum.size)), as: UTF8.self)
    }
}
