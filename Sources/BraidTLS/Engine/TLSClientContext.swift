/// Shared, immutable client state built once from a configuration: the credentials (loading the
/// system trust store is costly) and the parsed priorities (`TLSPriority`, one GnuTLS priority
/// cache every session references). Share it between connections and threads.
public final class TLSClientContext: Sendable {
    public let configuration: TLSClientConfiguration
    let credentials: TLSCredentials
    let priority: TLSPriority

    /// Validates the configuration and loads the credentials; throws `TLSError.configuration`.
    public init(configuration: TLSClientConfiguration) throws(TLSError) {
        try configuration.verification.validate()
        priority = try TLSPriority(tlsPriority(
            minimum: configuration.minimumVersion, maximum: configuration.maximumVersion, cipherSuites: configuration.cipherSuites))
        try validateALPN(configuration.alpn)
        guard (configuration.certificateChainFile == nil) == (configuration.privateKeyFile == nil) else {
            throw .configuration("a client identity needs both certificateChainFile and privateKeyFile")
        }
        self.configuration = configuration
        credentials = try TLSCredentials.client(
            trust: configuration.verification.trustRoots, certificateChainFile: configuration.certificateChainFile,
            privateKeyFile: configuration.privateKeyFile, identity: configuration.identityMaterial)
    }
}

/// GnuTLS's NORMAL set restricted to the allowed versions, with Braid's key exchange groups
/// (`TLSKeyExchange`).
func tlsPriority(minimum: TLSVersion, maximum: TLSVersion, cipherSuites: [UInt16] = []) throws(TLSError) -> String {
    guard minimum <= maximum else {
        throw .configuration("minimumVersion \(minimum) is above maximumVersion \(maximum)")
    }
    let versions = [TLSVersion.v1_3, .v1_2].filter { minimum <= $0 && $0 <= maximum }
    let suites = try TLSCipherSuiteSelection.priorityFragment(for: cipherSuites, versions: versions)
    return (["NORMAL", "-VERS-ALL"] + versions.map(\.priorityKeyword) + [TLSKeyExchange.tlsGroups] + (suites.isEmpty ? [] : [suites]))
        .joined(separator: ":")
}

/// ALPN protocol names are 1 to 255 bytes (RFC 7301 §3.1).
func validateALPN(_ protocols: [String]) throws(TLSError) {
    for name in protocols where name.utf8.isEmpty || name.utf8.count > 255 {
        throw .configuration("ALPN protocol names must be 1 to 255 bytes; got \"\(name)\"")
    }
}
