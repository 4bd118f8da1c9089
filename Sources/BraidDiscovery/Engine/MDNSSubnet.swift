/// One address of an interface with its netmask (4 bytes for IPv4, 16 for IPv6): the addresses
/// on the same link as it.
public struct MDNSSubnet: Hashable, Sendable {
    public var address: [UInt8]
    public var mask: [UInt8]

    public init(address: [UInt8], mask: [UInt8]) {
        self.address = address
        self.mask = mask
    }

    /// Whether `other` lies within the subnet (same family, same bits under the mask).
    public func contains(_ other: [UInt8]) -> Bool {
        guard other.count == address.count, mask.count == address.count else { return false }
        return zip(zip(address, other), mask).allSatisfy { pair, bits in pair.0 & bits == pair.1 & bits }
    }
}
