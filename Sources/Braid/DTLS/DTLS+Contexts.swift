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
        return TLSStackSecurity.clientConfiguration(
            alpn: alpn, verification: verification, certificateChainFile: certificateChainFile, privateKeyFile: privateKeyFile,
            identityMaterial: identityMaterial, verifier: peerVerifier)
    }
}

extension DTLS {
    /// The engine's server configuration. Peer authentication defaults to Apple's `.required`
    /// for servers; asking for client certificates needs the authorities that sign them.
    func serverConfiguration() throws -> TLSServerConfiguration {
        try validateHandshakeTimeout()
        let mode: TLSPeerAuthentication = switch peerAuthentication ?? .required {
        case .none: .none
        case .optional: .optional
        case .required: .required
        }
        return try TLSStackSecurity.serverConfiguration(
            stack: "DTLS", alpn: alpn, certificateChainFile: certificateChainFile, privateKeyFile: privateKeyFile,
            identityMaterial: identityMaterial, peerAuthentication: mode, verification: verification, verifier: peerVerifier,
            missingAuthorities:
                "a DTLS listener asks for client certificates by default (peerAuthentication .required, as Apple's): add .trust(.certificateAuthorities(file:)) naming the authorities that sign them, or .peerAuthentication(.none)")
    }
}

extension DTLS {
    fileprivate func validateHandshakeTimeout() throws {
        try TLSStackSecurity.validateHandshakeTimeout(handshakeTimeout, of: "DTLS")
    }
}

/// The process's DTLS client contexts, one per distinct configuration.
enum DTLSClientContexts {
    private static let cache = TLSClientContextCache { try DTLSClientContext(configuration: $0) }

    static func context(for dtls: DTLS) throws -> DTLSClientContext {
        try cache.context(for: try dtls.clientConfiguration())
    }
}
