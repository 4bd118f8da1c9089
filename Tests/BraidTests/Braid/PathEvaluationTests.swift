import BraidIO
import Testing

@testable import Braid

@Suite struct PathEvaluationTests {
    private static let up: UInt32 = 0x41
    private static let v4 = NetlinkAddress.familyIPv4

    private func interface(_ index: Int32, _ name: String, _ kind: LinkKind, flags: UInt32 = up, addresses: [[UInt8]] = []) -> InterfaceSnapshot.Interface {
        InterfaceSnapshot.Interface(
            link: NetlinkLink(index: index, name: name, hardwareType: kind == .loopback ? 772 : 1, flags: flags | (kind == .loopback ? 0x8 : 0)),
            kind: kind,
            addresses: addresses.map {
                NetlinkAddress(interfaceIndex: index, family: $0.count == 4 ? 2 : 10, bytes: $0, prefixLength: 24, scope: $0.first == 127 || $0 == ipv6Loopback ? 254 : 0, flags: 0x80)
            })
    }

    private let ipv6Loopback: [UInt8] = [UInt8](repeating: 0, count: 15) + [1]
    private let ipv6Global: [UInt8] = [0x20, 0x01, 0x0D, 0xB8] + [UInt8](repeating: 0, count: 11) + [1]

    private func route(_ index: Int32, family: UInt8 = v4, gateway: [UInt8]? = [192, 0, 2, 1], metric: UInt32 = 0) -> NetlinkRoute {
        NetlinkRoute(
            family: family, table: 254, type: 1, destinationLength: 0, destination: [], priority: metric,
            nexthops: [.init(interfaceIndex: index, gateway: gateway, gatewayFamily: family)])
    }

    private func path(_ snapshot: InterfaceSnapshot, required: NWInterface.InterfaceType? = nil, prohibited: [NWInterface.InterfaceType] = [], expensive: Set<String> = [], constrained: Set<String> = []) -> NWPath {
        PathEvaluation.path(from: snapshot, required: required, prohibited: prohibited, marks: .init(expensive: expensive, constrained: constrained))
    }

    private var twoUplinks: InterfaceSnapshot {
        InterfaceSnapshot(
            interfaces: [
                interface(1, "lo", .loopback, addresses: [[127, 0, 0, 1], ipv6Loopback]),
                interface(2, "eth0", .wiredEthernet, addresses: [[192, 0, 2, 10], ipv6Global]),
                interface(3, "wwan0", .cellular, addresses: [[198, 51, 100, 7]]),
            ],
            defaultRoutes: [
                route(3, gateway: [198, 51, 100, 1], metric: 700), route(2, metric: 100),
                route(2, family: 10, gateway: [0xFE, 0x80] + [UInt8](repeating: 0, count: 13) + [1], metric: 100),
            ],
            hasNameServer: true)
    }

    @Test func aDefaultRouteThroughALiveInterfaceSatisfies() {
        let result = path(twoUplinks)
        #expect(result.status == .satisfied && result.unsatisfiedDescription == nil && result.unsatisfiedReason == .notAvailable)
        #expect(result.availableInterfaces.map(\.name) == ["eth0", "wwan0"])
        #expect(result.availableInterfaces.map(\.type) == [.wiredEthernet, .cellular])
        #expect(result.availableInterfaces.map(\.index) == [2, 3])
        #expect(result.usesInterfaceType(.wiredEthernet) && !result.usesInterfaceType(.cellular))
        #expect(result.supportsIPv4 && result.supportsIPv6 && result.supportsDNS)
        #expect(!result.isExpensive && !result.isConstrained)
        #expect(result.gateways.map(\.description) == ["192.0.2.1:0", "[fe80::1]:0", "198.51.100.1:0"])
        #expect(result.debugDescription == "satisfied (interface: eth0, wwan0, ipv4, ipv6, dns)")
    }

    @Test func interfaceConstraintsFilterTheInterfaces() {
        let cellular = path(twoUplinks, required: .cellular)
        #expect(cellular.status == .satisfied && cellular.availableInterfaces.map(\.name) == ["wwan0"])
        #expect(cellular.isExpensive && !cellular.supportsIPv6)
        let noCellular = path(twoUplinks, prohibited: [.cellular])
        #expect(noCellular.availableInterfaces.map(\.name) == ["eth0"])
        let wifi = path(twoUplinks, required: .wifi)
        #expect(wifi.status == .unsatisfied && wifi.availableInterfaces.isEmpty && !wifi.supportsDNS)
        #expect(wifi.unsatisfiedDescription?.contains("requiredInterfaceType wifi") == true, "\(wifi)")
        let nothing = path(twoUplinks, prohibited: [.cellular, .wiredEthernet])
        #expect(nothing.status == .unsatisfied)
        #expect(nothing.unsatisfiedDescription?.contains("prohibitedInterfaceTypes") == true, "\(nothing)")
    }

