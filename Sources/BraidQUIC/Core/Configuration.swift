/// Congestion controllers available in ngtcp2 0.12.1.
public enum CongestionControl: String, Sendable, CaseIterable {
    case reno, cubic, bbr
}

/// Transport settings and limits shared by clients and servers.
///
/// Defaults suit a bulk-capable connection on a LAN or the Internet: windows auto-tune up to
/// `maxConnectionWindow` / `maxStreamWindow`, 100 concurrent streams per direction, datagrams on.
package struct QUICTransportConfiguration: Sendable, Hashable {
    /// Close the connection after this long without a packet from the peer (0 disables).
    package var idleTimeout: Duration = .seconds(30)
    /// Give up when the handshake has not completed after this long.
    package var handshakeTimeout: Duration = .seconds(10)
    /// Send a PING after this long without traffic, keeping NAT bindings and the idle timer alive.
    package var keepAliveInterval: Duration? = nil
    /// Connection-level receive window the peer may fill before we read (bytes).
    package var initialMaxData: UInt64 = 4 * 1024 * 1024 { didSet { explicitReceiveWindows.insert(.connection) } }
    /// Receive window of a bidirectional stream we open.
    package var initialMaxStreamDataBidirectionalLocal: UInt64 = 1024 * 1024 { didSet { explicitReceiveWindows.insert(.bidirectionalLocal) } }
    /// Receive window of a bidirectional stream the peer opens.
    package var initialMaxStreamDataBidirectionalRemote: UInt64 = 1024 * 1024 {
        didSet { explicitReceiveWindows.insert(.bidirectionalRemote) }
    }
    /// Receive window of a unidirectional stream the peer opens.
    package var initialMaxStreamDataUnidirectional: UInt64 = 1024 * 1024 { didSet { explicitReceiveWindows.insert(.unidirectional) } }
    /// How many bidirectional streams the peer may have open at once.
    package var initialMaxBidirectionalStreams: UInt64 = 100
    /// How many unidirectional streams the peer may have open at once.
    package var initialMaxUnidirectionalStreams: UInt64 = 100
    /// The most unidirectional streams the peer may open over the connection's whole life (or
    /// `initialMaxUnidirectionalStreams`, if larger). ngtcp2 0.12.1 keeps every one it received
    /// until the connection ends, so past this the peer gets no more of their credit, and once
    /// it has consumed the last, the connection closes with NO_ERROR and
    /// `QUICConnection.unidirectionalStreamLimitReason`.
    package var peerUnidirectionalStreamLimit: UInt64 = 1_000
    /// Upper bound for connection-window auto-tuning (0 disables tuning).
    package var maxConnectionWindow: UInt64 = 24 * 1024 * 1024
    /// Upper bound for stream-window auto-tuning (0 disables tuning).
    package var maxStreamWindow: UInt64 = 16 * 1024 * 1024
    /// The receive windows set (any assignment to one of the four marks it); the others take
    /// the role's default (a listener's connections start smaller: `forListenerConnections()`).
    package var explicitReceiveWindows: ReceiveWindows = []
    /// Braid, not ngtcp2, raises the receive windows as the application reads
    /// (`ReceiveWindowLedger`): a listener's connections, so that what a peer may make ngtcp2
    /// hold is what the listener's buffer limit counts, and stops growing at the limit.
    package var tunesReceiveWindows = false

    /// Which receive windows (`explicitReceiveWindows`).
    package struct ReceiveWindows: OptionSet, Sendable, Hashable {
        package let rawValue: UInt8
        package init(rawValue: UInt8) { self.rawValue = rawValue }
        package static let connection = ReceiveWindows(rawValue: 1)
        package static let bidirectionalLocal = ReceiveWindows(rawValue: 2)
        package static let bidirectionalRemote = ReceiveWindows(rawValue: 4)
        package static let unidirectional = ReceiveWindows(rawValue: 8)
    }

    /// A listener's connections start with these receive windows where the application set
    /// none. The listener's buffer limit counts each connection's granted and unread window
    /// (what a peer may make ngtcp2 hold), so a window costs the listener from the moment it is
    /// granted: they start small and grow as the application reads.
    package static let listenerInitialMaxData: UInt64 = 256 * 1024
    package static let listenerInitialMaxStreamData: UInt64 = 64 * 1024
    /// Unidirectional streams' (HTTP/3 keeps three of the client's open for the connection's
    /// life, carrying little).
    package static let listenerInitialMaxStreamDataUnidirectional: UInt64 = 16 * 1024

    /// This configuration for a listener's connections: windows the application did not set
    /// start at the listener's defaults, and Braid tunes them (`tunesReceiveWindows`).
    package func forListenerConnections() -> QUICTransportConfiguration {
        var transport = self
        transport.tunesReceiveWindows = true
        if !explicitReceiveWindows.contains(.connection) { transport.initialMaxData = Self.listenerInitialMaxData }
        if !explicitReceiveWindows.contains(.bidirectionalLocal) {
            transport.initialMaxStreamDataBidirectionalLocal = Self.listenerInitialMaxStreamData
        }
        if !explicitReceiveWindows.contains(.bidirectionalRemote) {
            transport.initialMaxStreamDataBidirectionalRemote = Self.listenerInitialMaxStreamData
        }
        if !explicitReceiveWindows.contains(.unidirectional) {
            transport.initialMaxStreamDataUnidirectional = Self.listenerInitialMaxStreamDataUnidirectional
        }
        transport.explicitReceiveWindows = explicitReceiveWindows
        return transport
    }
    /// Largest DATAGRAM frame we accept (RFC 9221); 0 disables datagrams.
    package var maxDatagramFrameSize: UInt64 = 65535
    /// Largest UDP payload we send. Up to `standardMaxUDPPayloadSize`, packets start at 1,200
    /// and path-MTU discovery raises them (to 1,444 at most with ngtcp2 0.12.1's probes);
    /// above it, the value is taken as what the path carries and used without discovery.
    package var maxUDPPayloadSize: Int = QUICTransportConfiguration.standardMaxUDPPayloadSize
    /// The default maximum UDP payload: a 1,500-byte MTU less IPv6 and UDP headers.
    package static let standardMaxUDPPayloadSize = 1452
    /// Probe for a larger path MTU than `maxUDPPayloadSize` (needs DF set on the socket).
    package var pathMTUDiscovery: Bool = true
    /// Congestion controller.
    package var congestionControl: CongestionControl = .cubic
    /// Per-stream cap on bytes queued but not yet acknowledged; `canSend` turns false beyond it.
    package var streamSendBufferLimit: Int = 1024 * 1024
    /// Cap on bytes queued but not yet acknowledged across all of a connection's streams, so a
    /// peer that grants no flow-control credit on many streams holds at most this much;
    /// `canSend` turns false on every stream beyond it (`sendRoom` says how much fits). Keep it
    /// well above the bandwidth-delay product of the paths you serve.
    package var connectionSendBufferLimit: Int = 16 * 1024 * 1024
    /// Number of connection IDs we let the peer keep for us (spares enable migration).
    package var activeConnectionIDLimit: UInt64 = 7
    /// Write qlog (JSON-SEQ) traces into this directory, one file per connection.
    package var qlogDirectory: String? = nil
    /// Log ngtcp2's internal debug output through the connection's logger at `.trace`.
    package var debugLog: Bool = false

    package init() {}
}

