/// One rtnetlink message as `RouteNetlinkParser` reads it: what the kernel said about a link,
/// an address or a route, or how a dump request ended.
package struct RouteNetlinkMessage: Sendable, Equatable {
    /// The request's sequence number for a dump's answers; 0 for the kernel's own events.
    package var sequence: UInt32
    /// NLM_F_DUMP_INTR: the tables changed while this dump ran, so it may be inconsistent.
    package var interrupted: Bool
    package var content: Content

    package enum Content: Sendable, Equatable {
        /// RTM_NEWLINK: a link appeared or changed.
        case link(NetlinkLink)
        /// RTM_DELLINK.
        case linkRemoved(NetlinkLink)
        /// RTM_NEWADDR.
        case address(NetlinkAddress)
        /// RTM_DELADDR.
        case addressRemoved(NetlinkAddress)
        /// RTM_NEWROUTE; `replacing` (NLM_F_REPLACE) means it takes the place of the route with
        /// the same key.
        case route(NetlinkRoute, replacing: Bool)
        /// RTM_DELROUTE.
        case routeRemoved(NetlinkRoute)
        /// NLMSG_DONE: the dump with this sequence number is complete.
        case done
        /// NLMSG_ERROR with a non-zero error (a negative errno from the kernel, made positive).
        case error(Int32)
        /// NLMSG_OVERRUN: data was lost.
        case overrun
    }

    package init(sequence: UInt32, interrupted: Bool = false, content: Content) {
        self.sequence = sequence
        self.interrupted = interrupted
        self.content = content
    }
}
