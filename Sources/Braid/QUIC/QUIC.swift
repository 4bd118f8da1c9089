import BraidIO
import BraidQUIC
import Foundation
import Synchronization

/// The congestion controllers of `QUIC.congestionControl(_:)`: `.cubic`, `.reno`, `.bbr`.
public typealias CongestionControl = BraidQUIC.CongestionControl

/// QUIC (RFC 9000) with TLS 1.3 and RFC 9221 datagrams: the protocol of a multiplexed
/// connection (`NetworkConnection<QUIC>`) with streams and datagrams.
///
/// ```swift
/// let connection = NetworkConnection(to: .hostPort(host: "example.com", port: 4433)) {
///     QUIC(alpn: ["echo"])
///         .idleTimeout(10_000)
///         .trust(.certificateAuthorities(file: "ca.pem"))
/// }
/// ```
///
/// Server identity and trust are modifiers too: a listener needs
/// `.identity(certificateChainFile:privateKeyFile:)`, and a client verifies the server's
/// certificate against the system store unless told otherwise.
public struct QUIC: NetworkProtocol {
    /// Application protocols, in preference order.
    public private(set) var alpn: [String]
    /// Transport parameters and engine settings, as the modifiers below set them (defaults as in
    /// `QUICTransportConfiguration`: 30 s idle timeout, 10 s handshake timeout, 4 MiB connection
    /// window, 100 streams per direction, datagrams on).
    package private(set) var transport = QUICTransportConfiguration()
    /// The transport settings of a `QUIC()` nobody changed.
    static let defaultTransport = QUICTransportConfiguration()
    /// How a client checks the server's certificate: `trust(_:)`, `pinnedPublicKeys(sha256:)`,
    /// `insecureAcceptAnyCertificate()` (default: the system store, chain and name checks, no pins).
    package private(set) var verification = QUICCertificateVerification()
    /// The name sent in SNI and checked against the certificate; nil uses the endpoint's host.
    public private(set) var serverName: String?
    /// The PEM certificate chain (leaf first) this side presents, set by
    /// `identity(certificateChainFile:privateKeyFile:)`. Required on a listener; nil by default.
    public private(set) var certificateChainFile: String?
    /// The PEM private key of `certificateChainFile`'s leaf certificate; nil by default.
    public private(set) var privateKeyFile: String?
    /// A chain and key in memory (a classic local identity), presented instead of the files.
    private(set) var identityMaterial: TLSIdentityMaterial?
    /// The UDP and IP layers under QUIC, from `init(alpn:_:)` (default: `UDP()` over `IP()`).
    public private(set) var udp = UDP()
    /// Where resumption tickets are kept, set by `sessionCache(_:)`; nil (the default) means
    /// every connection does a full handshake.
    public private(set) var sessionCache: SessionCache?
    /// Listener: accept 0-RTT data from resuming clients (guarded by a replay filter).
    public private(set) var earlyDataEnabled = true
    /// Listener: make every new client prove its address with a Retry round trip first (when
    /// false, Retry is used only under load: see `retry(_:)`).
    public private(set) var retryEnabled = false
    /// Listener: most connections from one IP address (0: no limit); see
    /// `newConnectionLimitPerAddress(_:)`.
    public private(set) var newConnectionLimitPerAddress = 1_000
    /// Listener: half-open handshakes at which Retry turns on by itself; see
    /// `automaticRetryThreshold(_:)`.
    public private(set) var automaticRetryThreshold = 250
    /// Listener: most half-open handshakes at once; see `halfOpenHandshakeLimit(_:)`.
    public private(set) var halfOpenHandshakeLimit = 1_000
    /// Listener: how many event loops (cores) serve connections.
    public private(set) var serverLoops = 1
    /// Listener: how connection IDs are laid out for a load balancer; see `connectionIDFormat(_:)`.
    public internal(set) var connectionIDFormat = ConnectionIDFormat.random
    /// Listener: keys shared with other listeners; see `fleetKeys(_:)`.
    public internal(set) var fleetKeys: FleetKeys?

    /// QUIC offering (on a listener: accepting) these application protocols, in preference order,
    /// over default UDP and IP. ALPN is mandatory in QUIC: an empty list fails the connection or
    /// listener with `NetworkError.invalidConfiguration`.
    public init(alpn: [String]) { self.alpn = alpn }

