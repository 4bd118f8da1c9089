import BraidCore
import BraidTLS

extension TLSProtocolVersion {
    /// The engine's form of the version.
    var engineVersion: TLSVersion {
        switch self {
        // DTLS versions are refused before a TLS engine is configured (`validateVersions`).
        case .TLSv12, .DTLSv10, .DTLSv12: .v1_2
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
        var configuration = TLSStackSecurity.clientConfiguration(
            alpn: alpn, verification: verification, certificateChainFile: certificateChainFile, privateKeyFile: privateKeyFile,
            identityMaterial: identityMaterial, verifier: peerVerifier)
        configuration.cipherSuites = cipherSuites.map(\.rawValue)
        configuration.minimumVersion = minimumVersion.engineVersion
        configuration.maximumVersion = maximumVersion.engineVersion
        configuration.sessionTicketsEnabled = ticketsEnabled
        return configuration
    }

    /// The engine configuration of a listener over this stack. With a verify block no client
    /// resumes: a resumed client shows no certificate, and its early data would arrive before
    /// any verdict.
    func serverConfiguration() throws -> TLSServerConfiguration {
        try validateVersions()
        let mode: TLSPeerAuthentication = switch peerAuthentication {
        case .none: .none
        case .optional: .optional
        case .required: .required
        }
        var configuration = try TLSStackSecurity.serverConfiguration(
            stack: "TLS", alpn: alpn, certificateChainFile: certificateChainFile, privateKeyFile: privateKeyFile,
            identityMaterial: identityMaterial, peerAuthentication: mode, verification: verification, verifier: peerVerifier,
            missingAuthorities:
                "a TLS listener that asks for client certificates must name the authorities that sign them: add .trust(.certificateAuthorities(file:))")
        configuration.minimumVersion = minimumVersion.engineVersion
        configuration.maximumVersion = maximumVersion.engineVersion
        configuration.sessionTicketsEnabled = ticketsEnabled && peerVerifier == nil
        configuration.earlyDataEnabled = earlyDataEnabled && peerVerifier == nil
        configuration.cipherSuites = cipherSuites.map(\.rawValue)
        return configuration
    }

    private func validateVersions() throws {
        try TLSStackSecurity.validateHandshakeTimeout(handshakeTimeout, of: "TLS")
        for version in [minimumVersion, maximumVersion] where version.isDTLS {
            throw NetworkError.invalidConfiguration("TLS over TCP with the DTLS version \(version): use .TLSv12 or .TLSv13 (DTLS versions are for DTLS over UDP)")
        }
        guard minimumVersion <= maximumVersion else {
            throw NetworkError.invalidConfiguration("TLS minimumVersion \(minimumVersion) is above maximumVersion \(maximumVersion)")
        }
    }
}

/// The process's TLS client contexts, one per distinct configuration.
enum TLSClientContexts {
    private static let cache = TLSClientContextCache { try TLSClientContext(configuration: $0) }

    static func context(for tls: TLS) throws -> TLSClientContext {
        try cache.context(for: try tls.clientConfiguration())
    }
}

/// A listener's TLS context: made once per `run` (its ticket key lives as long as it does).
enum TLSServerContexts {
    static func make(for tls: TLS) throws -> TLSServerContext {
        try TLSServerContext(configuration: try tls.serverConfiguration(), ticketKeyRing: tls.fleetKeys?.ring)
    }
}
