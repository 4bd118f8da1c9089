/// An interface address from RTM_NEWADDR / RTM_DELADDR.
package struct NetlinkAddress: Sendable, Hashable {
    package var interfaceIndex: Int32
    /// AF_INET (2) or AF_INET6 (10).
    package var family: UInt8
    /// 4 or 16 bytes, network order (IFA_LOCAL, else IFA_ADDRESS).
    package var bytes: [UInt8]
    package var prefixLength: UInt8
    /// RT_SCOPE_*: 0 universe (global), 200 site, 253 link, 254 host.
    package var scope: UInt8
    /// IFA_F_* (from IFA_FLAGS when present, which carries all 32 bits).
    package var flags: UInt32

    package init(interfaceIndex: Int32, family: UInt8, bytes: [UInt8], prefixLength: UInt8, scope: UInt8, flags: UInt32) {
        self.interfaceIndex = interfaceIndex
        self.family = family
        self.bytes = bytes
        self.prefixLength = prefixLength
        self.scope = scope
        self.flags = flags
    }

    package static let familyIPv4: UInt8 = 2
    package static let familyIPv6: UInt8 = 10
    package static let scopeUniverse: UInt8 = 0
    package static let scopeHost: UInt8 = 254
    package static let flagDADFailed: UInt32 = 0x08
    package static let flagTentative: UInt32 = 0x40

    /// Whether this is the same address as `other` (the kernel's key: interface, family,
    /// address and prefix), whatever the flags say.
    package func isSameAddress(as other: NetlinkAddress) -> Bool {
        interfaceIndex == other.interfaceIndex && family == other.family && bytes == other.bytes && prefixLength == other.prefixLength
    }

    /// An address traffic can leave from: not still in (or failed) duplicate address
    /// detection, and for IPv6 not link- or host-scoped.
    package var isUsable: Bool {
        guard flags & (Self.flagTentative | Self.flagDADFailed) == 0 else { return false }
        return family == Self.familyIPv4 || scope == Self.scopeUniverse
    }
}
