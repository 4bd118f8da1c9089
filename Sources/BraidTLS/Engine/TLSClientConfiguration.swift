/// A TLS client's configuration; build one `TLSClientContext` from it and reuse it.
///
/// ```swift
/// var configuration = TLSClientConfiguration(alpn: ["h2", "http/1.1"])
/// configuration.verification = .init(trustRoots: .certificateAuthorityFile("ca.pem"))
/// let context = try TLSClientContext(configuration: configuration)
/// let connection = try TLSConnection.client(context: context, serverName: "example.com")
/// ```
public struct TLSClientConfiguration: Sendable, Hashable {
    /// Application protocols to offer, in preference order; empty sends no ALPN. A server that
    /// ignores ALPN is accepted (`negotiatedALPN` is then nil); one that answers with a protocol
    /// we did not offer fails the handshake.
    public var alpn: [String]
    /// How the server's certificate is checked: chain and name against the system store by default.
    public var verification = TLSCertificateVerification()
    /// Our certificate chain (leaf first) and key, PEM files, for servers that ask for one (mutual TLS).
    public var certificateChainFile: String? = nil
    public var privateKeyFile: String? = nil
    /// The cipher suites allowed, by IANA number (empty: GnuTLS's defaults); see
    /// `TLSCipherSuiteSelection` for how GnuTLS applies them.
    package var cipherSuites: [UInt16] = []
    /// A chain and key in memory, presented instead of the two files when set.
    package var identityMaterial: TLSIdentityMaterial?
    /// The lowest and highest TLS versions we negotiate (default 1.2 through 1.3).
    public var minimumVersion: TLSVersion = .v1_2
    public var maximumVersion: TLSVersion = .v1_3
    /// Accept session tickets so later connections can resume (`TLSEvent.sessionTicket`).
    public var sessionTicketsEnabled = true
    /// The caller judges the server's certificate instead of `verification`: a full handshake
    /// stops at `TLSEvent.peerAwaitingVerdict` until `acceptPeer()` or `rejectPeer()`, and no
    /// application data moves before (a resumed session was judged when it was first made).
    public var callerVerifiesPeer = false

    public init(alpn: [String] = []) { self.alpn = alpn }
}
