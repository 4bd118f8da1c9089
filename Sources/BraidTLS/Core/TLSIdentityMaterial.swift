/// A certificate chain and its private key held in memory (from a PKCS #12 file, say), for
/// an endpoint that presents them instead of reading PEM files.
package struct TLSIdentityMaterial: Sendable, Hashable {
    /// The certificates, leaf first, DER.
    package var certificates: [[UInt8]]
    /// The leaf's private key, DER (PKCS #8, PKCS #1 or SEC 1).
    package var privateKey: [UInt8]

    package init(certificates: [[UInt8]], privateKey: [UInt8]) {
        self.certificates = certificates
        self.privateKey = privateKey
    }
}
