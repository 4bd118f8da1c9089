import Foundation

/// A public key (Apple's `SecKey`), from a certificate or a trust: what pinning compares.
///
/// ```swift
/// if let key = SecCertificateCopyKey(certificate),
///    let bytes = SecKeyCopyExternalRepresentation(key, nil) as Data? {
///     print("key of \(bytes.count) bytes")
/// }
/// ```
public final class SecKey: Sendable, Hashable {
    /// The SubjectPublicKeyInfo, DER.
    let subjectPublicKeyInfo: [UInt8]
    /// Apple's external form: the SubjectPublicKeyInfo's key bits (RSA: the PKCS #1
    /// RSAPublicKey; EC: the uncompressed point; Ed25519: the raw key).
    let externalRepresentation: [UInt8]

    init?(subjectPublicKeyInfo: [UInt8]) {
        guard let bits = DERReader.subjectPublicKeyBits(of: subjectPublicKeyInfo) else { return nil }
        self.subjectPublicKeyInfo = subjectPublicKeyInfo
        externalRepresentation = bits
    }

    public static func == (lhs: SecKey, rhs: SecKey) -> Bool { lhs.subjectPublicKeyInfo == rhs.subjectPublicKeyInfo }

    public func hash(into hasher: inout Hasher) { hasher.combine(subjectPublicKeyInfo) }
}

/// The key in Apple's external form: RSA as a PKCS #1 RSAPublicKey, EC as the uncompressed
/// point (0x04, x, y), Ed25519 as its 32 bytes.
public func SecKeyCopyExternalRepresentation(_ key: SecKey, _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?) -> CFData? {
    Data(key.externalRepresentation) as CFData
}
