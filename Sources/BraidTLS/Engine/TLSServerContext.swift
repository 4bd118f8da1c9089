/// Shared, immutable server state built once from a configuration: credentials (with the client
/// CAs), the parsed priorities (`TLSPriority`, one GnuTLS priority cache every session
/// references), the session-ticket key (generated here, so tickets resume only on this
/// context), and the 0-RTT anti-replay context. Share it between connections and threads.
public final class TLSServerContext: Sendable {
    public let configuration: TLSServerConfiguration
    let credentials: TLSCredentials
    let priority: TLSPriority
    let ticketKey: TLSTicketKey?
    /// Keys shared with other servers: tickets are sealed with the minting generation's key and
    /// opened with whichever accepted generation sealed them (nil: `ticketKey`, this context's own).
    let ticketKeyRing: ServerKeyRing?
    let antiReplay: TLSAntiReplay?

    /// Validates the configuration and loads the credentials; throws `TLSError.configuration`.
    public convenience init(configuration: TLSServerConfiguration) throws(TLSError) {
        try self.init(configuration: configuration, ticketKeyRing: nil)
    }

    /// A context whose session tickets come from `ticketKeyRing` when given, so a ticket one
    /// server of a fleet issued resumes on another holding the same keys.
    package init(configuration: TLSServerConfiguration, ticketKeyRing: ServerKeyRing?) throws(TLSError) {
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
        if let lifetime = configuration.ticketLifetime {
            // GnuTLS divides by the lifetime to step its ticket keys.
            guard lifetime >= 1 else { throw .configuration("ticketLifetime must be at least 1 second") }
            guard ticketKeyRing == nil else { throw .configuration("ticketLifetime cannot be set with a fleet's key ring") }
        }
        self.configuration = configuration
        credentials = try TLSCredentials.server(
            certificateChainFile: configuration.certificateChainFile, privateKeyFile: configuration.privateKeyFile,
            identity: configuration.identityMaterial, clientTrust: configuration.clientCertificateAuthorityFile.map { .certificateAuthorityFile($0) })
        ticketKey = configuration.sessionTicketsEnabled && ticketKeyRing == nil ? TLSTicketKey(bytes: try TLSTicketKey.generateBytes()) : nil
        self.ticketKeyRing = configuration.sessionTicketsEnabled ? ticketKeyRing : nil
        antiReplay = configuration.earlyDataEnabled ? try TLSAntiReplay(filter: TLSReplayFilter()) : nil
    }
}
