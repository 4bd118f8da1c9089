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

    /// Who a client is to the server, for its resumption tickets' keys: a ticket earned while
    /// presenting one certificate (or none) must not resume as another, or a listener that
    /// requires client certificates would take a client without one for the one that earned
    /// the ticket.
    package static func resumptionScope(_ material: TLSIdentityMaterial?, certificateChainFile: String?) -> String {
        if let material { return "identity=" + SHA256.hexDigest(material.certificates.first ?? []) }
        if let certificateChainFile { return "identity=\(certificateChainFile)" }
        return "identity=none"
    }
}
