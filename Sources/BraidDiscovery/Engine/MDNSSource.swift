/// Where a multicast DNS datagram came from, and whether it may be taken in (RFC 6762 §6, §11).
///
/// Only datagrams from the local link count: the source must lie within a subnet of the
/// interface it arrived on, or be a link-local address (169.254/16, fe80::/10). A response
/// counts only from port 5353 (a legacy querier's port answers nothing); a query from another
/// port is a legacy unicast query, answered to its sender, so the link check matters most there.
public struct MDNSSource: Hashable, Sendable {
    /// The source address: 4 bytes for IPv4, 16 for IPv6.
    public var address: [UInt8]
    public var port: UInt16

    public init(address: [UInt8], port: UInt16) {
        self.address = address
        self.port = port
    }

    /// Whether the source is on the link whose subnets are `subnets`.
    public func isOnLink(_ subnets: [MDNSSubnet]) -> Bool {
        if address.count == 4, address[0] == 169, address[1] == 254 { return true }
        if address.count == 16, address[0] == 0xFE, address[1] & 0xC0 == 0x80 { return true }
        return subnets.contains { $0.contains(address) }
    }

    /// Whether `message`, from this source, arriving on an interface with `subnets`, may reach
    /// the browsers and responders.
    public func admits(_ message: DNSMessage, arrivingOn subnets: [MDNSSubnet]) -> Bool {
        if message.isResponse, port != MDNSSource.port { return false }
        return isOnLink(subnets)
    }

    /// The multicast DNS port.
    public static let port: UInt16 = 5353
}
