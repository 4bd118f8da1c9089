import BraidCore
import BraidTLS

/// What the TLS and DTLS stacks turn into engine configurations alike: trust, pins, ALPN, a
/// local identity (files or memory), who checks the peer's certificate (Braid, or the
/// application's verify block), and a listener's request for client certificates. What only
/// one has (TLS's versions, cipher suites, tickets and early data; DTLS's datagram size) each
/// adds itself.
enum TLSStackSecurity {
    /// A client's configuration. Tests may stand a CA file in for the system store
    /// (`TLS.systemTrustForTesting`).
    static func clientConfiguration(
        alpn: [String], verification: TLSCertificateVerification, certificateChainFile: String?, privateKeyFile: String?,
        identityMaterial: TLSIdentityMaterial?, verifier: TLSPeerVerifier?
    ) -> TLSClientConfiguration {
        var configuration = TLSClientConfiguration(alpn: alpn)
        configuration.verification = verification
        if case .system = verification.trustRoots, let file = TLS.systemTrustForTesting.withLock({ $0 }) {
            configuration.verification.trustRoots = .certificateAuthorityFile(file)
        }
        configuration.certificateChainFile = certificateChainFile
        configuration.privateKeyFile = privateKeyFile
        configuration.identityMaterial = identityMaterial
        configuration.callerVerifiesPeer = verifier != nil
        return configuration
    }

    /// A listener's configuration. With a `verifier`, every client must present a certificate
    /// and the verifier alone judges it; otherwise a listener asking for client certificates
    /// checks them against the authorities `verification` names, and without them is refused
    /// with `missingAuthorities` (client certificates are verified against named authorities
    /// only: asking without saying whom to trust would accept any).
    static func serverConfiguration(
        stack: String, alpn: [String], certificateChainFile: String?, privateKeyFile: String?, identityMaterial: TLSIdentityMaterial?,
        peerAuthentication: TLSPeerAuthentication, verification: TLSCertificateVerification, verifier: TLSPeerVerifier?,
        missingAuthorities: String
    ) throws -> TLSServerConfiguration {
        var configuration: TLSServerConfiguration
        if let identityMaterial {
            configuration = TLSServerConfiguration(alpn: alpn, identity: identityMaterial)
        } else if let certificateChainFile, let privateKeyFile {
            configuration = TLSServerConfiguration(alpn: alpn, certificateChainFile: certificateChainFile, privateKeyFile: privateKeyFile)
        } else {
            throw NetworkError.invalidConfiguration(
                "a \(stack) listener needs a certificate: add .identity(certificateChainFile:privateKeyFile:) (classic API: sec_protocol_options_set_local_identity)")
        }
        configuration.peerAuthentication = peerAuthentication
        if verifier != nil {
            configuration.peerAuthentication = .required
            configuration.callerVerifiesPeer = true
        } else if peerAuthentication != .none {
            guard case .certificateAuthorityFile(let file) = verification.trustRoots else {
                throw NetworkError.invalidConfiguration(missingAuthorities)
            }
            configuration.clientCertificateAuthorityFile = file
        }
        return configuration
    }

    /// TLS's and DTLS's handshake timeout (`stack` names which in the error): positive, and at
    /// most a day, past which it bounds nothing (and absurd values, `.seconds(Int64.max)`,
    /// would overflow a deadline).
    static func validateHandshakeTimeout(_ timeout: Duration, of stack: String) throws {
        guard timeout > .zero else {
            throw NetworkError.invalidConfiguration("\(stack) handshakeTimeout must be positive; got \(timeout)")
        }
        guard timeout <= .seconds(86_400) else {
            throw NetworkError.invalidConfiguration("\(stack) handshakeTimeout must be at most a day; got \(timeout)")
        }
    }
}
