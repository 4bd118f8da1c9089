/// What a connection's security layer (TLS) agreed, once ready: what TLS metadata reports.
package struct SecurityFacts: Sendable, Equatable {
    /// The protocol version's minor number: 12 for TLS 1.2, 13 for TLS 1.3.
    package var version: Int?
    /// The name the client asked for (SNI).
    package var serverName: String?
    /// The peer's certificates, leaf first, DER (empty when none was presented, or the session
    /// resumed).
    package var peerCertificates: [[UInt8]]

    package init(version: Int?, serverName: String?, peerCertificates: [[UInt8]]) {
        self.version = version
        self.serverName = serverName
        self.peerCertificates = peerCertificates
    }
}
