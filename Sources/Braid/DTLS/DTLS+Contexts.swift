import BraidCore
import BraidTLS

extension DTLS {
    /// The engine's client configuration (TLS's: the same trust, pins, ALPN and identity).
    func clientConfiguration() throws -> TLSClientConfiguration {
        guard (100...65507).contains(maximumDatagramSize) else {
            throw NetworkError.invalidConfiguration("DTLS maximumDatagramSize must be 100 to 65,507 bytes; got \(maximumDatagramSize)")
        }
        try validateHandshakeTimeout()
        if peerAuthentication == .optional || peerAuthentication == .required {
            throw NetworkError.unsupported(
                "DTLS peerAuthentication other than .none on a client (a Braid client always verifies the server's certificate)")
        }
        var configuration = TLSClientConfiguration(alpn: alpn)
        configuration.verification = verification
        if case .system = verification.trustRoots, let file = TLS.systemTrustForTesting.withLock({ $0 }) {
            configuration.verification.trustRoots = .certificateAuthorityFile(file)
        }
        configuration.certificateChainFile = certificateChainFile
        configuration.privateKeyFile = privateKeyFile
        configuration.identityMaterial = identityMaterial
        configuration.callerVerifiesPeer = peerVerifier != nil
        return configuration
    }
}

extension DTLS {
    /// The engine's server configuration. Peer authentication defaults to Apple's `.required`
    /// for servers; asking for client certificates needs the authorities that sign them.
    func serverConfiguration() throws -> TLSServerConfiguration {
        try validateHandshakeTimeout()
        var configuration: TLSServerConfiguration
        if let identityMaterial {
            configuration = TLSServerConfiguration(alpn: alpn, identity: identityMaterial)
        } else if let certificateChainFile, let privateKeyFile {
            configuration = TLSServerConfiguration(alpn: alpn, certificateChainFile: certificateChainFile, privateKeyFile: privateKeyFile)
        } else {
            throw NetworkError.invalidConfiguration(
                "a DTLS listener needs a certificate: add .identity(certificateChainFile:privateKeyFile:) (classic API: sec_protocol_options_set_local_identity)")
        }
        switch peerAuthentication ?? .required {
        case .none: configuration.peerAuthentication = .none
        case .optional: configuration.peerAuthentication = .optional
        case .required: configuration.peerAuthentication = .required
        }
        if peerVerifier != nil {
            // The application judges every client's certificate, so every client must show one;
            // its check replaces the authorities'.
            configuration.peerAuthentication = .required
            configuration.callerVerifiesPeer = true
        } else if configuration.peerAuthentication != .none {
            guard case .certificateAuthorityFile(let file) = verification.trustRoots else {
                throw NetworkError.invalidConfiguration(
                    "a DTLS listener asks for client certificates by default (peerAuthentication .required, as Apple's): add .trust(.certificateAuthorities(file:)) naming the authorities that sign them, or .peerAuthentication(.none)")
            }
            configuration.clientCertificateAuthorityFile = file
        }
        return configuration
    }
}

extension DTLS {
    fileprivate func validateHandshakeTimeout() throws {
        try validateTLSHandshakeTimeout(handshakeTimeout, of: "DTLS")
    }
}

/// Client DTLS contexts are costly (parsing the trust store, loading credentials): one per
/// distinct configuration, shared by every connection that uses it.
enum DTLSClientContexts {
    private static let cache = Locked<[TLSClientConfiguration: DTLSClientContext]>([:])

    static func context(for dtls: DTLS) throws -> DTLSClientContext {
        let configuration = try dtls.clientConfiguration()
        if let existing = cache.withLock({ $0[configuration] }) { return existing }
        let made = try DTLSClientContext(configuration: configuration)
        cache.withLock { $0[configuration] = made }
        return made
    }
}
