import BraidCore
import Foundation

/// The parameters of a classic-API connection or listener (`NWConnection`, `NWListener`), as
/// Network.framework's class: a protocol stack (`defaultProtocolStack`) and the path
/// preferences. The new API's `NetworkParameters` shares its nested types (`ServiceClass`,
/// `MultipathServiceType`).
///
/// ```swift
/// let parameters = NWParameters(tls: NWProtocolTLS.Options(), tcp: NWProtocolTCP.Options())
/// parameters.prohibitExpensivePaths = true
/// let connection = NWConnection(host: "example.com", port: 443, using: parameters)
/// ```
///
/// TLS over TCP, TCP, UDP, DTLS over UDP and QUIC (`quic(alpn:)`: one stream per
/// `NWConnection`, as Apple's) run on `NWConnection` and `NWListener`.
/// `includePeerToPeer` is accepted and has no effect on Linux (no AWDL), and
/// `allowLocalEndpointReuse` is accepted: Braid's listening sockets always set SO_REUSEADDR.
public final class NWParameters: Sendable, CustomDebugStringConvertible {
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

    /// The protocols of a connection, top down: application protocols (TLS), then the
    /// transport (TCP, UDP, QUIC), then IP.
    public final class ProtocolStack: Sendable {
        private let protocols: Locked<(application: [NWProtocolOptions], transport: NWProtocolOptions?)>
        /// The IP options under the transport (one object: changing it changes the stack).
        public let internetProtocol: NWProtocolOptions?

        init(application: [NWProtocolOptions], transport: NWProtocolOptions?, internet: NWProtocolIP.Options = NWProtocolIP.Options()) {
            protocols = Locked((application, transport))
            internetProtocol = internet
        }

        /// The protocols above the transport, the topmost first.
        public var applicationProtocols: [NWProtocolOptions] {
            get { protocols.withLock { $0.application } }
            set { protocols.withLock { $0.application = newValue } }
        }

        /// The transport protocol (TCP, UDP or QUIC options); nil: none yet.
        public var transportProtocol: NWProtocolOptions? {
            get { protocols.withLock { $0.transport } }
            set { protocols.withLock { $0.transport = newValue } }
        }
    }

    private struct Preferences: Sendable {
        var requiredInterfaceType: NWInterface.InterfaceType?
        var prohibitedInterfaceTypes: [NWInterface.InterfaceType]?
        var requiredInterface: NWInterface?
        var prohibitedInterfaces: [NWInterface]?
        var prohibitExpensivePaths = false
        var prohibitConstrainedPaths = false
        var serviceClass: ServiceClass = .bestEffort
        var multipathServiceType: MultipathServiceType = .disabled
        var allowFastOpen = false
        var allowLocalEndpointReuse = false
        var requiredLocalEndpoint: NWEndpoint?
        var includePeerToPeer = false
    }

    private let preferences = Locked(Preferences())
    /// The protocols connections made with these parameters run.
    public let defaultProtocolStack: ProtocolStack

    /// Parameters with no protocols: set `defaultProtocolStack`'s transport before use.
    public init() {
        defaultProtocolStack = ProtocolStack(application: [], transport: nil)
    }

    init(stack: ProtocolStack) {
        defaultProtocolStack = stack
    }

    /// TLS (when `tls` is not nil) over TCP.
    public convenience init(tls: NWProtocolTLS.Options?, tcp: NWProtocolTCP.Options = NWProtocolTCP.Options()) {
        self.init(stack: ProtocolStack(application: tls.map { [$0] } ?? [], transport: tcp))
    }

    /// QUIC with these options (see `NWProtocolQUIC.Options`).
    public convenience init(quic: NWProtocolQUIC.Options) {
        self.init(stack: ProtocolStack(application: [], transport: quic))
    }

    /// TLS over TCP with default options.
    public static var tls: NWParameters { NWParameters(tls: NWProtocolTLS.Options()) }
    /// TCP with default options.
    public static var tcp: NWParameters { NWParameters(tls: nil) }
    /// UDP with default options.
    public static var udp: NWParameters { NWParameters(stack: ProtocolStack(application: [], transport: NWProtocolUDP.Options())) }
    /// QUIC offering these application protocols.
    public static func quic(alpn: [String]) -> NWParameters { NWParameters(quic: NWProtocolQUIC.Options(alpn: alpn)) }

