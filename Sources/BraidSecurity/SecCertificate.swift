import CBraid
import Foundation

/// An X.509 certificate (Apple's `SecCertificate`), held as its DER encoding.
///
/// ```swift
/// let der = try Data(contentsOf: URL(fileURLWithPath: "server.der"))
/// if let certificate = SecCertificateCreateWithData(nil, der as CFData) {
///     print(SecCertificateCopySubjectSummary(certificate) ?? "no name")
/// }
/// ```
public final class SecCertificate: Sendable, Hashable {
    /// The certificate, DER.
    let der: [UInt8]

    /// Nil unless `der` is one X.509 certificate.
    package init?(der: [UInt8]) {
        guard X509Certificate(der: der) != nil else { return nil }
        self.der = der
    }

    public static func == (lhs: SecCertificate, rhs: SecCertificate) -> Bool { lhs.der == rhs.der }

    public func hash(into hasher: inout Hasher) { hasher.combine(der) }
}

/// A certificate from its DER encoding; nil if `data` is not one.
public func SecCertificateCreateWithData(_ allocator: CFAllocator?, _ data: CFData) -> SecCertificate? {
    SecCertificate(der: [UInt8](data as Data))
}

/// The certificate's DER encoding.
public func SecCertificateCopyData(_ certificate: SecCertificate) -> CFData {
    Data(certificate.der) as CFData
}

/// The certificate's public key; nil if GnuTLS cannot read it.
public func SecCertificateCopyKey(_ certificate: SecCertificate) -> SecKey? {
    X509Certificate(der: certificate.der)?.subjectPublicKeyInfo().flatMap(SecKey.init(subjectPublicKeyInfo:))
}

/// A human-readable name for the certificate: its subject's common name, else its whole
/// subject.
public func SecCertificateCopySubjectSummary(_ certificate: SecCertificate) -> CFString? {
    guard let parsed = X509Certificate(der: certificate.der), let name = parsed.commonName ?? parsed.subject else { return nil }
    return name as NSString
}

/// The subject's common name, if it has one.
@discardableResult
public func SecCertificateCopyCommonName(_ certificate: SecCertificate, _ commonName: UnsafeMutablePointer<CFString?>) -> OSStatus {
    guard let parsed = X509Certificate(der: certificate.der) else { return errSecDecode }
    commonName.pointee = parsed.commonName.map { $0 as NSString }
    return errSecSuccess
}
