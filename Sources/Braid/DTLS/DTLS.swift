import BraidIO
import BraidTLS

/// DTLS 1.2 over UDP (RFC 6347): TLS's security for datagrams. Each send is one message in one
/// record in one datagram, each receive one message, as with `UDP()`; nothing is retransmitted
/// or reordered after the handshake. GnuTLS 3.7, under Braid, has no DTLS 1.3.
///
/// The server's certificate is verified like TLS's, against the system store and the name
/// connected to, unless `trust`, `pinnedPublicKeys` or `insecureAcceptAnyCertificate` say
/// otherwise.
///
/// ```swift
/// let connection = NetworkConnection(to: .hostPort(host: "sensor.example", port: 4433)) {
///     DTLS { UDP() }.alpn(["coap"])
/// }
/// try await connection.send(Data("reading".utf8))
/// let (reply, _) = try await connection.receive()
/// ```
public struct DTLS: NetworkProtocol {
    /// How a DTLS endpoint authenticates its peer. Apple's defaults: `none` for clients,
    /// `required` for servers.
    public enum PeerAuthentication: Sendable, Hashable {
        /// Do not ask the peer for a certificate. Braid's clients still verify the server's
        /// certificate (turn that off with `insecureAcceptAnyCertificate()`).
        case none
        /// Ask for the peer's certificate; proceed without one, but check one presented.
        case optional
        /// Always ask, and fail without one.
        case required
    }

    /// Where trusted certificate authorities come from (the system store by default).
    public typealias TrustRoots = QUIC.TrustRoots

    /// The UDP options below DTLS.
    public private(set) var udp = UDP()
    /// Application protocols offered (client) or accepted (server) with ALPN; empty sends none.
    public private(set) var alpn: [String] = []
    package private(set) var verification = TLSCertificateVerification()
    /// The application's own check of the server, replacing `verification` (a classic verify
    /// block); nil: Braid's checks.
    private(set) var peerVerifier: TLSPeerVerifier?
    /// A chain and key in memory (a classic local identity), presented instead of the files.
    private(set) var identityMaterial: TLSIdentityMaterial?
    /// The name sent as SNI and checked against the server's certificate (default: the host
    /// connected to).
    public private(set) var serverName: String?
    /// Our certificate chain and private key, PEM files (a server's identity, or a client's for
    /// servers that ask).
    public private(set) var certificateChainFile: String?
    public private(set) var privateKeyFile: String?
    /// Whether to ask the peer for a certificate; nil: Apple's default for the role.
    public private(set) var peerAuthentication: PeerAuthentication?
    /// The largest datagram sent, IP and UDP headers excluded (default 1,200 bytes, which any
    /// IPv6 path carries). The largest message is smaller, by DTLS's record header and the
    /// cipher's nonce and tag (37 bytes under AES-GCM, 29 under ChaCha20-Poly1305); a larger
    /// one fails its send with `NetworkError.datagramTooLarge`.
    public private(set) var maximumDatagramSize = 1200
    /// Braid: how long the handshake may take, lost flights sent again and a verify block's
    /// wait included (default 60 s), before the connection fails with `NetworkError.noResponse`.
    public private(set) var handshakeTimeout: Duration = .seconds(60)

    /// Braid: the most messages a connection keeps unread; past it the oldest are dropped
    /// (counted in `NetworkConnection.droppedDatagramCount`).
    public static let unreadMessageLimit = DatagramChannel.inboxBacklog
    /// Braid: the most datagrams a connection keeps while its handshake waits for a verify
    /// block's verdict; past it they are dropped (and counted) until the verdict comes.
    public static let verdictQueueLimit = DTLSConnection.inboxLimit

    /// DTLS over default UDP options.
    public init() {}

    /// DTLS over the UDP options the builder returns: `DTLS { UDP() }`.
    public init(@ProtocolStackBuilder _ lower: () -> UDP) { udp = lower() }

    /// Sets the application protocols (ALPN), in preference order.
    public func alpn(_ protocols: [String]) -> DTLS { with { $0.alpn = protocols } }

    /// Sets our certificate chain and private key (PEM files).
    public func identity(certificateChainFile: String, privateKeyFile: String) -> DTLS {
        with {
            $0.certificateChainFile = certificateChainFile
            $0.privateKeyFile = privateKeyFile
        }
    }

    /// Sets the authorities the peer's certificate must chain to.
    public func trust(_ roots: TrustRoots) -> DTLS {
        with {
            switch roots {
            case .system: $0.verification.trustRoots = .system
            case .certificateAuthorities(let file): $0.verification.trustRoots = .certificateAuthorityFile(file)
            }
        }
    }

    /// Also requires the leaf's public key to match one of these SHA-256 SPKI digests.
    public func pinnedPublicKeys(sha256 digests: [[UInt8]]) -> DTLS { with { $0.verification.pinnedSPKISHA256 = digests } }

    /// Accepts any server certificate (pins still apply). Only for tests.
    public func insecureAcceptAnyCertificate() -> DTLS { with { $0.verification.insecureSkipChainAndHostnameVerification = true } }

    /// Presents a chain and key held in memory (a classic local identity).
    func identity(_ material: TLSIdentityMaterial) -> DTLS { with { $0.identityMaterial = material } }

    /// The server is judged by `verifier` instead of Braid's checks.
    func verified(by verifier: TLSPeerVerifier) -> DTLS { with { $0.peerVerifier = verifier } }

    /// Sets the name sent as SNI and checked against the certificate.
    public func serverName(_ name: String) -> DTLS { with { $0.serverName = name } }

    /// Sets whether the peer is asked for a certificate.
    public func peerAuthentication(_ mode: PeerAuthentication) -> DTLS { with { $0.peerAuthentication = mode } }

    /// Braid: sets how long the handshake may take (default 60 s; more than a day is refused as
    /// an invalid configuration).
    public func handshakeTimeout(_ timeout: Duration) -> DTLS { with { $0.handshakeTimeout = timeout } }

    /// Braid: sets `maximumDatagramSize`, the path MTU less the IP and UDP headers.
    public func maximumDatagramSize(_ size: Int) -> DTLS { with { $0.maximumDatagramSize = size } }
}

extension DTLS: ModifiedCopy {}
