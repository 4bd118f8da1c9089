import BraidIO

/// UDP options, and the bottom of a QUIC stack. On its own, `NetworkConnection { UDP() }`
/// sends and receives whole datagrams, and `NetworkListener { UDP() }` yields one connection per
/// remote address.
///
/// ```swift
/// QUIC(alpn: ["echo"]) {
///     UDP { IP().version(.v4) }.batching(.none)
/// }
/// ```
public struct UDP: NetworkProtocol, Hashable {
    /// The IP options under UDP, from `init(_:)` (default `IP()`).
    public private(set) var ip = IP()
    /// Which batching system calls the socket uses (GSO, GRO, sendmmsg/recvmmsg).
    public private(set) var batching: BatchingOptions = .all

    /// Braid: how long a listener's connection may send and receive nothing before it closes
    /// (failing with `NetworkError.idleTimeout`); 30 s by default. Client connections have no
    /// idle timeout.
    public private(set) var inboundIdleTimeout: Duration = .seconds(30)
    /// Listener: how many event loops serve peers (default 1), each with its own socket on the
    /// port (SO_REUSEPORT: the kernel keeps each remote address on one socket).
    public private(set) var serverLoops = 1

    /// UDP over default IP options, with every batching system call on.
    public init() {}

    /// UDP over the IP options the builder returns: `UDP { IP().version(.v6) }`.
    public init(@IPStackBuilder _ lower: () -> IP) { ip = lower() }

    /// Turns segmentation offload, receive offload and multi-message calls on or off
    /// (`.all`, `.none`, or each one).
    public func batching(_ options: BatchingOptions) -> UDP {
        with { $0.batching = options }
    }

    /// Listener: serve peers on this many event loops (one socket each; at most one per core).
    public func serverLoops(_ count: Int) -> UDP {
        with { $0.serverLoops = count }
    }

    /// Braid: sets `inboundIdleTimeout`, after which a listener's idle connection closes.
    public func inboundIdleTimeout(_ timeout: Duration) -> UDP {
        with { $0.inboundIdleTimeout = timeout }
    }
}

extension UDP {
    /// Throws `unsupported` for the IP options a UDP stack (not under QUIC) does not apply yet,
    /// so they are never dropped silently: don't-fragment (UDP datagrams larger than the path
    /// are fragmented by IP) and the hop limit.
    func validateForDatagrams() throws {
        if ip.fragmentationAllowed == false {
            throw NetworkError.unsupported("IP fragmentationDisabled(true) on UDP connections and listeners (their datagrams may be fragmented)")
        }
        if ip.hopLimit != nil {
            throw NetworkError.unsupported("IP hopLimit on UDP connections and listeners")
        }
    }
}

extension UDP: ModifiedCopy {}