    /// QUIC over explicitly configured UDP and IP options.
    public init(alpn: [String], @ProtocolStackBuilder _ lower: () -> UDP) {
        self.alpn = alpn
        udp = lower()
    }

    // MARK: Transport parameters (Network.framework names)

    /// Close after this many milliseconds without a packet from the peer (default 30,000; 0
    /// disables). The connection uses the smaller of both sides' values (RFC 9000 §10.1), and
    /// fails with `NetworkError.idleTimeout`.
    public func idleTimeout(_ milliseconds: Int) -> QUIC { with { $0.transport.idleTimeout = .milliseconds(milliseconds) } }
    /// Connection receive window in bytes: how much the peer may send on all streams together
    /// before this side reads (default 4 MiB, auto-tuned up to 24 MiB; a listener's
    /// connections: 256 KiB, raised as the application reads, up to 24 MiB).
    public func initialMaxData(_ bytes: Int) -> QUIC {
        with { $0.transport.initialMaxData = UInt64(bytes) }
    }
    /// Receive window in bytes of each bidirectional stream this side opens (default 1 MiB,
    /// auto-tuned up to 16 MiB; a listener's connections: 64 KiB, raised as the application
    /// reads).
    public func initialMaxStreamDataBidirectionalLocal(_ bytes: Int) -> QUIC {
        with { $0.transport.initialMaxStreamDataBidirectionalLocal = UInt64(bytes) }
    }
    /// Receive window in bytes of each bidirectional stream the peer opens (default 1 MiB,
    /// auto-tuned up to 16 MiB; a listener's connections: 64 KiB, raised as the application
    /// reads, up to 16 MiB).
    public func initialMaxStreamDataBidirectionalRemote(_ bytes: Int) -> QUIC {
        with { $0.transport.initialMaxStreamDataBidirectionalRemote = UInt64(bytes) }
    }
    /// Receive window in bytes of each unidirectional stream the peer opens (default 1 MiB,
    /// auto-tuned up to 16 MiB; a listener's connections: 16 KiB, raised as the application
    /// reads, up to 16 MiB).
    public func initialMaxStreamDataUnidirectional(_ bytes: Int) -> QUIC {
        with { $0.transport.initialMaxStreamDataUnidirectional = UInt64(bytes) }
    }
    /// How many bidirectional streams the peer may have open at once (default 100; 0: none).
    /// Beyond it, the peer's `openStream` waits until one of its streams closes.
    public func initialMaxBidirectionalStreams(_ count: Int) -> QUIC { with { $0.transport.initialMaxBidirectionalStreams = UInt64(count) } }
    /// How many unidirectional streams the peer may have open at once (default 100; 0: none).
    /// Beyond it, the peer's `openStream` waits until one of its streams closes.
    public func initialMaxUnidirectionalStreams(_ count: Int) -> QUIC {
        with { $0.transport.initialMaxUnidirectionalStreams = UInt64(count) }
    }
    /// Largest DATAGRAM frame this side accepts, in bytes (default 65,535). 0 stops the peer
    /// from sending datagrams (its sends throw `NetworkError.datagramsNotSupported`); this
    /// side's own sends depend on the peer's value.
    public func maxDatagramFrameSize(_ bytes: Int) -> QUIC { with { $0.transport.maxDatagramFrameSize = UInt64(bytes) } }
    /// Largest UDP payload this side sends, in bytes (default 1,452). Packets start at 1,200
    /// and path-MTU discovery raises them, to 1,444 at most (ngtcp2 0.12.1's largest probe).
    /// A value above 1,452 is taken as what the path carries (jumbo frames on a datacenter
    /// link, or loopback): packets use it without discovery, within the peer's own maximum,
    /// and on a path that cannot carry them the connection stalls. Values outside
    /// 1200...65527 fail with `NetworkError.invalidConfiguration`.
    public func maxUDPPayloadSize(_ bytes: Int) -> QUIC { with { $0.transport.maxUDPPayloadSize = bytes } }

    // MARK: Braid options

