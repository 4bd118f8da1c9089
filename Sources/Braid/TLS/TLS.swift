import BraidTLS

/// TLS and DTLS protocol versions, as Apple spells them (`tls_protocol_version_t`). A DTLS
/// connection reports `.DTLSv12` (Braid's DTLS speaks DTLS 1.2 only); TLS over TCP takes and
/// reports the TLS versions.
public enum TLSProtocolVersion: Sendable, Hashable, Comparable {
    /// TLS 1.2 (RFC 5246).
    case TLSv12
    /// TLS 1.3 (RFC 8446).
    case TLSv13
    /// DTLS 1.0 (RFC 4347): accepted as a DTLS minimum, never negotiated.
    case DTLSv10
    /// DTLS 1.2 (RFC 6347).
    case DTLSv12

    /// Whether this is a DTLS version.
    var isDTLS: Bool { self == .DTLSv10 || self == .DTLSv12 }
}

/// Apple's name for the TLS protocol versions.
public typealias tls_protocol_version_t = TLSProtocolVersion

/// TLS over TCP: an encrypted, authenticated byte stream (`NetworkConnection<TLS>` sends and
/// receives bytes). `TLS()` alone runs over `TCP()` and `IP()`.
///
/// ```swift
/// let connection = NetworkConnection(to: .hostPort(host: "localhost", port: 4443)) {
///     TLS { TCP { IP().fragmentationEnabled(false) } }
///         .alpn(["echo"])
///         .trust(.certificateAuthorities(file: "ca.pem"))
/// }
/// ```
///
/// A client verifies the server's certificate chain and name against the system store by
/// default; `trust(_:)`, `pinnedPublicKeys(sha256:)` and the loudly named
/// `insecureAcceptAnyCertificate()` change that, as for `QUIC`. A listener needs
/// `identity(certificateChainFile:privateKeyFile:)`.
public struct TLS: NetworkProtocol {
    /// Whether a listener asks clients for a certificate (mutual TLS).
    public enum PeerAuthentication: Sendable, Hashable {
        /// No client certificate is asked for (the listener's default).
        case none
        /// A client certificate is asked for and verified if presented.
        case optional
        /// A client without a valid certificate is refused.
        case required
    }

    /// Where a client looks for the authorities that sign server certificates (on a
    /// listener: client certificates).
    public typealias TrustRoots = QUIC.TrustRoots
    /// Resumption tickets per server, shared with QUIC's.
    public typealias SessionCache = QUIC.SessionCache

    /// The TCP and IP layers under TLS, from `init(_:)` (default `TCP()` over `IP()`).
    public private(set) var tcp = TCP()
    /// Application protocols offered (on a listener: accepted, in preference order); empty
    /// (the default) sends no ALPN.
    public private(set) var alpn: [String] = []
    /// How the peer's certificate is checked (default: the system store, chain and name
    /// checks, no pins).
    package private(set) var verification = TLSCertificateVerification()
    /// The application's own check of the server, replacing `verification` (a classic verify
    /// block); nil: Braid's checks.
    private(set) var peerVerifier: TLSPeerVerifier?
    /// The name sent in SNI and required in the certificate; nil uses the endpoint's host.
    public private(set) var serverName: String?
    /// The PEM certificate chain (leaf first) this side presents; required on a listener.
    public private(set) var certificateChainFile: String?
    /// The PEM private key of `certificateChainFile`'s leaf certificate.
    public private(set) var privateKeyFile: String?
    /// A chain and key in memory (a classic local identity), presented instead of the files.
    private(set) var identityMaterial: TLSIdentityMaterial?
    /// The oldest version negotiated (default TLS 1.2).
    public private(set) var minimumVersion: TLSProtocolVersion = .TLSv12
    /// The newest version negotiated (default TLS 1.3).
    public private(set) var maximumVersion: TLSProtocolVersion = .TLSv13
    /// The cipher suites allowed (empty, the default: GnuTLS's secure defaults).
    public private(set) var cipherSuites: [tls_ciphersuite_t] = []
    /// Listener: whether clients must present a certificate (default `.none`).
    public private(set) var peerAuthentication: PeerAuthentication = .none
    /// Session tickets for resumption (default true).
    public private(set) var ticketsEnabled = true
    /// TLS 1.3 early data (0-RTT) on resumed connections (default false: replayable).
    public private(set) var earlyDataEnabled = false
    /// Where a client keeps tickets so later connections resume; nil: none.
    public private(set) var sessionCache: SessionCache?
    /// Listener: secrets shared with other listeners for session tickets (nil: this listener's own).
    public private(set) var fleetKeys: QUIC.FleetKeys?
    /// Braid: how long the TLS handshake may take once TCP is connected (default 10 s), before
    /// the connection fails with `NetworkError.noResponse`.
    public private(set) var handshakeTimeout: Duration = .seconds(10)

    /// TLS over `TCP()` and `IP()`.
    public init() {}

