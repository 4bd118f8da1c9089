/// IP options, the bottom of every stack: `UDP { IP() }`, `TCP { IP() }`.
///
/// ```swift
/// let quic = QUIC(alpn: ["echo"]) { UDP { IP().version(.v6) } }
/// let tls = TLS { TCP { IP().fragmentationEnabled(false).hopLimit(32) } }
/// ```
///
/// QUIC always sends with don't-fragment set (RFC 9000 §14), which its path-MTU discovery
/// needs; TCP leaves the kernel's path-MTU discovery on unless told otherwise.
public struct IP: Sendable, Hashable {
    /// Which address family to use when a name resolves to both: `.any` (the default) tries
    /// both, IPv4 and IPv6 interleaved (RFC 8305); `.v4` and `.v6` use only that family, and
    /// fail with `NetworkError.dnsNameNotFound` if the name has no such address.
    public enum Version: Sendable, Hashable { case any, v4, v6 }

    /// The address family, set by `version(_:)` (default `.any`).
    public private(set) var version: Version = .any
    /// Whether packets may be fragmented, set by `fragmentationDisabled(_:)`; nil (the
    /// default) leaves the protocol's own choice: don't-fragment for QUIC, the kernel's
    /// path-MTU discovery (which sets don't-fragment too) for TCP.
    public private(set) var fragmentationAllowed: Bool?
    /// The hop limit (IPv4 TTL, IPv6 unicast hops) of sent packets, set by `hopLimit(_:)`;
    /// nil (the default) keeps the system's (64 on Linux).
    public private(set) var hopLimit: UInt8?

    /// Default IP options: either address family, the protocol's fragmentation rule, the
    /// system's hop limit.
    public init() {}

    /// Restricts the connection to IPv4 or IPv6 addresses.
    public func version(_ version: Version) -> IP {
        with { $0.version = version }
    }

    /// Seed spelling of `version(_:)`.
    public func ipVersion(_ version: Version) -> IP { self.version(version) }

    /// `true` sets don't-fragment (IP_PMTUDISC_DO: oversized sends fail instead of being
    /// fragmented); `false` lets routers fragment (IP_PMTUDISC_DONT). QUIC rejects `false`:
    /// its packets must not be fragmented.
    public func fragmentationDisabled(_ disabled: Bool) -> IP {
        with { $0.fragmentationAllowed = !disabled }
    }

    /// Seed spelling: `fragmentationEnabled(false)` is `fragmentationDisabled(true)`.
    public func fragmentationEnabled(_ enabled: Bool) -> IP { fragmentationDisabled(!enabled) }

    /// Sends packets with this hop limit (IPv4 TTL or IPv6 unicast hop limit, 1...255).
    public func hopLimit(_ limit: UInt8) -> IP {
        with { $0.hopLimit = limit }
    }
}