    /// Give up when the handshake has not completed after this long (default 10 seconds), with
    /// `NetworkError.noResponse`.
    public func handshakeTimeout(_ timeout: Duration) -> QUIC { with { $0.transport.handshakeTimeout = timeout } }
    /// Send a PING after this long without traffic, keeping NAT bindings and the idle timer
    /// alive (nil, the default: never).
    public func keepAlive(_ interval: Duration?) -> QUIC { with { $0.transport.keepAliveInterval = interval } }
    /// The congestion controller: `.cubic` (the default), `.reno` or `.bbr`.
    public func congestionControl(_ algorithm: CongestionControl) -> QUIC { with { $0.transport.congestionControl = algorithm } }
    /// The socket's batching system calls (default `.all`); shorthand for the UDP layer's
    /// `batching(_:)`.
    public func batching(_ options: BatchingOptions) -> QUIC { with { $0.udp = $0.udp.batching(options) } }
    /// Cap in bytes on a stream's queued, unacknowledged data (default 1 MiB); `send` waits
    /// beyond it.
    public func streamSendBufferLimit(_ bytes: Int) -> QUIC { with { $0.transport.streamSendBufferLimit = bytes } }
    /// Cap in bytes on a connection's queued, unacknowledged stream data, all streams together
    /// (default 16 MiB): at it, `send` on any of the connection's streams waits until
    /// acknowledgements (or a stream's reset or end) free room, which waiting streams then
    /// get in turn. So a peer that grants no flow-control credit on many streams holds at most
    /// this much of a server; keep it well above the bandwidth-delay product of the paths you
    /// serve. Values below 1 fail with `NetworkError.invalidConfiguration`.
    ///
    /// ```swift
    /// let stack = QUIC(alpn: ["perf"]).connectionSendBufferLimit(64 * 1024 * 1024)
    /// ```
    public func connectionSendBufferLimit(_ bytes: Int) -> QUIC { with { $0.transport.connectionSendBufferLimit = bytes } }
    /// Write qlog (JSON-SEQ) traces into this directory, one file per connection (nil, the
    /// default: none).
    public func qlogDirectory(_ path: String?) -> QUIC { with { $0.transport.qlogDirectory = path } }
    /// Listener: serve connections on this many event loops (one socket each, SO_REUSEPORT;
    /// default 1, at most one per core).
    public func serverLoops(_ count: Int) -> QUIC { with { $0.serverLoops = count } }
    /// Listener: accept 0-RTT data (default true).
    public func earlyDataEnabled(_ enabled: Bool) -> QUIC { with { $0.earlyDataEnabled = enabled } }
    /// Listener: validate every client's address with a Retry first (default false). When
    /// false, the listener still sends Retry by itself under load, to clients without a token:
    /// while `automaticRetryThreshold` handshakes are half-open (a flood of Initials that never
    /// complete), or while the connection table is full; it stops once the flood ends.
    public func retry(_ enabled: Bool) -> QUIC { with { $0.retryEnabled = enabled } }
    /// Listener: most connections from one IP address, any port, IPv6 by /64 prefix (default
    /// 1,000; 0: no limit), so one address cannot take the whole table. Counted are connections
    /// whose address is proven (a completed handshake or a Retry token). Further clients from
    /// that address are refused; they see `NetworkError.serverBusy`. Per server loop, like
    /// `newConnectionLimit`.
    public func newConnectionLimitPerAddress(_ count: Int) -> QUIC { with { $0.newConnectionLimitPerAddress = count } }
    /// Listener: half-open handshakes at which Retry turns on by itself (default 250 per server
    /// loop); see `retry(_:)`.
    public func automaticRetryThreshold(_ count: Int) -> QUIC { with { $0.automaticRetryThreshold = count } }
    /// Listener: most half-open handshakes at once, whatever the Retry setting (default 1,000
    /// per server loop); further clients are refused (`NetworkError.serverBusy`).
    public func halfOpenHandshakeLimit(_ count: Int) -> QUIC { with { $0.halfOpenHandshakeLimit = count } }

    // MARK: TLS

    /// Where a client looks for the authorities that sign server certificates.
    public enum TrustRoots: Sendable, Hashable {
        /// The system store (/etc/ssl/certs).
        case system
        /// Only the PEM certificates in this file.
        case certificateAuthorities(file: String)
    }

    /// Presents a chain and key held in memory (a classic local identity).
    func identity(_ material: TLSIdentityMaterial) -> QUIC { with { $0.identityMaterial = material } }

