/// What a path monitor knows about the network at one moment, with Network.framework's shape:
/// whether traffic can flow (`status`), over which interfaces, and what they offer.
///
/// Two paths are equal when everything they report is equal (Apple compares paths the same
/// way, by content), so a monitor hands out a new path only when something in it changed.
///
/// ```swift
/// let path = NWPathMonitor().currentPath
/// if path.status == .satisfied, !path.isExpensive {
///     print("online over", path.availableInterfaces.map(\.name))
/// } else if path.status == .unsatisfied {
///     print(path.unsatisfiedDescription ?? "")
/// }
/// ```
public struct NWPath: Equatable, Sendable, CustomDebugStringConvertible {
    /// Whether traffic can flow.
    public enum Status: Hashable, Sendable {
        /// An allowed interface is up, has an address and a default route.
        case satisfied
        /// No allowed interface can carry traffic now.
        case unsatisfied
        /// An interface needs to be brought up by a connection first (Apple: VPN on demand).
        /// Braid never reports it on Linux.
        case requiresConnection
    }

    /// Apple's reasons for an unsatisfied path. Apple's are about app permissions, which Linux
    /// does not have, so Braid always reports `.notAvailable` and says why in
    /// `unsatisfiedDescription`.
    public enum UnsatisfiedReason: Hashable, Sendable {
        /// No reason is given (Braid: see `unsatisfiedDescription`).
        case notAvailable
        /// The user turned off cellular data for the app (Apple only).
        case cellularDenied
        /// The user turned off Wi-Fi for the app (Apple only).
        case wifiDenied
        /// The user has not allowed local network access (Apple only).
        case localNetworkDenied
        /// A required VPN is not active (Apple only).
        case vpnInactive
    }

    /// Whether traffic can flow.
    public let status: Status
    /// Why the path is unsatisfied: `.notAvailable` on Linux (see `unsatisfiedDescription`).
    public let unsatisfiedReason: UnsatisfiedReason
    /// Braid: why the path is unsatisfied, in a sentence that names the interfaces and the
    /// monitor's constraints ("no default route through an allowed interface: eth0 is down");
    /// nil when satisfied.
    public let unsatisfiedDescription: String?
    /// The interfaces that can carry the path's traffic, preferred first: each up, with an
    /// address and a default route, ordered by the routes' metrics. A connection's path: the
    /// interface it uses.
    public let availableInterfaces: [NWInterface]
    /// The preferred interface is cellular, or marked expensive (`NetworkInterfacePolicy`).
    public let isExpensive: Bool
    /// The preferred interface is marked constrained (`NetworkInterfacePolicy`); Linux has no
    /// system-wide Low Data Mode.
    public let isConstrained: Bool
    /// An IPv4 default route goes through an available interface with an IPv4 address.
    public let supportsIPv4: Bool
    /// An IPv6 default route goes through an available interface with a global IPv6 address.
    public let supportsIPv6: Bool
    /// The path is satisfied and /etc/resolv.conf names a DNS server (read when the path
    /// changes).
    public let supportsDNS: Bool
    /// The default routes' gateways, in `availableInterfaces` order (port 0); none on a
    /// connection's path.
    public let gateways: [NWEndpoint]
    /// A connection's local endpoint (`NetworkConnection.onPathUpdate`); nil for a monitor's
    /// path.
    public let localEndpoint: NWEndpoint?
    /// A connection's remote endpoint (`NetworkConnection.onPathUpdate`); nil for a monitor's
    /// path.
    public let remoteEndpoint: NWEndpoint?

    init(
        status: Status, unsatisfiedDescription: String?, availableInterfaces: [NWInterface] = [], isExpensive: Bool = false,
        isConstrained: Bool = false, supportsIPv4: Bool = false, supportsIPv6: Bool = false, supportsDNS: Bool = false,
        gateways: [NWEndpoint] = [], localEndpoint: NWEndpoint? = nil, remoteEndpoint: NWEndpoint? = nil
    ) {
        self.localEndpoint = localEndpoint
        self.remoteEndpoint = remoteEndpoint
        self.status = status
        unsatisfiedReason = .notAvailable
        self.unsatisfiedDescription = status == .satisfied ? nil : unsatisfiedDescription
        self.availableInterfaces = availableInterfaces
        self.isExpensive = isExpensive
        self.isConstrained = isConstrained
        self.supportsIPv4 = supportsIPv4
        self.supportsIPv6 = supportsIPv6
        self.supportsDNS = supportsDNS
        self.gateways = gateways
    }

    /// Whether the path's preferred interface (the first available one) is of `type`.
    public func usesInterfaceType(_ type: NWInterface.InterfaceType) -> Bool {
        availableInterfaces.first?.type == type
    }

    /// `satisfied (interface: eth0, ipv4, ipv6, dns)` or `unsatisfied (why)`.
    public var debugDescription: String {
        switch status {
        case .satisfied:
            var parts = ["interface: " + availableInterfaces.map(\.name).joined(separator: ", ")]
            if supportsIPv4 { parts.append("ipv4") }
            if supportsIPv6 { parts.append("ipv6") }
            if supportsDNS { parts.append("dns") }
            if isExpensive { parts.append("expensive") }
            if isConstrained { parts.append("constrained") }
            return "satisfied (\(parts.joined(separator: ", ")))"
        case .unsatisfied:
            return "unsatisfied (\(unsatisfiedDescription ?? "no reason given"))"
        case .requiresConnection:
            return "requiresConnection"
        }
    }
}