    @Test func loopbackCountsOnlyWhenRequired() {
        let onlyLoopback = InterfaceSnapshot(
            interfaces: [interface(1, "lo", .loopback, addresses: [[127, 0, 0, 1], ipv6Loopback])], defaultRoutes: [], hasNameServer: true)
        let general = path(onlyLoopback)
        #expect(general.status == .unsatisfied && general.availableInterfaces.isEmpty)
        #expect(general.unsatisfiedDescription == "no network interface other than loopback")
        let loopback = path(onlyLoopback, required: .loopback)
        #expect(loopback.status == .satisfied && loopback.availableInterfaces == [NWInterface(type: .loopback, name: "lo", index: 1)])
        #expect(loopback.supportsIPv4 && loopback.supportsIPv6 && loopback.gateways.isEmpty)
        var down = onlyLoopback
        down.interfaces[0].link.flags = 0x8
        #expect(path(down, required: .loopback).status == .unsatisfied)
    }

    @Test func downNoCarrierNoAddressOrNoRouteIsUnsatisfied() {
        var snapshot = twoUplinks
        snapshot.interfaces[1].link.flags = 0x1  // eth0 up without carrier
        snapshot.interfaces[2].link.flags = 0  // wwan0 down
        let down = path(snapshot)
        #expect(down.status == .unsatisfied)
        #expect(down.unsatisfiedDescription == "no network interface is up and running (eth0, wwan0 down)")
        snapshot = twoUplinks
        snapshot.defaultRoutes = []
        #expect(path(snapshot).unsatisfiedDescription == "no default route through an allowed interface that is up (eth0, wwan0)")
        snapshot = twoUplinks
        snapshot.interfaces[1].addresses = []
        snapshot.interfaces[2].addresses = []
        let noAddress = path(snapshot)
        #expect(noAddress.status == .unsatisfied)
        #expect(noAddress.unsatisfiedDescription == "no default route through an allowed interface that is up (eth0 has no usable address, wwan0 has no usable address)")
        // A tentative IPv6 address is not usable yet.
        snapshot = twoUplinks
        snapshot.interfaces[1].addresses.removeFirst()
        snapshot.interfaces[1].addresses[0].flags |= NetlinkAddress.flagTentative
        snapshot.defaultRoutes.removeAll { $0.family == Self.v4 }
        #expect(path(snapshot).status == .unsatisfied)
    }

    @Test func marksMakeThePreferredInterfaceExpensiveOrConstrained() {
        #expect(path(twoUplinks, expensive: ["eth0"]).isExpensive)
        #expect(!path(twoUplinks, expensive: ["wwan0"]).isExpensive)  // not the preferred one
        #expect(path(twoUplinks, constrained: ["eth*"]).isConstrained)
        #expect(!path(twoUplinks, constrained: ["eth"]).isConstrained)
        #expect(path(twoUplinks, expensive: ["eth0"]).debugDescription.hasSuffix("dns, expensive)"))
        #expect(NetworkInterfacePolicy.names(in: "eth1, wwan*,,usb0") == ["eth1", "wwan*", "usb0"])
        #expect(NetworkInterfacePolicy.names(in: nil).isEmpty)
        let fromEnvironment = NetworkInterfacePolicy.marks(from: ["BRAID_EXPENSIVE_INTERFACES": "eth1 usb*", "BRAID_CONSTRAINED_INTERFACES": "wlan1", "PATH": "/bin"])
        #expect(fromEnvironment.expensive == ["eth1", "usb*"] && fromEnvironment.constrained == ["wlan1"])
        #expect(fromEnvironment.isExpensive("usb3") && !fromEnvironment.isExpensive("eth10") && fromEnvironment.isConstrained("wlan1"))
        #expect(path(twoUplinks, expensive: fromEnvironment.expensive).isExpensive == false)
        #expect(path(twoUplinks, expensive: NetworkInterfacePolicy.marks(from: ["BRAID_EXPENSIVE_INTERFACES": "eth0"]).expensive).isExpensive)
    }

    @Test func pathsAreEqualByContent() {
        #expect(path(twoUplinks) == path(twoUplinks))
        #expect(path(twoUplinks) != path(twoUplinks, expensive: ["eth0"]))
        #expect(NWPathMonitor().currentPath.status == .unsatisfied)
    }
}
