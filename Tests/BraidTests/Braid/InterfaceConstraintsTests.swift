import BraidIO
import SwiftGlibc
import Testing

@testable import Braid

/// The rules that choose a constrained connection's interface, on snapshots made by hand.
@Suite struct InterfaceConstraintsTests {
    private static let up: UInt32 = 0x41

    private func interface(_ index: Int32, _ name: String, _ kind: LinkKind, flags: UInt32 = up, addresses: [[UInt8]]) -> InterfaceSnapshot.Interface {
        InterfaceSnapshot.Interface(
            link: NetlinkLink(index: index, name: name, hardwareType: kind == .loopback ? 772 : 1, flags: flags | (kind == .loopback ? 0x8 : 0)),
            kind: kind,
            addresses: addresses.map {
                NetlinkAddress(interfaceIndex: index, family: $0.count == 4 ? 2 : 10, bytes: $0, prefixLength: 24, scope: $0.first == 127 ? 254 : 0, flags: 0x80)
            })
    }

    private func route(_ index: Int32, gateway: [UInt8], metric: UInt32) -> NetlinkRoute {
        NetlinkRoute(
            family: 2, table: 254, type: 1, destinationLength: 0, destination: [], priority: metric,
            nexthops: [.init(interfaceIndex: index, gateway: gateway, gatewayFamily: 2)])
    }

    /// Wired Ethernet (metric 100), cellular (metric 700), a Wi-Fi interface without a default
    /// route but on 10.9.0.0/24, and loopback.
    private var host: InterfaceSnapshot {
        InterfaceSnapshot(
            interfaces: [
                interface(1, "lo", .loopback, addresses: [[127, 0, 0, 1]]),
                interface(2, "eth0", .wiredEthernet, addresses: [[192, 0, 2, 10]]),
                interface(3, "wwan0", .cellular, addresses: [[198, 51, 100, 7]]),
                interface(4, "wlan0", .wifi, addresses: [[10, 9, 0, 1]]),
            ],
            defaultRoutes: [route(3, gateway: [198, 51, 100, 1], metric: 700), route(2, gateway: [192, 0, 2, 1], metric: 100)],
            hasNameServer: true)
    }

    private let remote = SocketAddress(ip: "203.0.113.5", port: 443)!
    private let kernelSource = SocketAddress(ip: "192.0.2.10", port: 0)!

    private func choose(
        _ constraints: InterfaceConstraints, toward remote: SocketAddress? = nil, in snapshot: InterfaceSnapshot? = nil,
        expensive: Set<String> = [], constrained: Set<String> = [], kernelSource: SocketAddress?? = nil
    ) -> InterfaceConstraints.Choice {
        constraints.choose(
            toward: remote ?? self.remote, in: snapshot ?? host, marks: .init(expensive: expensive, constrained: constrained),
            kernelSource: kernelSource ?? self.kernelSource)
    }

    private func name(_ choice: InterfaceConstraints.Choice) -> String {
        switch choice {
        case .interface(let interface): interface.name
        case .none(let reason): "none: \(reason)"
        }
    }

    @Test func theKernelsChoiceComesFirstThenTheDefaultRoutesByMetric() {
        #expect(name(choose(InterfaceConstraints(expensivePathsProhibited: true))) == "eth0")
        #expect(name(choose(InterfaceConstraints(prohibitedInterfaceTypes: [.wiredEthernet]))) == "wwan0")
        #expect(name(choose(InterfaceConstraints(requiredInterfaceType: .cellular))) == "wwan0")
        // The kernel's choice counts even when its route is not a default one.
        #expect(name(choose(InterfaceConstraints(constrainedPathsProhibited: true), kernelSource: SocketAddress(ip: "198.51.100.7", port: 0)!)) == "wwan0")
        // Without a kernel route, the default routes decide.
        #expect(name(choose(InterfaceConstraints(constrainedPathsProhibited: true), kernelSource: .some(nil))) == "eth0")
    }

    @Test func anOnLinkInterfaceCarriesItsSubnet() {
        let neighbour = SocketAddress(ip: "10.9.0.77", port: 9)!
        #expect(name(choose(InterfaceConstraints(requiredInterfaceType: .wifi), toward: neighbour, kernelSource: SocketAddress(ip: "10.9.0.1", port: 0)!)) == "wlan0")
        // Not a route to anywhere else.
        #expect(name(choose(InterfaceConstraints(requiredInterfaceType: .wifi))) == "none: requiredInterfaceType wifi (eth0 is wiredEthernet, wwan0 is cellular)")
    }

