import BraidIO

#if canImport(Glibc)
import Glibc
#endif

/// A client connection's interface parameters (`NetworkParameters.requiredInterfaceType` and
/// the others), and the rules that choose the interface its sockets are bound to
/// (SO_BINDTODEVICE). Pure, so the rules are tested without a kernel:
///
/// - An interface can carry traffic to a remote address when it is up and running, has a
///   usable address of the remote's family, and the kernel routes the remote through it (the
///   source address the kernel picks is one of its addresses), or a default route of that
///   family goes through it, or the remote is on one of its subnets. Traffic to 127.0.0.0/8
///   and ::1 goes through loopback only, and to an IPv6 link-local address through the
///   interface its scope names (`fe80::1%eth0`) only.
/// - Those are tried in that order (the kernel's own choice first, then default routes by
///   metric, then on-link interfaces), and the first one the constraints allow is chosen.
/// - An interface is not allowed when it is not `requiredInterface` (compared by name), not of
///   `requiredInterfaceType`, of one of `prohibitedInterfaceTypes`, one of
///   `prohibitedInterfaces` (by name), expensive (cellular, or marked in
///   `NetworkInterfacePolicy`) while expensive paths are prohibited, or marked constrained
///   while constrained paths are prohibited.
struct InterfaceConstraints: Sendable, Hashable {
    var requiredInterfaceType: NWInterface.InterfaceType?
    var prohibitedInterfaceTypes: [NWInterface.InterfaceType] = []
    var requiredInterface: NWInterface?
    var prohibitedInterfaces: [NWInterface] = []
    var expensivePathsProhibited = false
    var constrainedPathsProhibited = false

    /// No constraint: the kernel's routing decides, and no interface table is needed.
    var isEmpty: Bool { self == InterfaceConstraints() }

    /// Where a connection to one remote address goes.
    enum Choice: Equatable {
        /// Bind to this interface.
        case interface(NWInterface)
        /// Nothing allowed can carry the traffic: why, naming the constraints and the
        /// interfaces they rule out.
        case none(reason: String)
    }

    /// The interface for traffic to `remote`. `kernelSource` is the source address the kernel
    /// picks toward `remote` without constraints (nil: it has no route).
    func choose(
        toward remote: SocketAddress, in snapshot: InterfaceSnapshot, marks: NetworkInterfacePolicy.Marks, kernelSource: SocketAddress?
    ) -> Choice {
        var candidates = Self.candidates(toward: remote, in: snapshot, kernelSource: kernelSource)
        if let required = requiredInterface {
            candidates.removeAll { $0.link.name != required.name }
            guard !candidates.isEmpty else {
                let live = snapshot.interfaces.filter { $0.link.isUp && $0.link.isRunning }
                return .none(reason: requiredInterfaceReason(required, remote: remote, snapshot: snapshot, live: live))
            }
        }
        var excluded: [(constraint: String, detail: String)] = []
        for candidate in candidates {
            let interface = PathEvaluation.publicInterface(candidate)
            guard let violation = violation(by: interface, marks: marks) else { return .interface(interface) }
            excluded.append(violation)
        }
        guard !excluded.isEmpty else { return .none(reason: "no interface that is up and running has a route to \(remote.ipString)") }
        // Grouped by constraint, in the order they were met.
        var constraints: [String] = []
        var details: [String: [String]] = [:]
        for (constraint, detail) in excluded {
            if details[constraint] == nil { constraints.append(constraint) }
            details[constraint, default: []].append(detail)
        }
        return .none(reason: constraints.map { "\($0) (\(details[$0]!.joined(separator: ", ")))" }.joined(separator: "; "))
    }

    /// Every interface the constraints allow for traffic to `remote`, in the order `choose`
    /// tries them (its choice first).
    func allowedInterfaces(
        toward remote: SocketAddress, in snapshot: InterfaceSnapshot, marks: NetworkInterfacePolicy.Marks, kernelSource: SocketAddress?
    ) -> [NWInterface] {
        Self.candidates(toward: remote, in: snapshot, kernelSource: kernelSource).map(PathEvaluation.publicInterface).filter {
            violation(by: $0, marks: marks) == nil
        }
    }

