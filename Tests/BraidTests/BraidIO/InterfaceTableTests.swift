import BraidIO
import Testing

@Suite struct InterfaceTableTests {
    private let eth0 = NetlinkLink(index: 2, name: "eth0", hardwareType: 1, flags: 0x41)
    private let address = NetlinkAddress(interfaceIndex: 2, family: 2, bytes: [192, 0, 2, 10], prefixLength: 24, scope: 0, flags: 0x80)
    private func route(_ interfaceIndex: Int32, gateway: [UInt8] = [192, 0, 2, 1], priority: UInt32 = 0) -> NetlinkRoute {
        NetlinkRoute(
            family: 2, table: 254, type: 1, destinationLength: 0, destination: [], priority: priority,
            nexthops: [.init(interfaceIndex: interfaceIndex, gateway: gateway, gatewayFamily: 2)])
    }

    @Test func keepsLinksAddressesAndOnlyDefaultRoutes() {
        var table = InterfaceTable()
        let changed1 = table.apply(.link(eth0))
        #expect(changed1)
        let changed2 = table.apply(.link(eth0))
        #expect(!changed2)
        let changed3 = table.apply(.address(address))
        #expect(changed3)
        let changed4 = table.apply(.address(address))
        #expect(!changed4)
        let changed5 = table.apply(.route(route(2), replacing: false))
        #expect(changed5)
        let changed6 = table.apply(.route(route(2), replacing: false))
        #expect(!changed6)
        var subnet = route(2)
        subnet.destinationLength = 24
        subnet.destination = [192, 0, 2, 0]
        let changed7 = table.apply(.route(subnet, replacing: false))
        #expect(!changed7)
        var local = route(2)
        local.table = 255
        let changed8 = table.apply(.route(local, replacing: false))
        #expect(!changed8)
        #expect(table.links.count == 1 && table.addresses[2]?.count == 1 && table.defaultRoutes == [route(2)])

        // NLM_F_REPLACE takes the place of the route with the same key.
        let changed9 = table.apply(.route(route(2, gateway: [192, 0, 2, 254]), replacing: true))
        #expect(changed9)
        #expect(table.defaultRoutes == [route(2, gateway: [192, 0, 2, 254])])
        let changed10 = table.apply(.routeRemoved(route(2, gateway: [192, 0, 2, 254])))
        #expect(changed10)
        #expect(table.defaultRoutes.isEmpty)
    }

    @Test func followsTheKernelsSilentFlushes() {
        var table = InterfaceTable()
        table.apply(.link(eth0))
        table.apply(.address(address))
        table.apply(.route(route(2), replacing: false))
        // Administratively down: the kernel flushes the routes through the link, silently.
        var down = eth0
        down.flags = 0
        let changed11 = table.apply(.link(down))
        #expect(changed11)
        #expect(table.defaultRoutes.isEmpty)
        // Carrier lost (up, not running): routes stay.
        var noCarrier = eth0
        noCarrier.flags = 0x1
        table.apply(.link(noCarrier))
        table.apply(.route(route(2), replacing: false))
        let changed12 = table.apply(.link(noCarrier))
        #expect(!changed12)
        #expect(table.defaultRoutes.count == 1)
        // The last IPv4 address goes: so do IPv4 routes through the link.
        let changed13 = table.apply(.addressRemoved(address))
        #expect(changed13)
        #expect(table.defaultRoutes.isEmpty)
        // The link goes: so does everything of it.
        table.apply(.address(address))
        table.apply(.route(route(2), replacing: false))
        let changed14 = table.apply(.linkRemoved(eth0))
        #expect(changed14)
        #expect(table.links.isEmpty && table.addresses.isEmpty && table.defaultRoutes.isEmpty)
    }

    @Test func removesOneNexthopOfAMultipathRoute() {
        var table = InterfaceTable()
        var multipath = route(2)
        multipath.nexthops.append(.init(interfaceIndex: 3, gateway: [198, 51, 100, 1], gatewayFamily: 2))
        table.apply(.route(multipath, replacing: false))
        let changed15 = table.apply(.routeRemoved(route(3, gateway: [198, 51, 100, 1])))
        #expect(changed15)
        #expect(table.defaultRoutes == [route(2)])
    }

    @Test func defaultRoutesAreBounded() {
        var table = InterfaceTable()
        for metric in 0..<(InterfaceTable.defaultRouteLimit + 10) { table.apply(.route(route(2, priority: UInt32(metric)), replacing: false)) }
        #expect(table.defaultRoutes.count == InterfaceTable.defaultRouteLimit)
    }

    @Test func interfaceTypesFollowTheKernelsDescription() {
        func link(_ name: String, type: UInt16 = 1, flags: UInt32 = 0x41, kind: String? = nil) -> NetlinkLink {
            NetlinkLink(index: 5, name: name, hardwareType: type, flags: flags, kind: kind)
        }
        let physical = LinkDeviceFacts(isWireless: false, deviceType: nil, hasDevice: true)
        #expect(LinkKind.classify(link("lo", type: 772, flags: 0x49), facts: nil) == .loopback)
        #expect(LinkKind.classify(link("wlp2s0"), facts: LinkDeviceFacts(isWireless: true, deviceType: "wlan", hasDevice: true)) == .wifi)
        #expect(LinkKind.classify(link("wlan0"), facts: LinkDeviceFacts(isWireless: false, deviceType: "wlan", hasDevice: true)) == .wifi)
        #expect(LinkKind.classify(link("mon0", type: 803), facts: nil) == .wifi)
        #expect(LinkKind.classify(link("wwp0s20", type: 519), facts: nil) == .cellular)
        #expect(LinkKind.classify(link("usb0"), facts: LinkDeviceFacts(isWireless: false, deviceType: "wwan", hasDevice: true)) == .cellular)
        #expect(LinkKind.classify(link("wwan0", type: 65534), facts: nil) == .cellular)
        #expect(LinkKind.classify(link("enp3s0"), facts: physical) == .wiredEthernet)
        #expect(LinkKind.classify(link("eth0"), facts: nil) == .wiredEthernet)
        #expect(LinkKind.classify(link("eth1"), facts: LinkDeviceFacts(isWireless: false, deviceType: nil, hasDevice: false)) == .other)
        #expect(LinkKind.classify(link("veth0", kind: "veth"), facts: nil) == .other)
        #expect(LinkKind.classify(link("br0", kind: "bridge"), facts: LinkDeviceFacts(isWireless: false, deviceType: "bridge", hasDevice: false)) == .other)
        #expect(LinkKind.classify(link("wg0", type: 65534, kind: "wireguard"), facts: nil) == .other)
        #expect(LinkKind.classify(link("tun0", type: 65534, kind: "tun"), facts: nil) == .other)
    }
}