    @Test func theReasonNamesTheConstraintAndTheInterfaces() {
        let onlyCellular = InterfaceSnapshot(
            interfaces: [host.interfaces[0], host.interfaces[2]], defaultRoutes: [host.defaultRoutes[0]], hasNameServer: true)
        #expect(
            name(choose(InterfaceConstraints(expensivePathsProhibited: true), in: onlyCellular, kernelSource: SocketAddress(ip: "198.51.100.7", port: 0)!))
                == "none: expensive paths prohibited (wwan0 is expensive)")
        // A marked interface is expensive or constrained too; several constraints are each named.
        #expect(
            name(choose(InterfaceConstraints(expensivePathsProhibited: true, constrainedPathsProhibited: true), constrained: ["eth0"]))
                == "none: constrained paths prohibited (eth0 is constrained); expensive paths prohibited (wwan0 is expensive)")
        #expect(name(choose(InterfaceConstraints(expensivePathsProhibited: true), expensive: ["eth*"])) == "none: expensive paths prohibited (eth0 is expensive, wwan0 is expensive)")
        #expect(
            name(choose(InterfaceConstraints(prohibitedInterfaceTypes: [.wiredEthernet, .cellular])))
                == "none: prohibitedInterfaceTypes [wiredEthernet, cellular] (eth0 is wiredEthernet, wwan0 is cellular)")
        let eth0 = NWInterface(type: .wiredEthernet, name: "eth0", index: 2)
        #expect(name(choose(InterfaceConstraints(prohibitedInterfaces: [eth0]))) == "wwan0")
        #expect(name(choose(InterfaceConstraints(requiredInterface: eth0, expensivePathsProhibited: true), expensive: ["eth0"])) == "none: expensive paths prohibited (eth0 is expensive)")
    }

    @Test func aRequiredInterfaceIsUsedOnlyWhileItCanCarryTheTraffic() {
        let wwan0 = NWInterface(type: .cellular, name: "wwan0", index: 3)
        #expect(name(choose(InterfaceConstraints(requiredInterface: wwan0))) == "wwan0")
        // Compared by name: an interface made again gets a new index.
        #expect(name(choose(InterfaceConstraints(requiredInterface: NWInterface(type: .cellular, name: "wwan0", index: 99)))) == "wwan0")
        var down = host
        down.interfaces[2].link.flags = 0
        down.defaultRoutes.removeFirst()
        #expect(name(choose(InterfaceConstraints(requiredInterface: wwan0), in: down)) == "none: requiredInterface wwan0 (down)")
        let gone = NWInterface(type: .wifi, name: "wlan9", index: 9)
        #expect(name(choose(InterfaceConstraints(requiredInterface: gone))) == "none: requiredInterface wlan9 (no such interface)")
        let wlan0 = NWInterface(type: .wifi, name: "wlan0", index: 4)
        #expect(name(choose(InterfaceConstraints(requiredInterface: wlan0))) == "none: requiredInterface wlan0 (no route to 203.0.113.5 through it)")
    }

    @Test func loopbackTrafficGoesThroughLoopbackOnly() {
        let local = SocketAddress(ip: "127.0.0.1", port: 80)!
        #expect(name(choose(InterfaceConstraints(expensivePathsProhibited: true), toward: local, kernelSource: local)) == "lo")
        #expect(name(choose(InterfaceConstraints(requiredInterfaceType: .wiredEthernet), toward: local, kernelSource: local)) == "none: requiredInterfaceType wiredEthernet (lo is loopback)")
    }

    @Test func aLinkLocalAddressIsReachedThroughItsScopesInterfaceOnly() {
        var neighbour = SocketAddress(ip: "fe80::1", port: 9)!
        neighbour.storage.sin6_scope_id = 3
        let unscoped = SocketAddress(ip: "fe80::1", port: 9)!
        #expect(name(choose(InterfaceConstraints(expensivePathsProhibited: true), toward: unscoped, kernelSource: .some(nil))) == "none: no interface that is up and running has a route to fe80::1")
        #expect(name(choose(InterfaceConstraints(prohibitedInterfaceTypes: [.wiredEthernet]), toward: neighbour, kernelSource: .some(nil))) == "wwan0")
        #expect(
            name(choose(InterfaceConstraints(expensivePathsProhibited: true), toward: neighbour, kernelSource: .some(nil)))
                == "none: expensive paths prohibited (wwan0 is expensive)")
    }

    @Test func nothingUpIsNoRoute() {
        var nothing = host
        for index in nothing.interfaces.indices where index > 0 { nothing.interfaces[index].link.flags = 0 }
        #expect(name(choose(InterfaceConstraints(expensivePathsProhibited: true), in: nothing, kernelSource: .some(nil))) == "none: no interface that is up and running has a route to 203.0.113.5")
        #expect(InterfaceConstraints().isEmpty && !InterfaceConstraints(constrainedPathsProhibited: true).isEmpty)
    }
}
