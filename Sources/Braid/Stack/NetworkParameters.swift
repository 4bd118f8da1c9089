/// A stack plus connection-wide options: `NetworkConnection(to:using: .parameters { ... })`.
///
/// ```swift
/// let connection = NetworkConnection(to: .hostPort(host: "::1", port: 4433), using: .parameters {
///     QUIC(alpn: ["echo"])
/// }.localPort(50000))
/// ```
///
/// Of Apple's parameter modifiers, Braid has `localEndpoint`, `localPort`, `serviceClass` and
/// `multipathServiceType`; the interface and path-type constraints are not implemented yet.
public struct NetworkParameters<ApplicationProtocol: NetworkProtocol>: Sendable {
    /// The protocol stack, as its top protocol (for QUIC, the `QUIC` value and its options).
    public let stack: ApplicationProtocol
    /// The local address and port a client connection sends from (nil: the system chooses).
    public private(set) var localEndpoint: NWEndpoint?

    /// What the traffic is, marked in each packet's DSCP field (`NWParameters.ServiceClass`).
    public typealias ServiceClass = NWParameters.ServiceClass
    /// Multipath TCP for TCP and TLS stacks (`NWParameters.MultipathServiceType`).
    public typealias MultipathServiceType = NWParameters.MultipathServiceType

    /// The traffic class, set by `serviceClass(_:)` (default `.bestEffort`).
    public private(set) var serviceClass: ServiceClass = .bestEffort
    /// Multipath TCP, set by `multipathServiceType(_:)` (default `.disabled`).
    public private(set) var multipathServiceType: MultipathServiceType = .disabled

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

    /// Marks the connection's packets with this class's DSCP code point (see `ServiceClass`).
    public func serviceClass(_ serviceClass: ServiceClass) -> NetworkParameters {
        var copy = self
        copy.serviceClass = serviceClass
        return copy
    }

    /// Uses Multipath TCP for TCP and TLS stacks (see `MultipathServiceType`).
    public func multipathServiceType(_ type: MultipathServiceType) -> NetworkParameters {
        var copy = self
        copy.multipathServiceType = type
        return copy
    }
}

/// The parameter values Apple keeps on `NWParameters`, shared by every stack's
/// `NetworkParameters`.
public enum NWParameters {
    /// What the traffic is, marked in each packet's DSCP field (RFC 2474) for routers that
    /// honour it. The marks follow RFC 4594's service classes:
    ///
    /// | class | DSCP |
    /// |---|---|
    /// | `bestEffort` (default) | CS0 (0) |
    /// | `background` | CS1 (8) |
    /// | `responsiveData` | AF21 (18) |
    /// | `interactiveVideo` | AF41 (34) |
    /// | `signaling` | CS5 (40) |
    /// | `interactiveVoice` | EF (46) |
    public enum ServiceClass: Sendable, Hashable {
        case bestEffort, background, interactiveVideo, interactiveVoice, responsiveData, signaling

        /// The DSCP code point marked on the connection's packets.
        public var dscp: UInt8 {
            switch self {
            case .bestEffort: 0
            case .background: 8
            case .responsiveData: 18
            case .interactiveVideo: 34
            case .signaling: 40
            case .interactiveVoice: 46
            }
        }
    }

    /// Multipath TCP (RFC 8684) for TCP and TLS stacks, on Linux's MPTCP. Any mode but
    /// `disabled` opens an MPTCP socket; Linux's path manager then decides how subflows are
    /// used (`ip mptcp endpoint`), so the modes differ only in intent here. Where the kernel
    /// or the peer lacks MPTCP, the connection falls back to plain TCP and its `isMultipath`
    /// says so.
    public enum MultipathServiceType: Sendable, Hashable {
        case disabled, handover, interactive, aggregate
    }
}
