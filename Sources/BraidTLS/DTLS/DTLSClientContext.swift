/// Shared, immutable DTLS client state built once from a `TLSClientConfiguration`: the
/// credentials (loading the system trust store is costly) and the parsed DTLS 1.2 priorities.
/// Share it between connections and threads.
///
/// DTLS reuses TLS's client configuration: trust roots, pins, ALPN, a client identity and
/// `callerVerifiesPeer` mean the same thing. Versions, session tickets and cipher suites do
/// not apply: GnuTLS 3.7 speaks DTLS 1.2 only (it has no DTLS 1.3), and Braid does not resume
/// DTLS sessions.
public final class DTLSClientContext: Sendable {
    public let configuration: TLSClientConfiguration
    let credentials: TLSCredentials
    let priority: TLSPriority

    /// Validates the configuration and loads the credentials; throws `TLSError.configuration`.
    public init(configuration: TLSClientConfiguration) throws(TLSError) {
        try configuration.verification.validate()
        try validateALPN(configuration.alpn)
        guard (configuration.certificateChainFile == nil) == (configuration.privateKeyFile == nil) else {
            throw .configuration("a client identity needs both certificateChainFile and privateKeyFile")
        }
        priority = try TLSPriority(dtlsPriority)
        self.configuration = configuration
        credentials = try TLSCredentials.client(
            trust: configuration.verification.trustRoots, certificateChainFile: configuration.certificateChainFile,
            privateKeyFile: configuration.privateKeyFile, identity: configuration.identityMaterial)
    }
}

/// GnuTLS's NORMAL set restricted to DTLS 1.2, with Braid's key exchange groups.
let dtlsPriority = "NORMAL:-VERS-ALL:+VERS-DTLS1.2:" + TLSKeyExchange.tlsGroups
