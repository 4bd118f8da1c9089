/// Shared, immutable server state built once from a configuration: credentials (with the client
/// CAs), the parsed priorities (`TLSPriority`, one GnuTLS priority cache every session
/// references), the session-ticket key (generated here, so tickets resume only on this
/// context), and the 0-RTT anti-replay context. Share it between connections and threads.
public final class TLSServerContext: Sendable {
    public let configuration: TLSServerConfiguration
    let credentials: TLSCredentials
    let priority: TLSPriority
    let ticketKey: TLSTicketKey?
    let antiReplay: TLSAntiReplay?

    /// Validates the configuration and loads the credentials; throws `TLSError.configuration`.
    public init(configuration: TLSServerConfiguration) throws(TLSError) {
        priority = try TLSPriority(tlsPriority(
            minimum: configuration.minimumVersion, maximum: configuration.maximumVersion, cipherSuites: configuration.cipherSuites))
        try validateALPN(configuration.alpn)
        if configuration.earlyDataEnabled {
            guard configuration.sessionTicketsEnabled else {
                throw .configuration("early data needs session tickets (clients send 0-RTT data only when resuming)")
            }
            guard configuration.maximumVersion == .v1_3 else { throw .configuration("early data needs TLS 1.3") }
            guard configuration.maxEarlyDataSize > 0, configuration.maxEarlyDataSize <= Int(UInt32.max) else {
                throw .configuration("maxEarlyDataSize must be between 1 and 2^32-1; got \(configuration.maxEarlyDataSize)")
            }
        }
        if configuration.peerAuthentication == .none, configuration.clientCertificateAuthorityFile != nil {
            throw .configuration("clientCertificateAuthorityFile is set but peerAuthentication is .none")
        }
        try configuration.validateCallerVerification(resumes: true)
        self.configuration = configuration
        credentials = try TLSCredentials.server(
            certificateChainFile: configuration.certificateChainFile, privateKeyFile: configuration.privateKeyFile,
            identity: configuration.identityMaterial, clientTrust: configuration.clientCertificateAuthorityFile.map { .certificateAuthorityFile($0) })
        ticketKey = configuration.sessionTicketsEnabled ? TLSTicketKey(bytes: try TLSTicketKey.generateBytes()) : nil
        antiReplay = configuration.earlyDataEnabled ? try TLSAntiReplay(filter: TLSReplayFilter()) : nil
    }
}
