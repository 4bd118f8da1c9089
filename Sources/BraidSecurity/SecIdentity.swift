/// A certificate and the private key that goes with it (Apple's `SecIdentity`): what a TLS
/// listener presents, or a client asked for a certificate. On Linux there is no keychain to
/// find one in: `SecPKCS12Import` makes them from a PKCS #12 file.
public final class SecIdentity: Sendable {
    /// The chain, leaf first, DER.
    package let certificates: [[UInt8]]
    /// The leaf's private key, DER.
    package let privateKey: [UInt8]

    init(certificates: [[UInt8]], privateKey: [UInt8]) {
        self.certificates = certificates
        self.privateKey = privateKey
    }
}

/// The identity's certificate.
@discardableResult
public func SecIdentityCopyCertificate(_ identityRef: SecIdentity, _ certificateRef: UnsafeMutablePointer<SecCertificate?>) -> OSStatus {
    guard let leaf = identityRef.certificates.first.flatMap(SecCertificate.init(der:)) else { return errSecDecode }
    certificateRef.pointee = leaf
    return errSecSuccess
}

/// An identity as TLS options take it (Apple's `sec_identity_t`).
public final class sec_identity: Sendable {
    package let identity: SecIdentity
    /// The chain to present after the identity's certificate, if given apart from it.
    package let certificates: [SecCertificate]?

    init(_ identity: SecIdentity, certificates: [SecCertificate]?) {
        self.identity = identity
        self.certificates = certificates
    }
}

/// Apple's name for an identity in TLS options.
public typealias sec_identity_t = sec_identity

/// Wraps an identity; the chain presented is the one it came with.
public func sec_identity_create(_ identity: SecIdentity) -> sec_identity_t? {
    sec_identity(identity, certificates: nil)
}

/// Wraps an identity presenting `certificates` (an array of `SecCertificate`, leaf first) as
/// its chain.
public func sec_identity_create_with_certificates(_ identity: SecIdentity, _ certificates: CFArray) -> sec_identity_t? {
    sec_identity(identity, certificates: certificates.compactMap { $0 as? SecCertificate })
}

/// The `SecIdentity` inside (retained: `.takeRetainedValue()`).
public func sec_identity_copy_ref(_ identity: sec_identity_t) -> Unmanaged<SecIdentity> {
    .passRetained(identity.identity)
}

extension sec_identity {
    /// The chain to present, leaf first, DER.
    package var presentedChain: [[UInt8]] {
        certificates.map { $0.map(\.der) } ?? identity.certificates
    }
}
