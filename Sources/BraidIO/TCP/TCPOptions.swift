import CBraidUDP

#if canImport(Glibc)
import Glibc
#endif

/// How a TCP socket is set up: the datapath's form of Network.framework's TCP and IP options.
/// Each is applied with setsockopt when the socket is made (or accepted) and can be read back
/// with getsockopt; nil or the default leaves the kernel's own setting (and costs no call).
///
/// ```swift
/// var options = TCPOptions()
/// options.noDelay = true
/// options.keepAlive = .init(enabled: true, idle: .seconds(30), interval: .seconds(5), count: 4)
/// options.dscp = 46   // EF: IP_TOS / IPV6_TCLASS 184
/// ```
public struct TCPOptions: Sendable, Hashable {
    /// Keep-alive probes on an idle connection (SO_KEEPALIVE; TCP_KEEPIDLE, TCP_KEEPINTVL,
    /// TCP_KEEPCNT). Durations are whole seconds for the kernel, rounded up, at least 1.
    public struct KeepAlive: Sendable, Hashable {
        public var enabled: Bool
        /// Idle time before the first probe (nil: the kernel's, net.ipv4.tcp_keepalive_time).
        public var idle: Duration?
        /// Time between probes (nil: net.ipv4.tcp_keepalive_intvl).
        public var interval: Duration?
        /// Unanswered probes before the connection is dropped (nil: net.ipv4.tcp_keepalive_probes).
        public var count: Int?

        public init(enabled: Bool = false, idle: Duration? = nil, interval: Duration? = nil, count: Int? = nil) {
            self.enabled = enabled
            self.idle = idle
            self.interval = interval
            self.count = count
        }
    }

    /// TCP_NODELAY: send small segments at once instead of coalescing them (Nagle off).
    /// Off by default, as in Network.framework.
    public var noDelay: Bool
    public var keepAlive: KeepAlive
    /// How long establishment may take. Not a socket option: the connection's driver enforces
    /// it with a loop timer (exact, and the same for the SYN and a TLS handshake above). The
    /// kernel's own limit (net.ipv4.tcp_syn_retries, about 2 minutes) still applies beyond it.
    public var connectionTimeout: Duration?
    /// TCP_USER_TIMEOUT (milliseconds): an established connection whose sent data stays
    /// unacknowledged this long is dropped, and the next read or write fails with ETIMEDOUT.
    /// Network.framework's `connectionDropTime`. Kept apart from `connectionTimeout`, which
    /// bounds establishment only.
    public var connectionDropTime: Duration?
    /// TCP Fast Open. A client sets TCP_FASTOPEN_CONNECT: once it holds a cookie for the
    /// server, `connect` sends nothing and the first write carries its bytes in the SYN (the
    /// owner must write first; the data may be replayed, so it must be idempotent). A listener
    /// sets TCP_FASTOPEN with its queue length. Needs net.ipv4.tcp_fastopen bit 0x1 (client)
    /// or 0x2 (server).
    public var fastOpen: Bool
    /// Multipath TCP: the socket is made with IPPROTO_MPTCP, and is plain TCP when the kernel
    /// refuses (no MPTCP, or net.mptcp.enabled=0); `TCPSocket.isMultipath` says which. MPTCP
    /// itself falls back to TCP when the peer does not speak it (`multipathInEffect`).
    public var multipath: Bool
    /// Differentiated services code point (0...63): IP_TOS / IPV6_TCLASS = dscp << 2 (the ECN
    /// bits are TCP's).
    public var dscp: UInt8?
    /// IP_TTL / IPV6_UNICAST_HOPS (1...255).
    public var hopLimit: UInt8?
    /// true: DF on every packet, path MTU discovery (IP_PMTUDISC_DO); false: never DF, the
    /// network may fragment (IP_PMTUDISC_DONT). nil: the kernel's (DF with discovery).
    public var dontFragment: Bool?
    /// SO_SNDBUF / SO_RCVBUF in bytes (the kernel doubles the value it reports, and stops
    /// auto-tuning the buffer once it is set). On a listener, set before `listen`, so the
    /// window scale of every accepted connection fits the buffer.
    public var sendBufferSize: Int?
    public var receiveBufferSize: Int?
    /// The interface a socket is bound to (SO_BINDTODEVICE): a client's packets leave only
    /// through it, a listener accepts only what arrives through it. nil: any.
    public var device: String?

    public init(
        noDelay: Bool = false, keepAlive: KeepAlive = KeepAlive(), connectionTimeout: Duration? = nil,
        connectionDropTime: Duration? = nil, fastOpen: Bool = false, multipath: Bool = false, dscp: UInt8? = nil,
        hopLimit: UInt8? = nil, dontFragment: Bool? = nil, sendBufferSize: Int? = nil, receiveBufferSize: Int? = nil
    ) {
        self.noDelay = noDelay
        self.keepAlive = keepAlive
        self.connectionTimeout = connectionTimeout
        self.connectionDropTime = connectionDropTime
        self.fastOpen = fastOpen
        self.multipath = multipath
        self.dscp = dscp
        self.hopLimit = hopLimit
        self.dontFragment = dontFragment
        self.sendBufferSize = sendBufferSize
        self.receiveBufferSize = receiveBufferSize
    }
}

/// Linux values the Glibc module does not name.
enum LinuxTCP {
    static let ipprotoMPTCP: Int32 = 262
    static let solMPTCP: Int32 = 284
    static let mptcpInfo: Int32 = 1
    /// `struct mptcp_info.mptcpi_flags` bit: the connection fell back to plain TCP.
    static let mptcpInfoFlagFallback: UInt32 = 1
}

