/// TCP: a reliable, ordered byte stream (`NetworkConnection<TCP>` sends and receives bytes),
/// and the bottom of a TLS stack.
///
/// ```swift
/// let connection = NetworkConnection(to: .hostPort(host: "localhost", port: 7000)) {
///     TCP { IP().version(.v4) }.noDelay(true).keepalive(idleTimeInSeconds: 60, count: 4, intervalInSeconds: 10)
/// }
/// ```
public struct TCP: NetworkProtocol, Hashable {
    /// TCP keep-alive probing (SO_KEEPALIVE with TCP_KEEPIDLE, TCP_KEEPCNT, TCP_KEEPINTVL).
    public struct Keepalive: Sendable, Hashable {
        /// Seconds without traffic before the first probe.
        public var idleTimeInSeconds: UInt32
        /// Unanswered probes before the connection fails.
        public var count: UInt32
        /// Seconds between probes.
        public var intervalInSeconds: UInt32
    }

    /// The IP options under TCP, from `init(_:)` (default `IP()`).
    public private(set) var ip = IP()
    /// Sends small writes at once instead of coalescing them (TCP_NODELAY); default false,
    /// as Apple's. Braid already writes everything queued in one loop pass with one call.
    public private(set) var noDelay = false
    /// Keep-alive probing, set by `keepalive(idleTimeInSeconds:count:intervalInSeconds:)`;
    /// nil (the default) sends none.
    public private(set) var keepalive: Keepalive?
    /// Seconds the connect may take before the attempt fails, set by `connectionTimeout(_:)`;
    /// nil (the default) waits as long as the kernel retries SYNs (about 2 minutes on Linux).
    public private(set) var connectionTimeout: UInt32?
    /// TCP Fast Open (RFC 7413), set by `fastOpenAllowed(_:)`; default false.
    public private(set) var fastOpenAllowed = false
    /// Braid: unread bytes a connection keeps before it stops reading the socket, so a reader
    /// that stops reading stops the peer through TCP's window (default 1 MiB; a receive that
    /// asks for more is served anyway).
    public private(set) var receiveBufferLimit = 1 << 20
    /// Braid: bytes a connection queues unsent before `send` waits (default 1 MiB).
    public private(set) var sendBufferLimit = 1 << 20
    /// Listener: how many event loops (cores) accept and serve connections (default 1).
    public private(set) var serverLoops = 1
    /// Listener: most connections from one IP address (0: no limit); see
    /// `newConnectionLimitPerAddress(_:)`.
    public private(set) var newConnectionLimitPerAddress = 1_000

    /// TCP over default IP options.
    public init() {}

    /// TCP over the IP options the builder returns: `TCP { IP().version(.v6) }`.
    public init(@IPStackBuilder _ lower: () -> IP) { ip = lower() }

    /// Sends small writes at once (TCP_NODELAY) instead of waiting to coalesce them.
    public func noDelay(_ enabled: Bool) -> TCP { with { $0.noDelay = enabled } }

    /// Probes an idle connection: after `idleTimeInSeconds` without traffic, up to `count`
    /// probes `intervalInSeconds` apart; the connection fails if none is answered.
    public func keepalive(idleTimeInSeconds: UInt32, count: UInt32, intervalInSeconds: UInt32) -> TCP {
        with { $0.keepalive = Keepalive(idleTimeInSeconds: idleTimeInSeconds, count: count, intervalInSeconds: intervalInSeconds) }
    }

    /// Fails a connect attempt that has not completed after this many seconds (each address
    /// of a Happy Eyeballs race has its own).
    public func connectionTimeout(_ seconds: UInt32) -> TCP { with { $0.connectionTimeout = seconds } }

    /// TCP Fast Open: a client carries its first bytes (with TLS, the ClientHello) in the SYN
    /// once it holds a cookie from an earlier connection to the server; a listener accepts
    /// such data. Needs the kernel's `net.ipv4.tcp_fastopen` bits (1: client, 2: server).
    public func fastOpenAllowed(_ allowed: Bool) -> TCP { with { $0.fastOpenAllowed = allowed } }

    /// Braid: unread bytes kept before the connection stops reading the socket (default 1 MiB).
    public func receiveBufferLimit(_ bytes: Int) -> TCP { with { $0.receiveBufferLimit = bytes } }

    /// Braid: bytes queued unsent before `send` waits (default 1 MiB).
    public func sendBufferLimit(_ bytes: Int) -> TCP { with { $0.sendBufferLimit = bytes } }

    /// Listener: accept and serve connections on this many event loops (one listening socket
    /// each, SO_REUSEPORT; default 1, at most one per core).
    public func serverLoops(_ count: Int) -> TCP { with { $0.serverLoops = count } }

    /// Listener: most connections from one IP address, any port, IPv6 by /64 prefix (default
    /// 1,000; 0: no limit), so one address cannot take every place of `newConnectionLimit`.
    /// Further connections from that address are reset as soon as they are accepted, as when
    /// the listener is full. Applies to TLS listeners through their TCP options.
    ///
    /// ```swift
    /// let listener = NetworkListener(port: 8443) {
    ///     TLS { TCP().newConnectionLimitPerAddress(50) }
    ///         .identity(certificateChainFile: "server.pem", privateKeyFile: "server-key.pem")
    /// }
    /// ```
    public func newConnectionLimitPerAddress(_ count: Int) -> TCP { with { $0.newConnectionLimitPerAddress = count } }
}

extension TCP: ModifiedCopy {}
