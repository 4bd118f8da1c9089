import BraidIO

/// Turns the kernel's interfaces (an `InterfaceSnapshot`) into the `NWPath` a monitor with
/// given interface constraints reports. Pure, so the rules are tested without a kernel:
///
/// - An interface is live when it is up (IFF_UP) and running (IFF_RUNNING: carrier and
///   operational state up).
/// - The path is satisfied when a default route (0.0.0.0/0 or ::/0, unicast, any table but
///   the local one) goes through a live, allowed interface that has a usable address of the
///   route's family (IPv4; IPv6 global, past duplicate address detection). Routes made of
///   nexthop objects (`ip nexthop`) carry no interface and are not counted.
/// - Loopback is never part of the general path (Apple's isn't either): only a monitor made
///   with `requiredInterfaceType: .loopback` reports it, satisfied while loopback is up with
///   an address.
/// - `availableInterfaces` are the interfaces of those routes, lowest metric first; the first
///   is the preferred one, which `usesInterfaceType`, `isExpensive` and `isConstrained`
///   describe.
enum PathEvaluation {
    /// Linux has no permission reasons; this is what an unstarted monitor reports.
    static let notStarted = NWPath(status: .unsatisfied, unsatisfiedDescription: "the monitor has not started, or not yet read the kernel's interfaces")

    static func path(
        from snapshot: InterfaceSnapshot, required: NWInterface.InterfaceType?, prohibited: [NWInterface.InterfaceType],
        marks: NetworkInterfacePolicy.Marks
    ) -> NWPath {
        let live = snapshot.interfaces.filter { $0.link.isUp && $0.link.isRunning }
        if required == .loopback { return loopbackPath(live: live, marks: marks) }

        func allowed(_ interface: InterfaceSnapshot.Interface) -> Bool {
            let type = interfaceType(interface.kind)
            if type == .loopback { return false }
            if let required { return type == required }
            return !prohibited.contains(type)
        }

        var interfaces: [NWInterface] = []
        var gateways: [NWEndpoint] = []
        var supportsIPv4 = false
        var supportsIPv6 = false
        // Stable: routes of one metric stay in the kernel's order.
        let routes = snapshot.defaultRoutes.enumerated().sorted { ($0.element.priority, $0.offset) < ($1.element.priority, $1.offset) }
        for (_, route) in routes {
            for hop in route.nexthops where hop.flags & nexthopUnusable == 0 {
                guard let interface = live.first(where: { $0.link.index == hop.interfaceIndex }), allowed(interface),
                    interface.addresses.contains(where: { $0.family == route.family && $0.isUsable })
                else { continue }
                if route.family == NetlinkAddress.familyIPv4 { supportsIPv4 = true } else { supportsIPv6 = true }
                let public_ = publicInterface(interface)
                if !interfaces.contains(public_) { interfaces.append(public_) }
                if let gateway = hop.gateway, let endpoint = endpoint(gateway, family: hop.gatewayFamily), !gateways.contains(endpoint) {
                    gateways.append(endpoint)
                }
            }
        }
        guard let preferred = interfaces.first else {
            return NWPath(
                status: .unsatisfied,
                unsatisfiedDescription: unsatisfiedDescription(snapshot: snapshot, live: live, allowed: allowed, required: required, prohibited: prohibited))
        }
        return NWPath(
            status: .satisfied, unsatisfiedDescription: nil, availableInterfaces: interfaces,
            isExpensive: preferred.type == .cellular || marks.isExpensive(preferred.name), isConstrained: marks.isConstrained(preferred.name),
            supportsIPv4: supportsIPv4, supportsIPv6: supportsIPv6, supportsDNS: snapshot.hasNameServer, gateways: gateways)
    }

    /// RTNH_F_DEAD | RTNH_F_LINKDOWN: the kernel will not use this next hop.
    static let nexthopUnusable: UInt8 = 0x1 | 0x10

    private static func loopbackPath(live: [InterfaceSnapshot.Interface], marks: NetworkInterfacePolicy.Marks) -> NWPath {
        let loopbacks = live.filter { $0.kind == .loopback && !$0.addresses.isEmpty }
        guard let preferred = loopbacks.first else {
            return NWPath(status: .unsatisfied, unsatisfiedDescription: "the loopback interface is down or has no address")
        }
        let addresses = loopbacks.flatMap(\.addresses).filter { $0.flags & (NetlinkAddress.flagTentative | NetlinkAddress.flagDADFailed) == 0 }
        return NWPath(
            status: .satisfied, unsatisfiedDescription: nil, availableInterfaces: loopbacks.map(publicInterface),
            isExpensive: marks.isExpensive(preferred.link.name), isConstrained: marks.isConstrained(preferred.link.name),
            supportsIPv4: addresses.contains { $0.family == NetlinkAddress.familyIPv4 },
            supportsIPv6: addresses.contains { $0.family == NetlinkAddress.familyIPv6 }, supportsDNS: false)
    }

    /// The most telling reason: nothing up, nothing allowed, or no route through what is.
    private static func unsatisfiedDescription(
        snapshot: InterfaceSnapshot, live: [InterfaceSnapshot.Interface], allowed: (InterfaceSnapshot.Interface) -> Bool,
        required: NWInterface.InterfaceType?, prohibited: [NWInterface.InterfaceType]
    ) -> String {
        let liveOthers = live.filter { $0.kind != .loopback }
        guard !liveOthers.isEmpty else {
            let down = snapshot.interfaces.filter { $0.kind != .loopback }.map(\.link.name)
            return down.isEmpty ? "no network interface other than loopback" : "no network interface is up and running (\(down.joined(separator: ", ")) down)"
        }
        let usable = liveOthers.filter(allowed)
        guard !usable.isEmpty else {
            let excluded = liveOthers.map { "\($0.link.name) is \(interfaceType($0.kind))" }.joined(separator: ", ")
            let constraint = required.map { "requiredInterfaceType \($0)" } ?? "prohibitedInterfaceTypes [\(prohibited.map { "\($0)" }.joined(separator: ", "))]"
            return "no interface allowed by \(constraint) is up (\(excluded))"
        }
        let names = usable.map { interface in
            interface.addresses.contains(where: \.isUsable) ? interface.link.name : "\(interface.link.name) has no usable address"
        }
        return "no default route through an allowed interface that is up (\(names.joined(separator: ", ")))"
    }

    static func interfaceType(_ kind: LinkKind) -> NWInterface.InterfaceType {
        switch kind {
        case .loopback: .loopback
        case .wifi: .wifi
        case .cellular: .cellular
        case .wiredEthernet: .wiredEthernet
        case .other: .other
        }
    }

    static func publicInterface(_ interface: InterfaceSnapshot.Interface) -> NWInterface {
        NWInterface(type: interfaceType(interface.kind), name: interface.link.name, index: Int(interface.link.index))
    }

    private static func endpoint(_ bytes: [UInt8], family: UInt8) -> NWEndpoint? {
        switch (family, bytes.count) {
        case (NetlinkAddress.familyIPv4, 4): .hostPort(host: .ipv4(IPv4Address(networkOrder: bytes)), port: .any)
        case (NetlinkAddress.familyIPv6, 16): .hostPort(host: .ipv6(IPv6Address(networkOrder: bytes)), port: .any)
        default: nil
        }
    }
}

extension IPv4Address {
    /// From four bytes the caller has counted.
    fileprivate init(networkOrder bytes: [UInt8]) { rawValue = bytes }
}

extension IPv6Address {
    /// From sixteen bytes the caller has counted.
    fileprivate init(networkOrder bytes: [UInt8]) { rawValue = bytes }
}