/// Where a client finds the certificate authorities it trusts (shared with TLS over TCP).
package typealias QUICTrustRoots = TLSTrustRoots

/// How a client checks the server's certificate (shared with TLS over TCP).
package typealias QUICCertificateVerification = TLSCertificateVerification

/// A client's configuration; build one `QUICClientContext` from it and reuse it.
package struct QUICClientConfiguration: Sendable, Hashable {
    /// Application protocols to offer, in preference order (ALPN is mandatory in QUIC).
    package var alpn: [String]
    package var transport = QUICTransportConfiguration()
    package var verification = QUICCertificateVerification()
    /// Optional client certificate chain and key (PEM files) for mutual TLS.
    package var certificateChainFile: String? = nil
    package var privateKeyFile: String? = nil

    package init(alpn: [String]) { self.alpn = alpn }
}

/// When the server asks a client to prove its address with a Retry round trip.
package enum QUICRetryPolicy: Sendable, Hashable {
    /// Never send Retry.
    case never
    /// Send Retry to every client that has no valid token.
    case always
    /// Send Retry only under load: to clients without a valid token while at least
    /// `QUICServerConfiguration.retryThreshold` handshakes are half-open, or while the
    /// connection table is full. Retry stops by itself once the half-open handshakes (which a
    /// flood of spoofed Initials leaves behind until the handshake timeout) fall below it.
    case automatic
}

