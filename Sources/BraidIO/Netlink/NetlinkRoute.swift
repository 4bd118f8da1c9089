/// A route from RTM_NEWROUTE / RTM_DELROUTE.
package struct NetlinkRoute: Sendable, Equatable {
    package var family: UInt8
    /// RTA_TABLE when present, else rtm_table (254 main, 255 local).
    package var table: UInt32
    /// RTN_*: 1 unicast; 6 blackhole, 7 unreachable, 8 prohibit carry no traffic.
    package var type: UInt8
    package var destinationLength: UInt8
    /// RTA_DST (empty for a default route).
    package var destination: [UInt8]
    package var tos: UInt8
    /// RTA_PRIORITY: the metric, lower is preferred.
    package var priority: UInt32
    package var nexthops: [Nexthop]

    /// Where a route sends traffic: an output interface and maybe a gateway.
    package struct Nexthop: Sendable, Equatable {
        package var interfaceIndex: Int32
        /// RTA_GATEWAY (or an IPv4/IPv6 RTA_VIA), network order; nil for an on-link route.
        package var gateway: [UInt8]?
        /// The gateway's family (it may differ from the route's with RTA_VIA).
        package var gatewayFamily: UInt8
        /// RTNH_F_*.
        package var flags: UInt8

        package init(interfaceIndex: Int32, gateway: [UInt8]?, gatewayFamily: UInt8, flags: UInt8 = 0) {
            self.interfaceIndex = interfaceIndex
            self.gateway = gateway
            self.gatewayFamily = gatewayFamily
            self.flags = flags
        }
    }

    package init(
        family: UInt8, table: UInt32, type: UInt8, destinationLength: UInt8, destination: [UInt8], tos: UInt8 = 0,
        priority: UInt32, nexthops: [Nexthop]
    ) {
        self.family = family
        self.table = table
        self.type = type
        self.destinationLength = destinationLength
        self.destination = destination
        self.tos = tos
        self.priority = priority
        self.nexthops = nexthops
    }

    package static let typeUnicast: UInt8 = 1
    package static let tableLocal: UInt32 = 255

    /// A unicast route to everything (0.0.0.0/0 or ::/0) outside the local table.
    package var isDefault: Bool { destinationLength == 0 && type == Self.typeUnicast && table != Self.tableLocal }

    /// Whether `other` is the same route for the kernel (the key NLM_F_REPLACE replaces).
    package func hasSameKey(as other: NetlinkRoute) -> Bool {
        family == other.family && table == other.table && destinationLength == other.destinationLength
            && destination == other.destination && tos == other.tos && priority == other.priority
    }
}
