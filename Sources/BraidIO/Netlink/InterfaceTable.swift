/// The kernel's links, addresses and default routes as rtnetlink has described them so far: a
/// dump's records and then every event, applied in order. Sans-IO, like the parser.
///
/// Only default routes are kept (a path needs no other), so a router's full table costs
/// nothing here; links and addresses are kept whole, as many as the kernel has. Where the
/// kernel changes its tables without telling (IPv4 routes through a link that goes down, or
/// that loses its last IPv4 address, are flushed without RTM_DELROUTE), the table does the
/// same.
package struct InterfaceTable: Sendable, Equatable {
    package private(set) var links: [Int32: NetlinkLink] = [:]
    package private(set) var addresses: [Int32: [NetlinkAddress]] = [:]
    package private(set) var defaultRoutes: [NetlinkRoute] = []

    /// More default routes than any real host has; later ones are ignored rather than grow
    /// the table without bound.
    package static let defaultRouteLimit = 1024

    package init() {}

    /// Applies one message; returns whether the table changed.
    @discardableResult
    package mutating func apply(_ content: RouteNetlinkMessage.Content) -> Bool {
        switch content {
        case .link(let link):
            let previous = links[link.index]
            links[link.index] = link
            var changed = previous != link
            if !link.isUp { changed = dropRoutes(through: link.index, family: nil) || changed }
            if let previous, previous.name != link.name { changed = true }
            return changed
        case .linkRemoved(let link):
            let hadLink = links.removeValue(forKey: link.index) != nil
            let hadAddresses = addresses.removeValue(forKey: link.index) != nil
            let hadRoutes = dropRoutes(through: link.index, family: nil)
            return hadLink || hadAddresses || hadRoutes
        case .address(let address):
            var list = addresses[address.interfaceIndex] ?? []
            if let index = list.firstIndex(where: { $0.isSameAddress(as: address) }) {
                guard list[index] != address else { return false }
                list[index] = address
            } else {
                list.append(address)
            }
            addresses[address.interfaceIndex] = list
            return true
        case .addressRemoved(let address):
            guard var list = addresses[address.interfaceIndex], let index = list.firstIndex(where: { $0.isSameAddress(as: address) })
            else { return false }
            list.remove(at: index)
            addresses[address.interfaceIndex] = list.isEmpty ? nil : list
            if address.family == NetlinkAddress.familyIPv4, !list.contains(where: { $0.family == NetlinkAddress.familyIPv4 }) {
                _ = dropRoutes(through: address.interfaceIndex, family: NetlinkAddress.familyIPv4)
            }
            return true
        case .route(let route, let replacing):
            guard route.isDefault else { return false }
            var changed = false
            if replacing {
                let before = defaultRoutes.count
                defaultRoutes.removeAll { $0.hasSameKey(as: route) }
                changed = defaultRoutes.count != before
            } else if defaultRoutes.contains(route) {
                return false
            }
            guard defaultRoutes.count < Self.defaultRouteLimit else { return changed }
            defaultRoutes.append(route)
            return true
        case .routeRemoved(let route):
            guard route.isDefault else { return false }
            if let index = defaultRoutes.firstIndex(of: route) {
                defaultRoutes.remove(at: index)
                return true
            }
            // One next hop of a multipath route, or a route described another way: take away
            // what matches of the routes with the same key.
            var changed = false
            for index in defaultRoutes.indices.reversed() where defaultRoutes[index].hasSameKey(as: route) {
                let before = defaultRoutes[index].nexthops.count
                if route.nexthops.isEmpty {
                    defaultRoutes[index].nexthops.removeAll()
                } else {
                    defaultRoutes[index].nexthops.removeAll { hop in
                        route.nexthops.contains { $0.interfaceIndex == hop.interfaceIndex && $0.gateway == hop.gateway }
                    }
                }
                if defaultRoutes[index].nexthops.count != before { changed = true }
                if defaultRoutes[index].nexthops.isEmpty { defaultRoutes.remove(at: index) }
            }
            return changed
        case .done, .error, .overrun:
            return false
        }
    }

    /// Forgets everything (before dumping the kernel's tables again).
    package mutating func removeAll() {
        links.removeAll()
        addresses.removeAll()
        defaultRoutes.removeAll()
    }

    /// Removes the next hops through `interfaceIndex` (of one family, or all), and the routes
    /// left with none.
    private mutating func dropRoutes(through interfaceIndex: Int32, family: UInt8?) -> Bool {
        var changed = false
        for index in defaultRoutes.indices.reversed() where family == nil || defaultRoutes[index].family == family {
            let before = defaultRoutes[index].nexthops.count
            defaultRoutes[index].nexthops.removeAll { $0.interfaceIndex == interfaceIndex }
            guard defaultRoutes[index].nexthops.count != before else { continue }
            changed = true
            if defaultRoutes[index].nexthops.isEmpty { defaultRoutes.remove(at: index) }
        }
        return changed
    }
}