/// A server endpoint's configuration.
package struct QUICServerConfiguration: Sendable {
    /// Application protocols we serve, in our preference order.
    package var alpn: [String]
    /// PEM certificate chain (leaf first) and private key.
    package var certificateChainFile: String
    package var privateKeyFile: String
    /// A chain and key in memory, presented instead of the two files when set.
    package var identityMaterial: TLSIdentityMaterial?
    package var transport = QUICTransportConfiguration()
    package var retry: QUICRetryPolicy = .automatic
    /// Accept 0-RTT data from resuming clients (with a replay filter).
    package var earlyDataEnabled = true
    /// How long a session ticket we issue stays valid, in seconds (its ticket_lifetime, at
    /// least 1); nil keeps GnuTLS's default, 6 hours. GnuTLS also steps its ticket keys every
    /// three lifetimes, which a fleet's key ring assumes to be the default: not with `keyRing`.
    package var ticketLifetime: UInt32? = nil
    /// Maximum simultaneous connections (half-open ones included). At the limit a new client
    /// takes the place of the connection idle longest (no streams, longest without a packet),
    /// which is closed with NO_ERROR and the reason "server busy: idle connection closed to make
    /// room"; with no idle connection, it is refused with CONNECTION_REFUSED and the reason
    /// "server busy: connection limit reached". With `retry == .automatic` a client must pass
    /// Retry before it can take an idle connection's place, so spoofed Initials evict nobody.
    package var maxConnections = 10_000
    /// Maximum connections from one IP address (any port; IPv6: one /64 prefix, the network a
    /// subscriber gets). Counted are connections whose
    /// address is proven: by a Retry or NEW_TOKEN token, or by a completed handshake (so
    /// Initials spoofing someone's address cannot lock that address out). Further clients from
    /// the address are refused with CONNECTION_REFUSED, "server busy: too many connections from
    /// this address". 0 means no limit.
    package var maxConnectionsPerAddress = 1_000
    /// Half-open handshakes (connections whose handshake has not completed) at which
    /// `.automatic` Retry turns on.
    package var retryThreshold = 250
    /// Most half-open handshakes at once, whatever the Retry policy: further clients are
    /// refused with CONNECTION_REFUSED, "server busy: too many handshakes in progress". Each
    /// half-open handshake holds about 110 KiB of heap (ngtcp2's connection and handshake
    /// buffers, about 80 KiB, and GnuTLS's session, about 25 KiB), so the default bounds them
    /// to about 110 MiB, and `retryThreshold` keeps a flood from spoofed addresses to about
    /// 27 MiB.
    package var maxHalfOpenConnections = 1_000
    /// How long NEW_TOKEN tokens and Retry tokens stay valid.
    package var tokenLifetime: Duration = .seconds(3600)
    package var retryTokenLifetime: Duration = .seconds(10)
    /// Secret from which stateless reset tokens and address tokens derive. Servers sharing a
    /// port or restarting should share it; nil picks a random one. Ignored when the endpoint is
    /// given `QUICServerKeys` (which carry their own).
    package var staticSecret: [UInt8]? = nil
    /// How issued connection IDs are laid out (a load balancer's server ID, the loop tag).
    package var connectionIDFormat: QUICConnectionIDFormat = .random
    /// A fleet's shared, rotating keys (tokens, stateless resets, session tickets); when set,
    /// `staticSecret` is ignored.
    package var keyRing: ServerKeyRing? = nil

    package init(alpn: [String], certificateChainFile: String, privateKeyFile: String) {
        self.alpn = alpn
        self.certificateChainFile = certificateChainFile
        self.privateKeyFile = privateKeyFile
    }
}