    /// The only interface type connections may use (nil: any).
    public var requiredInterfaceType: NWInterface.InterfaceType? {
        get { preferences.withLock { $0.requiredInterfaceType } }
        set { preferences.withLock { $0.requiredInterfaceType = newValue } }
    }
    /// Interface types connections may not use.
    public var prohibitedInterfaceTypes: [NWInterface.InterfaceType]? {
        get { preferences.withLock { $0.prohibitedInterfaceTypes } }
        set { preferences.withLock { $0.prohibitedInterfaceTypes = newValue } }
    }
    /// The only interface connections may use (nil: any).
    public var requiredInterface: NWInterface? {
        get { preferences.withLock { $0.requiredInterface } }
        set { preferences.withLock { $0.requiredInterface = newValue } }
    }
    /// Interfaces connections may not use.
    public var prohibitedInterfaces: [NWInterface]? {
        get { preferences.withLock { $0.prohibitedInterfaces } }
        set { preferences.withLock { $0.prohibitedInterfaces = newValue } }
    }
    /// Connections may not use expensive interfaces (see `NetworkInterfacePolicy`).
    public var prohibitExpensivePaths: Bool {
        get { preferences.withLock { $0.prohibitExpensivePaths } }
        set { preferences.withLock { $0.prohibitExpensivePaths = newValue } }
    }
    /// Connections may not use constrained interfaces (see `NetworkInterfacePolicy`).
    public var prohibitConstrainedPaths: Bool {
        get { preferences.withLock { $0.prohibitConstrainedPaths } }
        set { preferences.withLock { $0.prohibitConstrainedPaths = newValue } }
    }
    /// What the traffic is, marked in each packet's DSCP field.
    public var serviceClass: ServiceClass {
        get { preferences.withLock { $0.serviceClass } }
        set { preferences.withLock { $0.serviceClass = newValue } }
    }
    /// Multipath TCP for TCP and TLS.
    public var multipathServiceType: MultipathServiceType {
        get { preferences.withLock { $0.multipathServiceType } }
        set { preferences.withLock { $0.multipathServiceType = newValue } }
    }
    /// TCP Fast Open for TCP and TLS connections (the first bytes ride in the SYN once the
    /// server's cookie is known).
    public var allowFastOpen: Bool {
        get { preferences.withLock { $0.allowFastOpen } }
        set { preferences.withLock { $0.allowFastOpen = newValue } }
    }
    /// Accepted for source compatibility: Braid's listening sockets always set SO_REUSEADDR.
    public var allowLocalEndpointReuse: Bool {
        get { preferences.withLock { $0.allowLocalEndpointReuse } }
        set { preferences.withLock { $0.allowLocalEndpointReuse = newValue } }
    }
    /// The local address and port connections send from (nil: the system chooses).
    public var requiredLocalEndpoint: NWEndpoint? {
        get { preferences.withLock { $0.requiredLocalEndpoint } }
        set { preferences.withLock { $0.requiredLocalEndpoint = newValue } }
    }
    /// Accepted for source compatibility; no effect on Linux, which has no peer-to-peer link.
    public var includePeerToPeer: Bool {
        get { preferences.withLock { $0.includePeerToPeer } }
        set { preferences.withLock { $0.includePeerToPeer = newValue } }
    }

    /// An independent copy: the same preferences and a copy of each protocol's options.
    public func copy() -> NWParameters {
        let stack = defaultProtocolStack
        let ip = (stack.internetProtocol?.copy() as? NWProtocolIP.Options) ?? NWProtocolIP.Options()
        let copied = NWParameters(
            stack: ProtocolStack(
                application: stack.applicationProtocols.map { $0.copy() }, transport: stack.transportProtocol?.copy(), internet: ip))
        let values = preferences.withLock { $0 }
        copied.preferences.withLock { $0 = values }
        return copied
    }

    public var debugDescription: String {
        let stack = defaultProtocolStack
        let names = stack.applicationProtocols.map { "\(type(of: $0))" } + [stack.transportProtocol.map { "\(type(of: $0))" } ?? "no transport"]
        return "NWParameters(" + names.joined(separator: " over ") + ")"
    }

    // MARK: To the new API's stacks

    /// The stack these parameters describe, as the new API's stack value (its binding).
    func stackBinding() throws -> any StackBinding {
        let stack = defaultProtocolStack
        guard let transport = stack.transportProtocol else {
            throw NetworkError.invalidConfiguration("the parameters have no transport protocol (use .tcp, .tls, .udp, or set defaultProtocolStack.transportProtocol)")
        }
        let ip = try (stack.internetProtocol as? NWProtocolIP.Options)?.ip ?? IP()
        var binding = try transport.transportStack(ip: ip, parameters: self)
        for options in stack.applicationProtocols.reversed() { binding = try options.stack(over: binding, parameters: self) }
        return binding
    }

    /// The new API's parameters for `stack` with these preferences.
    func networkParameters<Stack: NetworkProtocol>(stack: Stack) -> NetworkParameters<Stack> {
        let values = preferences.withLock { $0 }
        var parameters = NetworkParameters(stack: stack)
            .serviceClass(values.serviceClass)
            .multipathServiceType(values.multipathServiceType)
            .expensivePathsProhibited(values.prohibitExpensivePaths)
            .constrainedPathsProhibited(values.prohibitConstrainedPaths)
            .fastOpenAllowed(values.allowFastOpen)
        if let local = values.requiredLocalEndpoint { parameters = parameters.localEndpoint(local) }
        if let type = values.requiredInterfaceType { parameters = parameters.requiredInterfaceType(type) }
        if let types = values.prohibitedInterfaceTypes { parameters = parameters.prohibitedInterfaceTypes(types) }
        if let interface = values.requiredInterface { parameters = parameters.requiredInterface(interface) }
        if let interfaces = values.prohibitedInterfaces { parameters = parameters.prohibitedInterfaces(interfaces) }
        return parameters
    }
}
