/// A network link (interface) from RTM_NEWLINK / RTM_DELLINK.
package struct NetlinkLink: Sendable, Equatable {
    package var index: Int32
    package var name: String
    /// ARPHRD_* (1 Ethernet, 772 loopback, 519 raw IP, 801-803 IEEE 802.11, 65534 none).
    package var hardwareType: UInt16
    /// IFF_* flags.
    package var flags: UInt32
    /// IFLA_INFO_KIND: the driver kind of a link made through rtnetlink ("veth", "bridge",
    /// "vlan", "tun", "wireguard", ...); nil for a physical device's.
    package var kind: String?
    /// IFLA_WIRELESS was present (wireless extensions event).
    package var hasWirelessAttribute: Bool

    package init(index: Int32, name: String, hardwareType: UInt16, flags: UInt32, kind: String? = nil, hasWirelessAttribute: Bool = false) {
        self.index = index
        self.name = name
        self.hardwareType = hardwareType
        self.flags = flags
        self.kind = kind
        self.hasWirelessAttribute = hasWirelessAttribute
    }

    package static let flagUp: UInt32 = 0x1
    package static let flagLoopback: UInt32 = 0x8
    package static let flagRunning: UInt32 = 0x40
    package static let flagLowerUp: UInt32 = 0x10000

    /// Administratively up (IFF_UP).
    package var isUp: Bool { flags & Self.flagUp != 0 }
    /// Operationally up (IFF_RUNNING: carrier, and the link's operstate is up).
    package var isRunning: Bool { flags & Self.flagRunning != 0 }
}
