/// A `SecTrust` as a TLS verify block receives it (Apple's `sec_trust_t`); its
/// `SecTrust` comes out with `sec_trust_copy_ref`.
public final class sec_trust: Sendable {
    let trust: SecTrust

    init(_ trust: SecTrust) { self.trust = trust }
}

/// Apple's name for the verify block's trust.
public typealias sec_trust_t = sec_trust

/// Wraps a `SecTrust`.
public func sec_trust_create(_ trust: SecTrust) -> sec_trust_t? {
    sec_trust(trust)
}

/// The `SecTrust` inside (retained: `.takeRetainedValue()`).
public func sec_trust_copy_ref(_ trust: sec_trust_t) -> Unmanaged<SecTrust> {
    .passRetained(trust.trust)
}

/// A `SecCertificate` as the TLS metadata hands it out (Apple's `sec_certificate_t`).
public final class sec_certificate: Sendable {
    let certificate: SecCertificate

    init(_ certificate: SecCertificate) { self.certificate = certificate }
}

/// Apple's name for a certificate in the TLS metadata.
public typealias sec_certificate_t = sec_certificate

/// Wraps a `SecCertificate`.
public func sec_certificate_create(_ certificate: SecCertificate) -> sec_certificate_t? {
    sec_certificate(certificate)
}

/// The `SecCertificate` inside (retained: `.takeRetainedValue()`).
public func sec_certificate_copy_ref(_ certificate: sec_certificate_t) -> Unmanaged<SecCertificate> {
    .passRetained(certificate.certificate)
}
