import BraidIO

/// A protocol a connection or listener can run, the top of a stack built with
/// `@ProtocolStackBuilder` (`QUIC`, `TLS`, `TCP`, `UDP`).
public protocol NetworkProtocol: Sendable {}

/// Builds a protocol stack from its top protocol, as in `NetworkConnection(to:) { QUIC(alpn:) }`
/// or `QUIC(alpn:) { UDP { IP().version(.v6) } }`.
@resultBuilder
public enum ProtocolStackBuilder {
    /// A stack is named by its top protocol, which carries the layers below it.
    public static func buildBlock<Top: NetworkProtocol>(_ top: Top) -> Top { top }
}

/// Builds the IP layer under `UDP` or `TCP`.
@resultBuilder
public enum IPStackBuilder {
    /// The IP options, as written.
    public static func buildBlock(_ ip: IP) -> IP { ip }
}

/// IP options. QUIC always sends with don't-fragment set (RFC 9000 §14), which path-MTU
/// discovery needs.
///
/// ```swift
/// QUIC(alpn: ["echo"]) { UDP { IP().version(.v6) } }
/// ```
public struct IP: Sendable, Hashable {
    /// Which address family to use when a name resolves to both: `.any` (the default) tries
    /// both, IPv4 and IPv6 interleaved (RFC 8305); `.v4` and `.v6` use only that family, and
    /// fail with `NetworkError.dnsNameNotFound` if the name has no such address.
    public enum Version: Sendable, Hashable { case any, v4, v6 }

    /// The address family, set by `version(_:)` (default `.any`).
    public private(set) var version: Version = .any
    /// Whether packets may be fragmented, set by `fragmentationDisabled(_:)` (default false:
    /// don't-fragment set).
    public private(set) var fragmentationAllowed = false

    /// Default IP options: either address family, don't-fragment set.
    public init() {}

    /// Restricts the connection to IPv4 or IPv6 addresses.
    public func version(_ version: Version) -> IP {
        var copy = self
        copy.version = version
        return copy
    }

    /// Seed spelling of `version(_:)`.
    public func ipVersion(_ version: Version) -> IP { self.version(version) }

    /// `true` (the default for QUIC) sets DF. QUIC rejects `false`: its packets must not be
    /// fragmented.
    public func fragmentationDisabled(_ disabled: Bool) -> IP {
        var copy = self
        copy.fragmentationAllowed = !disabled
        return copy
    }

    /// Seed spelling: `fragmentationEnabled(false)` is `fragmentationDisabled(true)`.
    public func fragmentationEnabled(_ enabled: Bool) -> IP { fragmentationDisabled(!enabled) }
}

/// UDP options, and the bottom of a QUIC stack. On its own (`NetworkConnection { UDP() }`) it
/// is not implemented yet: such connections fail with `NetworkError.unsupported`.
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

    /// UDP over default IP options, with every batching system call on.
    public init() {}

    /// UDP over the IP options the builder returns: `UDP { IP().version(.v6) }`.
    public init(@IPStackBuilder _ lower: () -> IP) { ip = lower() }

    /// Turns segmentation offload, receive offload and multi-message calls on or off
    /// (`.all`, `.none`, or each one).
    public func batching(_ options: BatchingOptions) -> UDP {
        var copy = self
        copy.batching = options
        return copy
    }
}

/// TCP. Not implemented yet: connections with it fail with `NetworkError.unsupported`.
public struct TCP: NetworkProtocol, Hashable {
    /// TCP. Connections and listeners with it fail with `NetworkError.unsupported`.
    public init() {}
}

/// TLS over TCP. Not implemented yet: connections with it fail with `NetworkError.unsupported`.
public struct TLS: NetworkProtocol, Hashable {
    /// TLS over TCP. Connections and listeners with it fail with `NetworkError.unsupported`.
    public init() {}
}

/// A stack plus connection-wide options: `NetworkConnection(to:using: .parameters { ... })`.
///
/// ```swift
/// let connection = NetworkConnection(to: .hostPort(host: "::1", port: 4433), using: .parameters {
///     QUIC(alpn: ["echo"])
/// }.localPort(50000))
/// ```
///
/// Of Apple's parameter modifiers, Braid has `localEndpoint` and `localPort`; the others
/// (service class, interface and path-type constraints, multipath) are not implemented yet.
public struct NetworkParameters<ApplicationProtocol: NetworkProtocol>: Sendable {
    /// The protocol stack, as its top protocol (for QUIC, the `QUIC` value and its options).
    public let stack: ApplicationProtocol
    /// The local address and port a client connection sends from (nil: the system chooses).
    public private(set) var localEndpoint: NWEndpoint?

    /// Parameters for `stack`, with no local endpoint.
    public init(stack: ApplicationProtocol) { self.stack = stack }

    /// Parameters for the stack the builder returns, as in
    /// `NetworkConnection(to: endpoint, using: .parameters { QUIC(alpn: ["echo"]) })`.
    public static func parameters(@ProtocolStackBuilder _ build: () -> ApplicationProtocol) -> NetworkParameters {
        NetworkParameters(stack: build())
    }

    /// Sends from this local address and port (an IP literal; the port may be `.any`). The
    /// connection then uses only remote addresses of the same family, one at a time.
    public func localEndpoint(_ endpoint: NWEndpoint) -> NetworkParameters {
        var copy = self
        copy.localEndpoint = endpoint
        return copy
    }

    /// Sends from this local port, on the address the system routes from.
    public func localPort(_ port: NWEndpoint.Port) -> NetworkParameters {
        localEndpoint(.hostPort(host: .name(""), port: port))
    }
}