    /// TLS over the TCP options the builder returns: `TLS { TCP { IP() }.noDelay(true) }`.
    public init(@ProtocolStackBuilder _ lower: () -> TCP) { tcp = lower() }

    /// Offers (on a listener: accepts) these application protocols, in preference order. A
    /// peer that speaks none of them is refused with `NetworkError.alpnMismatch`.
    public func alpn(_ protocols: [String]) -> TLS { with { $0.alpn = protocols } }

    /// The certificate chain (leaf first) and private key this side presents, as PEM files:
    /// required on a listener; on a client, the certificate for mutual TLS.
    public func identity(certificateChainFile: String, privateKeyFile: String) -> TLS {
        with {
            $0.certificateChainFile = certificateChainFile
            $0.privateKeyFile = privateKeyFile
        }
    }

    /// Which certificate authorities sign the certificates this side accepts (default
    /// `.system`): the server's on a client, clients' on a listener.
    public func trust(_ roots: TrustRoots) -> TLS {
        with {
            switch roots {
            case .system: $0.verification.trustRoots = .system
            case .certificateAuthorities(let file): $0.verification.trustRoots = .certificateAuthorityFile(file)
            }
        }
    }

    /// Also require the peer's key to match one of these SHA-256 digests of its
    /// SubjectPublicKeyInfo (DER), on top of the chain and name checks.
    public func pinnedPublicKeys(sha256 digests: [[UInt8]]) -> TLS { with { $0.verification.pinnedSPKISHA256 = digests } }

    /// Skips certificate chain and name checks. Anyone on the path can then impersonate the
    /// server; only for tests against throwaway certificates. Pins are still enforced.
    public func insecureAcceptAnyCertificate() -> TLS { with { $0.verification.insecureSkipChainAndHostnameVerification = true } }

    /// Presents a chain and key held in memory (a classic local identity).
    func identity(_ material: TLSIdentityMaterial) -> TLS { with { $0.identityMaterial = material } }

    /// The server is judged by `verifier` instead of Braid's checks.
    func verified(by verifier: TLSPeerVerifier) -> TLS { with { $0.peerVerifier = verifier } }

    /// The name sent as SNI and required in the certificate, when it differs from the host.
    public func serverName(_ name: String) -> TLS { with { $0.serverName = name } }

    /// The oldest TLS version to negotiate.
    public func minimumVersion(_ version: TLSProtocolVersion) -> TLS { with { $0.minimumVersion = version } }

    /// The newest TLS version to negotiate.
    public func maximumVersion(_ version: TLSProtocolVersion) -> TLS { with { $0.maximumVersion = version } }

    /// Allows only these cipher suites. GnuTLS picks a cipher, a MAC and a key exchange apart,
    /// so what is allowed is any combination of the listed suites' parts; a suite GnuTLS does
    /// not offer (3DES, the SHA-384 CBC suites) fails the connection with `invalidConfiguration`.
    public func cipherSuites(_ suites: [tls_ciphersuite_t]) -> TLS { with { $0.cipherSuites = suites } }

    /// Listener: whether clients must present a certificate, verified against `trust(_:)`.
    public func peerAuthentication(_ mode: PeerAuthentication) -> TLS { with { $0.peerAuthentication = mode } }

    /// Session tickets for resumption (default true).
    public func ticketsEnabled(_ enabled: Bool) -> TLS { with { $0.ticketsEnabled = enabled } }

    /// Listener: seal session tickets with keys shared by the other listeners holding `keys`
    /// (the same `QUIC.FleetKeys` a QUIC listener takes), so a client resumes on whichever
    /// server of a fleet it reaches, within the keys' rotation and overlap. Network.framework
    /// has no such option.
    ///
    /// ```swift
    /// let keys = try QUIC.FleetKeys(contentsOfFile: "/etc/braid/fleet-keys")
    /// let listener = NetworkListener(port: 8443) {
    ///     TLS().identity(certificateChainFile: "server.pem", privateKeyFile: "server-key.pem").fleetKeys(keys)
    /// }
    /// ```
    public func fleetKeys(_ keys: QUIC.FleetKeys) -> TLS { with { $0.fleetKeys = keys } }

    /// TLS 1.3 early data: a resumed client's `sendIdempotent` bytes may travel with the
    /// ClientHello, and a listener accepts them (default false). Early data can be replayed
    /// by an attacker: send only requests that are safe to repeat.
    public func earlyDataEnabled(_ enabled: Bool) -> TLS { with { $0.earlyDataEnabled = enabled } }

    /// Braid: how long the TLS handshake may take once TCP is connected (default 10 s; zero,
    /// negative or more than a day is refused as an invalid configuration).
    public func handshakeTimeout(_ timeout: Duration) -> TLS { with { $0.handshakeTimeout = timeout } }

    /// Keep resumption tickets here, so the next connection to the same server resumes.
    public func sessionCache(_ cache: SessionCache) -> TLS { with { $0.sessionCache = cache } }
}

extension TLS: ModifiedCopy {}
