import BraidCore
import BraidTLS

extension DTLS {
    /// The engine's client configuration (TLS's: the same trust, pins, ALPN and identity).
    func clientConfiguration() throws -> TLSClientConfiguration {
        guard (100...65507).contains(maximumDatagramSize) else {
            throw NetworkError.invalidConfiguration("DTLS maximumDatagramSize must be 100 to 65,507 bytes; got \(maximumDatagramSize)")
        }
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
        return configuration
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
