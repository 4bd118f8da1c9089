import BraidCore
import BraidTLS

extension TLSProtocolVersion {
    /// The engine's form of the version.
    var engineVersion: TLSVersion {
        switch self {
        case .TLSv12: .v1_2
        case .TLSv13: .v1_3
        }
    }

    init(_ engineVersion: TLSVersion) {
        switch engineVersion {
        case .v1_2: self = .TLSv12
        case .v1_3: self = .TLSv13
        }
    }
}

extension TLS {
    /// Tests make `.system` trust mean this CA file, so examples that trust the system store
    /// run unchanged against a test server. Nil (always, outside tests): the system store.
    static let systemTrustForTesting = Locked<String?>(nil)

    /// The engine configuration of a client over this stack.
    func clientConfiguration() throws -> TLSClientConfiguration {
        try validateVersions()
        var configuration = TLSClientConfiguration(alpn: alpn)
        configuration.verification = verification
        if case .system = verification.trustRoots, let file = Self.systemTrustForTesting.withLock({ $0 }) {
            configuration.verification.trustRoots = .certificateAuthorityFile(file)
        }
        configuration.certificateChainFile = certificateChainFile
        configuration.privateKeyFile = privateKeyFile
        configuration.identityMaterial = identityMaterial
        configuration.cipherSuites = cipherSuites.map(\.rawValue)
        configuration.minimumVersion = minimumVersion.engineVersion
        configuration.maximumVersion = maximumVersion.engineVersion
        configuration.sessionTicketsEnabled = ticketsEnabled
        configuration.callerVerifiesPeer = peerVerifier != nil
        return configuration
    }

    /// The engine configuration of a listener over this stack.
    func serverConfiguration() throws -> TLSServerConfiguration {
        try validateVersions()
        var configuration: TLSServerConfiguration
        if let identityMaterial {
            configuration = TLSServerConfiguration(alpn: alpn, identity: identityMaterial)
        } else if let certificateChainFile, let privateKeyFile {
            configuration = TLSServerConfiguration(alpn: alpn, certificateChainFile: certificateChainFile, privateKeyFile: privateKeyFile)
        } else {
            throw NetworkError.invalidConfiguration(
                "a TLS listener needs a certificate: add .identity(certificateChainFile:privateKeyFile:) (classic API: sec_protocol_options_set_local_identity)")
        }
        switch peerAuthentication {
        case .none: configuration.peerAuthentication = .none
        case .optional: configuration.peerAuthentication = .optional
        case .required: configuration.peerAuthentication = .required
        }
        if peerVerifier != nil {
            // The application judges every client's certificate, so every client must show one
            // (its check replaces the authorities'), and none resumes: a resumed client shows no
            // certificate, and its early data would arrive before any verdict.
            configuration.peerAuthentication = .required
            configuration.callerVerifiesPeer = true
        } else if peerAuthentication != .none {
            // Client certificates are verified against named authorities only: a listener
            // that asks for them without saying whom it trusts would accept any.
            guard case .certificateAuthorityFile(let file) = verification.trustRoots else {
                throw NetworkError.invalidConfiguration(
                    "a TLS listener that asks for client certificates must name the authorities that sign them: add .trust(.certificateAuthorities(file:))")
            }
            configuration.clientCertificateAuthorityFile = file
        }
        configuration.minimumVersion = minimumVersion.engineVersion
        configuration.maximumVersion = maximumVersion.engineVersion
        configuration.sessionTicketsEnabled = ticketsEnabled && peerVerifier == nil
        configuration.earlyDataEnabled = earlyDataEnabled && peerVerifier == nil
        configuration.cipherSuites = cipherSuites.map(\.rawValue)
        return configuration
    }

    private func validateVersions() throws {
        try validateTLSHandshakeTimeout(handshakeTimeout, of: "TLS")
        guard minimumVersion <= maximumVersion else {
            throw NetworkError.invalidConfiguration("TLS minimumVersion \(minimumVersion) is above maximumVersion \(maximumVersion)")
        }
    }
}

/// TLS's and DTLS's handshake timeout (`stack` names which in the error): positive, and at
/// most a day, past which it bounds nothing (and absurd values, `.seconds(Int64.max)`, would
/// overflow a deadline).
func validateTLSHandshakeTimeout(_ timeout: Duration, of stack: String) throws {
    guard timeout > .zero else {
        throw NetworkError.invalidConfiguration("\(stack) handshakeTimeout must be positive; got \(timeout)")
    }
    guard timeout <= .seconds(86_400) else {
        throw NetworkError.invalidConfiguration("\(stack) handshakeTimeout must be at most a day; got \(timeout)")
    }
}

/// Client TLS contexts are costly (parsing the trust store, loading credentials): one per
/// distinct configuration, shared by every connection that uses it.
enum TLSClientContexts {
    private static let cache = Locked<[TLSClientConfiguration: TLSClientContext]>([:])

    static func context(for tls: TLS) throws -> TLSClientContext {
        let configuration = try tls.clientConfiguration()
        if let existing = cache.withLock({ $0[configuration] }) { return existing }
        let made = try TLSClientContext(configuration: configuration)
        cache.withLock { $0[configuration] = made }
        return made
    }
}

/// A listener's TLS context: made once per `run` (its ticket key lives as long as it does).
enum TLSServerContexts {
    static func make(for tls: TLS) throws -> TLSServerContext {
        try TLSServerContext(configuration: try tls.serverConfiguration())
    }
}
