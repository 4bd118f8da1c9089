/// The machine's interfaces at one moment, as an `InterfaceWatcher` publishes them: each link
/// with its kind and addresses, the default routes, and whether a DNS server is configured.
package struct InterfaceSnapshot: Sendable, Equatable {
    package struct Interface: Sendable, Equatable {
        package var link: NetlinkLink
        package var kind: LinkKind
        package var addresses: [NetlinkAddress]

        package init(link: NetlinkLink, kind: LinkKind, addresses: [NetlinkAddress]) {
            self.link = link
            self.kind = kind
            self.addresses = addresses
        }
    }

    /// In interface-index order.
    package var interfaces: [Interface]
    package var defaultRoutes: [NetlinkRoute]
    /// /etc/resolv.conf names at least one nameserver (read when the snapshot is made).
    package var hasNameServer: Bool

    package init(interfaces: [Interface], defaultRoutes: [NetlinkRoute], hasNameServer: Bool) {
        self.interfaces = interfaces
        self.defaultRoutes = defaultRoutes
        self.hasNameServer = hasNameServer
    }

    package func interface(index: Int32) -> Interface? {
        interfaces.first { $0.link.index == index }
    }
}
