/// A stack plus connection-wide options: `NetworkConnection(to:using: .parameters { ... })`.
///
/// ```swift
/// let connection = NetworkConnection(to: .hostPort(host: "::1", port: 4433), using: .parameters {
///     QUIC(alpn: ["echo"])
/// }.localPort(50000))
/// ```
///
/// Of Apple's parameter modifiers, Braid has `localEndpoint`, `localPort`, `serviceClass`, `fastOpenAllowed`,
/// `multipathServiceType` and the interface constraints: `requiredInterfaceType`,
/// `prohibitedInterfaceTypes`, `requiredInterface`, `prohibitedInterfaces`,
/// `expensivePathsProhibited` and `constrainedPathsProhibited`.
///
/// The interface constraints hold for client connections of every stack (QUIC, TLS, TCP, UDP):
/// the connection chooses an allowed interface that routes to the remote address (see
/// `requiredInterfaceType(_:)`) and binds its sockets to it (SO_BINDTODEVICE), so its
/// packets leave only through it. When no allowed interface can carry the traffic, the
/// connection is `waiting(.noAllowedInterface(reason:))`, the reason naming the constraint
/// ("expensive paths prohibited (wwan0 is expensive)"), and connects as soon as the kernel
/// reports an interface, address or route change (or `NetworkInterfacePolicy`'s marks change)
/// that allows one. They need the kernel's interface list (rtnetlink): on a loop that cannot
/// watch it the connection fails with `NetworkError.unsupported`. A listener takes
/// `requiredInterface` (its sockets are bound to it, so it accepts only what arrives through
/// it); the other constraints on a listener are `NetworkError.unsupported` for now.
///
/// ```swift
/// let metered = NetworkConnection(to: .hostPort(host: "example.com", port: 443), using: .parameters {
///     TLS()
/// }.expensivePathsProhibited(true).prohibitedInterfaceTypes([.cellular]))
/// ```
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
    /// TCP Fast Open for TCP and TLS stacks, set by `fastOpenAllowed(_:)` (default false).
    public private(set) var fastOpenAllowed = false

    /// The only interface type the connection may use (`requiredInterfaceType(_:)`); nil: any.
    public private(set) var requiredInterfaceType: NWInterface.InterfaceType?
    /// Interface types the connection may not use (`prohibitedInterfaceTypes(_:)`).
    public private(set) var prohibitedInterfaceTypes: [NWInterface.InterfaceType] = []
    /// The only interface the connection may use (`requiredInterface(_:)`); nil: any.
    public private(set) var requiredInterface: NWInterface?
    /// Interfaces the connection may not use (`prohibitedInterfaces(_:)`).
    public private(set) var prohibitedInterfaces: [NWInterface] = []
    /// The connection may not use expensive interfaces (`expensivePathsProhibited(_:)`).
    public private(set) var expensivePathsProhibited = false
    /// The connection may not use constrained interfaces (`constrainedPathsProhibited(_:)`).
    public private(set) var constrainedPathsProhibited = false

    /// Parameters for `stack`, with no local endpoint.
    public init(stack: ApplicationProtocol) { self.stack = stack }

    /// Parameters for the stack the builder returns, as in
    /// `NetworkConnection(to: endpoint, using: .parameters { QUIC(alpn: ["echo"]) })`.
    public static func parameters(@ProtocolStackBuilder _ build: () -> ApplicationProtocol) -> NetworkParameters {
        NetworkParameters(stack: build())
    }

    /// Sends from this local address and port (an IP literal; the port may be `.any`). The
    /// connection then uses only remote addresses of the same family, one at a time. A
    /// listener's parameters say with it where it listens, as `NetworkListener(for:)` does
    /// (an address and port, or `.unix(path:)`).
    public func localEndpoint(_ endpoint: NWEndpoint) -> NetworkParameters {
        with { $0.localEndpoint = endpoint }
    }

    /// The same parameters without a local endpoint (a listener's, once it took it as where
    /// it listens).
    var withoutLocalEndpoint: NetworkParameters { with { $0.localEndpoint = nil } }

    /// Sends from this local port, on the address the system routes from (a listener: listens
    /// on it, on every address).
    public func localPort(_ port: NWEndpoint.Port) -> NetworkParameters {
        localEndpoint(.hostPort(host: .name(""), port: port))
    }

    /// Marks the connection's packets with this class's DSCP code point (see `ServiceClass`): every
    /// stack, QUIC and UDP with each packet's ECN bits beside it. A listener marks what it sends.
    public func serviceClass(_ serviceClass: ServiceClass) -> NetworkParameters {
        with { $0.serviceClass = serviceClass }
    }

    /// Uses Multipath TCP for TCP and TLS stacks (see `MultipathServiceType`).
    public func multipathServiceType(_ type: MultipathServiceType) -> NetworkParameters {
        with { $0.multipathServiceType = type }
    }

    /// Allows TCP Fast Open on TCP and TLS stacks, as `TCP.fastOpenAllowed(_:)` does: once the
    /// server's cookie is known, a client's first bytes (with TLS, its ClientHello) ride in the
    /// SYN; a listener accepts them. QUIC and UDP have no use for it (QUIC's 0-RTT comes with a
    /// session cache).
    ///
    /// ```swift
    /// let quick = NetworkConnection(to: .hostPort(host: "example.com", port: 443), using: .parameters {
    ///     TLS()
    /// }.fastOpenAllowed(true))
    /// ```
    public func fastOpenAllowed(_ allowed: Bool) -> NetworkParameters {
        with { $0.fastOpenAllowed = allowed }
    }

    /// Uses only interfaces of this type (on Linux the type comes from the kernel: see
    /// `NWPathMonitor`). Veth pairs, bridges and tunnels are `.other`.
    ///
    /// ```swift
    /// let wired = NetworkConnection(to: .hostPort(host: "10.0.0.2", port: 9000), using: .parameters {
    ///     UDP()
    /// }.requiredInterfaceType(.wiredEthernet))
    /// ```
    public func requiredInterfaceType(_ type: NWInterface.InterfaceType) -> NetworkParameters {
        with { $0.requiredInterfaceType = type }
    }

    /// Never uses interfaces of these types.
    public func prohibitedInterfaceTypes(_ types: [NWInterface.InterfaceType]) -> NetworkParameters {
        with { $0.prohibitedInterfaceTypes = types }
    }

    /// Uses only this interface (one a path monitor reported; compared by name, so it still
    /// holds if the interface is made again). The connection waits while it cannot carry the
    /// traffic: down, gone, or without a route to the remote address.
    ///
    /// ```swift
    /// let monitor = NWPathMonitor()
    /// if let uplink = monitor.currentPath.availableInterfaces.first {
    ///     let pinned = NetworkConnection(to: .hostPort(host: "example.com", port: 443), using: .parameters {
    ///         QUIC(alpn: ["h3"])
    ///     }.requiredInterface(uplink))
    ///     pinned.start()
    /// }
    /// ```
    public func requiredInterface(_ interface: NWInterface) -> NetworkParameters {
        with { $0.requiredInterface = interface }
    }

    /// Never uses these interfaces (compared by name).
    public func prohibitedInterfaces(_ interfaces: [NWInterface]) -> NetworkParameters {
        with { $0.prohibitedInterfaces = interfaces }
    }

    /// Never uses expensive interfaces: cellular ones, and those marked in
    /// `NetworkInterfacePolicy` (`BRAID_EXPENSIVE_INTERFACES`).
    public func expensivePathsProhibited(_ prohibited: Bool) -> NetworkParameters {
        with { $0.expensivePathsProhibited = prohibited }
    }

    /// Never uses constrained interfaces: those marked in `NetworkInterfacePolicy`
    /// (`BRAID_CONSTRAINED_INTERFACES`; Linux has no system-wide Low Data Mode).
    public func constrainedPathsProhibited(_ prohibited: Bool) -> NetworkParameters {
        with { $0.constrainedPathsProhibited = prohibited }
    }

    /// The interface constraints together, for establishment.
    var interfaceConstraints: InterfaceConstraints {
        InterfaceConstraints(
            requiredInterfaceType: requiredInterfaceType, prohibitedInterfaceTypes: prohibitedInterfaceTypes,
            requiredInterface: requiredInterface, prohibitedInterfaces: prohibitedInterfaces,
            expensivePathsProhibited: expensivePathsProhibited, constrainedPathsProhibited: constrainedPathsProhibited)
    }
}