    /// The certificate chain (leaf first) and private key this side presents, as PEM files.
    /// Required on a listener.
    public func identity(certificateChainFile: String, privateKeyFile: String) -> QUIC {
        with {
            $0.certificateChainFile = certificateChainFile
            $0.privateKeyFile = privateKeyFile
        }
    }

    /// Which certificate authorities a client accepts for the server's certificate (default
    /// `.system`). Chain and name checks apply either way.
    public func trust(_ roots: TrustRoots) -> QUIC {
        with {
            switch roots {
            case .system: $0.verification.trustRoots = .system
            case .certificateAuthorities(let file): $0.verification.trustRoots = .certificateAuthorityFile(file)
            }
        }
    }

    /// Also require the server key to match one of these SHA-256 digests of its
    /// SubjectPublicKeyInfo (DER), on top of the chain and name checks.
    public func pinnedPublicKeys(sha256 digests: [[UInt8]]) -> QUIC { with { $0.verification.pinnedSPKISHA256 = digests } }

    /// Skips certificate chain and name checks. Anyone on the path can then impersonate the
    /// server; only for tests against throwaway certificates. Pins are still enforced.
    public func insecureAcceptAnyCertificate() -> QUIC {
        with { $0.verification.insecureSkipChainAndHostnameVerification = true }
    }

    /// The name sent as SNI and required in the certificate, when it differs from the host.
    public func serverName(_ name: String) -> QUIC { with { $0.serverName = name } }

    /// Keep resumption tickets here, so the next connection to the same server resumes and can
    /// send 0-RTT data (`QUIC.Stream.sendIdempotent`).
    public func sessionCache(_ cache: SessionCache) -> QUIC { with { $0.sessionCache = cache } }

    // MARK: Engine configuration

    func clientConfiguration() throws -> QUICClientConfiguration {
        try validateLowerLayers()
        var configuration = QUICClientConfiguration(alpn: alpn)
        configuration.transport = transport
        configuration.verification = verification
        configuration.certificateChainFile = certificateChainFile
        configuration.privateKeyFile = privateKeyFile
        return configuration
    }

    func serverConfiguration() throws -> QUICServerConfiguration {
        try validateLowerLayers()
        var configuration: QUICServerConfiguration
        if let identityMaterial {
            configuration = QUICServerConfiguration(alpn: alpn, certificateChainFile: "", privateKeyFile: "")
            configuration.identityMaterial = identityMaterial
        } else if let certificateChainFile, let privateKeyFile {
            configuration = QUICServerConfiguration(alpn: alpn, certificateChainFile: certificateChainFile, privateKeyFile: privateKeyFile)
        } else {
            throw NetworkError.invalidConfiguration(
                "a QUIC listener needs a certificate: add .identity(certificateChainFile:privateKeyFile:) (classic API: sec_protocol_options_set_local_identity)")
        }
        configuration.transport = transport
        configuration.earlyDataEnabled = earlyDataEnabled
        configuration.retry = retryEnabled ? .always : .automatic
        guard newConnectionLimitPerAddress >= 0, automaticRetryThreshold >= 0, halfOpenHandshakeLimit > 0 else {
            throw NetworkError.invalidConfiguration(
                "newConnectionLimitPerAddress and automaticRetryThreshold must be 0 or more, halfOpenHandshakeLimit more than 0")
        }
        configuration.maxConnectionsPerAddress = newConnectionLimitPerAddress
        configuration.retryThreshold = automaticRetryThreshold
        configuration.maxHalfOpenConnections = halfOpenHandshakeLimit
        configuration.connectionIDFormat = try validatedConnectionIDFormat()
        configuration.keyRing = fleetKeys?.ring
        return configuration
    }

    private func validateLowerLayers() throws {
        if transport.streamSendBufferLimit < 1 || transport.connectionSendBufferLimit < 1 {
            throw NetworkError.invalidConfiguration("streamSendBufferLimit and connectionSendBufferLimit must be at least 1 byte")
        }
        if udp.ip.fragmentationAllowed == true {
            throw NetworkError.invalidConfiguration("QUIC packets must not be fragmented (RFC 9000 §14); remove fragmentationEnabled(true)")
        }
        if udp.ip.hopLimit != nil {
            throw NetworkError.unsupported("IP hopLimit on QUIC connections (TCP and TLS stacks apply it)")
        }
    }
}

extension QUIC: ModifiedCopy {}