extension TCPOptions {
    /// Where the options are being applied: each kind of socket takes a different subset.
    enum Role {
        /// A client socket, before connect.
        case client
        /// A socket handed out by accept (IPv4-mapped peer on an IPv6 socket: `mappedIPv4`).
        case accepted(mappedIPv4: Bool)
        /// A listening socket, before listen: buffers (so the window scale fits) and the fast
        /// open queue.
        case listener(fastOpenQueue: Int)
    }

    /// Applies the options to `fd` (family IPv6 when `isIPv6`). On a multipath socket, an
    /// option the MPTCP layer does not support (EOPNOTSUPP, ENOPROTOOPT) is skipped and named
    /// in the result; any other failure throws. Counts every call in `calls`.
    func apply(to fd: Int32, isIPv6: Bool, multipath: Bool, role: Role, calls: inout UInt64) throws -> [String] {
        var skipped: [String] = []
        func set(_ level: Int32, _ name: Int32, _ value: Int32, _ what: String) throws {
            var value = value
            calls += 1
            guard setsockopt(fd, level, name, &value, socklen_t(MemoryLayout<Int32>.size)) == 0 else {
                let error = errno
                if multipath && (error == EOPNOTSUPP || error == ENOPROTOOPT) {
                    skipped.append(what)
                    return
                }
                throw DatapathError.system("setsockopt(\(what))", error)
            }
        }
        if let size = sendBufferSize { try set(SOL_SOCKET, SO_SNDBUF, Int32(clamping: size), "SO_SNDBUF") }
        if let size = receiveBufferSize { try set(SOL_SOCKET, SO_RCVBUF, Int32(clamping: size), "SO_RCVBUF") }
        if let device {
            // A client before connect, a listener before bind; accepted sockets inherit it.
            switch role {
            case .client, .listener:
                calls += 1
                try SocketDevice.bind(fd, to: device)
            case .accepted:
                break
            }
        }
        if case .listener(let queue) = role {
            if fastOpen { try set(Int32(IPPROTO_TCP), TCP_FASTOPEN, Int32(clamping: max(queue, 1)), "TCP_FASTOPEN") }
            return skipped
        }
        if case .client = role, fastOpen {
            try set(Int32(IPPROTO_TCP), TCP_FASTOPEN_CONNECT, 1, "TCP_FASTOPEN_CONNECT")
        }
        if noDelay { try set(Int32(IPPROTO_TCP), TCP_NODELAY, 1, "TCP_NODELAY") }
        if keepAlive.enabled {
            try set(SOL_SOCKET, SO_KEEPALIVE, 1, "SO_KEEPALIVE")
            if let idle = keepAlive.idle { try set(Int32(IPPROTO_TCP), TCP_KEEPIDLE, Self.seconds(idle), "TCP_KEEPIDLE") }
            if let interval = keepAlive.interval {
                try set(Int32(IPPROTO_TCP), TCP_KEEPINTVL, Self.seconds(interval), "TCP_KEEPINTVL")
            }
            if let count = keepAlive.count { try set(Int32(IPPROTO_TCP), TCP_KEEPCNT, Int32(clamping: max(count, 1)), "TCP_KEEPCNT") }
        }
        if let drop = connectionDropTime {
            let milliseconds = drop.components.seconds * 1000 + drop.components.attoseconds / 1_000_000_000_000_000
            try set(Int32(IPPROTO_TCP), TCP_USER_TIMEOUT, Int32(clamping: max(milliseconds, 1)), "TCP_USER_TIMEOUT")
        }
        // An IPv6 socket whose peer is IPv4-mapped sends IPv4 packets: the IPv4 options govern them.
        var families: [Bool] = [isIPv6]
        if case .accepted(mappedIPv4: true) = role { families.append(false) }
        for v6 in families {
            if let dscp {
                precondition(dscp < 64, "a DSCP is 6 bits")
                if v6 {
                    try set(Int32(IPPROTO_IPV6), IPV6_TCLASS, Int32(dscp) << 2, "IPV6_TCLASS")
                } else {
                    try set(Int32(IPPROTO_IP), IP_TOS, Int32(dscp) << 2, "IP_TOS")
                }
            }
            if let hopLimit {
                precondition(hopLimit > 0, "a hop limit of 0 sends nothing")
                if v6 {
                    try set(Int32(IPPROTO_IPV6), IPV6_UNICAST_HOPS, Int32(hopLimit), "IPV6_UNICAST_HOPS")
                } else {
                    try set(Int32(IPPROTO_IP), IP_TTL, Int32(hopLimit), "IP_TTL")
                }
            }
            if let dontFragment {
                if v6 {
                    try set(
                        Int32(IPPROTO_IPV6), IPV6_MTU_DISCOVER, dontFragment ? IPV6_PMTUDISC_DO : IPV6_PMTUDISC_DONT,
                        "IPV6_MTU_DISCOVER")
                } else {
                    try set(
                        Int32(IPPROTO_IP), IP_MTU_DISCOVER, dontFragment ? IP_PMTUDISC_DO : IP_PMTUDISC_DONT, "IP_MTU_DISCOVER")
                }
            }
        }
        return skipped
    }

    /// Whole seconds, rounded up, at least 1 (the unit of the keep-alive options).
    private static func seconds(_ duration: Duration) -> Int32 {
        let (seconds, attoseconds) = duration.components
        return Int32(clamping: max(seconds + (attoseconds > 0 ? 1 : 0), 1))
    }
}