    /// The interfaces that can carry traffic to `remote`, constraints aside, in the order they
    /// are tried.
    private static func candidates(
        toward remote: SocketAddress, in snapshot: InterfaceSnapshot, kernelSource: SocketAddress?
    ) -> [InterfaceSnapshot.Interface] {
        let family = remote.isIPv6 ? NetlinkAddress.familyIPv6 : NetlinkAddress.familyIPv4
        let target = Self.bytes(of: remote)
        let live = snapshot.interfaces.filter { $0.link.isUp && $0.link.isRunning }
        var candidates: [InterfaceSnapshot.Interface] = []
        func add(_ interface: InterfaceSnapshot.Interface) {
            if !candidates.contains(where: { $0.link.index == interface.link.index }) { candidates.append(interface) }
        }
        if Self.isLoopback(target) {
            for interface in live where interface.kind == .loopback { add(interface) }
        } else if target.count == 16, target[0] == 0xFE, target[1] & 0xC0 == 0x80 {
            // IPv6 link-local: only the interface its scope names can reach it.
            let scope = Self.scopeID(of: remote)
            for interface in live where interface.link.index == scope && scope != 0 { add(interface) }
        } else {
            let usable = live.filter { interface in
                interface.kind != .loopback && interface.addresses.contains { $0.family == family && $0.isUsable }
            }
            if let source = kernelSource.map(Self.bytes(of:)),
                let chosen = usable.first(where: { $0.addresses.contains { $0.bytes == source } })
            {
                add(chosen)
            }
            // Stable: routes of one metric stay in the kernel's order.
            let routes = snapshot.defaultRoutes.enumerated().filter { $0.element.family == family }
                .sorted { ($0.element.priority, $0.offset) < ($1.element.priority, $1.offset) }
            for (_, route) in routes {
                for hop in route.nexthops where hop.flags & PathEvaluation.nexthopUnusable == 0 {
                    if let interface = usable.first(where: { $0.link.index == hop.interfaceIndex }) { add(interface) }
                }
            }
            for interface in usable
            where interface.addresses.contains(where: { $0.family == family && $0.isUsable && Self.onSubnet(target, of: $0) }) {
                add(interface)
            }
        }
        return candidates
    }

    /// The first constraint `interface` breaks, with what about the interface breaks it; nil
    /// when it is allowed.
    func violation(by interface: NWInterface, marks: NetworkInterfacePolicy.Marks) -> (constraint: String, detail: String)? {
        if let required = requiredInterface, interface.name != required.name {
            return ("requiredInterface \(required.name)", "the route goes through \(interface.name)")
        }
        if prohibitedInterfaces.contains(where: { $0.name == interface.name }) {
            return ("prohibitedInterfaces [\(prohibitedInterfaces.map(\.name).joined(separator: ", "))]", "\(interface.name) is prohibited")
        }
        if let required = requiredInterfaceType, interface.type != required {
            return ("requiredInterfaceType \(required)", "\(interface.name) is \(interface.type)")
        }
        if prohibitedInterfaceTypes.contains(interface.type) {
            return (
                "prohibitedInterfaceTypes [\(prohibitedInterfaceTypes.map { "\($0)" }.joined(separator: ", "))]",
                "\(interface.name) is \(interface.type)"
            )
        }
        if expensivePathsProhibited, interface.type == .cellular || marks.isExpensive(interface.name) {
            return ("expensive paths prohibited", "\(interface.name) is expensive")
        }
        if constrainedPathsProhibited, marks.isConstrained(interface.name) {
            return ("constrained paths prohibited", "\(interface.name) is constrained")
        }
        return nil
    }

    /// Why the required interface cannot carry the traffic.
    private func requiredInterfaceReason(
        _ required: NWInterface, remote: SocketAddress, snapshot: InterfaceSnapshot, live: [InterfaceSnapshot.Interface]
    ) -> String {
        let state: String
        if let interface = snapshot.interfaces.first(where: { $0.link.name == required.name }) {
            state = live.contains(interface) ? "no route to \(remote.ipString) through it" : "down"
        } else {
            state = "no such interface"
        }
        return "requiredInterface \(required.name) (\(state))"
    }

    // MARK: Addresses

    /// The address's bytes in network order (4 or 16).
    static func bytes(of address: SocketAddress) -> [UInt8] {
        address.withSockAddr { pointer, _ in
            if address.isIPv6 {
                return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { withUnsafeBytes(of: $0.pointee.sin6_addr) { Array($0) } }
            }
            return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { withUnsafeBytes(of: $0.pointee.sin_addr) { Array($0) } }
        }
    }

    /// An IPv6 address's scope (the interface index of a link-local address; 0: none).
    private static func scopeID(of address: SocketAddress) -> Int32 {
        guard address.isIPv6 else { return 0 }
        return address.withSockAddr { pointer, _ in
            pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { Int32(bitPattern: $0.pointee.sin6_scope_id) }
        }
    }

    static func isLoopback(_ bytes: [UInt8]) -> Bool {
        bytes.count == 4 ? bytes[0] == 127 : bytes == [UInt8](repeating: 0, count: 15) + [1]
    }

    /// Whether `target` is within `address`'s prefix.
    private static func onSubnet(_ target: [UInt8], of address: NetlinkAddress) -> Bool {
        guard address.bytes.count == target.count else { return false }
        var bits = Int(address.prefixLength)
        for (mine, theirs) in zip(address.bytes, target) where bits > 0 {
            let mask: UInt8 = bits >= 8 ? 0xFF : ~(0xFF >> UInt8(bits))
            if mine & mask != theirs & mask { return false }
            bits -= 8
        }
        return true
    }
}
