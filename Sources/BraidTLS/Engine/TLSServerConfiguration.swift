/// A TLS server's configuration; build one `TLSServerContext` from it and share it.
///
/// ```swift
/// var configuration = TLSServerConfiguration(
///     alpn: ["h2"], certificateChainFile: "server.pem", privateKeyFile: "server-key.pem")
/// configuration.peerAuthentication = .required
/// configuration.clientCertificateAuthorityFile = "clients-ca.pem"
/// let context = try TLSServerContext(configuration: configuration)
/// let connection = try TLSConnection.server(context: context)
/// ```
public struct TLSServerConfiguration: Sendable, Hashable {
    /// Application protocols we serve, in our preference order. A client offering none of them
    /// fails with `no_application_protocol`; a client that sends no ALPN at all is accepted.
    /// Empty: ALPN is ignored.
    public var alpn: [String]
    /// Our certificate chain (leaf first) and private key, PEM files.
    public var certificateChainFile: String
    public var privateKeyFile: String
    /// The cipher suites allowed, by IANA number (empty: GnuTLS's defaults); see
    /// `TLSCipherSuiteSelection` for how GnuTLS applies them.
    package var cipherSuites: [UInt16] = []
    /// A chain and key in memory, presented instead of the two files when set.
    package var identityMaterial: TLSIdentityMaterial?
    /// Whether clients are asked for a certificate.
    public var peerAuthentication: TLSPeerAuthentication = .none
    /// The CAs a client certificate must chain to. Nil with `.optional`/`.required`: the chain is
    /// NOT verified and the application must judge `TLSConnection.peerCertificateChain` itself.
    public var clientCertificateAuthorityFile: String? = nil
    /// The lowest and highest TLS versions we negotiate (default 1.2 through 1.3).
    public var minimumVersion: TLSVersion = .v1_2
    public var maximumVersion: TLSVersion = .v1_3
    /// Issue session tickets (TLS 1.3 NewSessionTicket, TLS 1.2 RFC 5077) so clients can resume.
    /// The ticket key is generated per `TLSServerContext`: tickets resume only on the same context.
    public var sessionTicketsEnabled = true
    /// Accept TLS 1.3 0-RTT data from resuming clients. Off by default: early data can be
    /// replayed by an attacker (GnuTLS's anti-replay filter catches replays to this context only),
    /// so enable it only for idempotent requests.
    public var earlyDataEnabled = false
    /// Most 0-RTT bytes a client may send (advertised in our tickets).
    public var maxEarlyDataSize = 16384
    /// How long a TLS 1.3 ticket we issue stays valid, in seconds (its ticket_lifetime, at
    /// least 1); nil keeps GnuTLS's default, 6 hours. GnuTLS also steps its ticket keys every
    /// three lifetimes, which a fleet's key ring assumes to be the default: not with one.
    package var ticketLifetime: UInt32? = nil
    /// The caller judges the client's certificate instead of `clientCertificateAuthorityFile`:
    /// a full handshake stops at `TLSEvent.peerAwaitingVerdict` until `acceptPeer()` or
    /// `rejectPeer()`, and no application data moves before. Needs `peerAuthentication`
    /// `.required`, and neither tickets nor early data (a resumed client shows no certificate).
    package var callerVerifiesPeer = false

    public init(alpn: [String] = [], certificateChainFile: String, privateKeyFile: String) {
        self.alpn = alpn
        self.certificateChainFile = certificateChainFile
        self.privateKeyFile = privateKeyFile
    }

    /// A server presenting a chain and key held in memory.
    package init(alpn: [String] = [], identity: TLSIdentityMaterial) {
        self.init(alpn: alpn, certificateChainFile: "", privateKeyFile: "")
        identityMaterial = identity
    }
}

extension TLSServerConfiguration {
    /// Refuses a `callerVerifiesPeer` the engine could not honour: without a required
    /// certificate there may be nothing to judge, and a resumed or 0-RTT client would move data
    /// before any verdict (`resumes`: the protocol resumes sessions, TLS but not Braid's DTLS).
    func validateCallerVerification(resumes: Bool) throws(TLSError) {
        guard callerVerifiesPeer else { return }
        guard peerAuthentication == .required else {
            throw .configuration("callerVerifiesPeer needs peerAuthentication .required (the caller judges the client's certificate)")
        }
        if resumes && (sessionTicketsEnabled || earlyDataEnabled) {
            throw .configuration("callerVerifiesPeer needs session tickets and early data off (a resumed client is not judged again)")
        }
    }
}
