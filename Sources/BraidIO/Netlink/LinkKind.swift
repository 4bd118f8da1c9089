/// What kind of medium a link is, as far as the kernel shows it: the datapath's own word for
/// Network.framework's interface types.
package enum LinkKind: Sendable, Equatable {
    case loopback
    case wifi
    case cellular
    case wiredEthernet
    case other

    /// ARPHRD_* values the rules read.
    private static let hardwareEthernet: UInt16 = 1
    private static let hardwareRawIP: UInt16 = 519
    private static let hardwareLoopback: UInt16 = 772
    private static let hardwareIEEE80211: ClosedRange<UInt16> = 801...803

    /// The kind of `link`, from what rtnetlink says about it and, when the caller could read
    /// them, its sysfs facts (nil: not readable, for instance a link of another network
    /// namespace than the one /sys shows):
    ///
    /// 1. loopback: IFF_LOOPBACK or ARPHRD_LOOPBACK;
    /// 2. Wi-Fi: a wireless device (sysfs `wireless/` or `phy80211/`, `DEVTYPE=wlan`), an
    ///    IFLA_WIRELESS attribute, or an 802.11 hardware type;
    /// 3. cellular: `DEVTYPE=wwan`, ARPHRD_RAWIP (how WWAN drivers present themselves), or a
    ///    `wwan` name;
    /// 4. other: any link made through rtnetlink (it has a driver kind: veth, bridge, vlan,
    ///    bond, tun, wireguard, dummy, ...), or a non-Ethernet link;
    /// 5. wired Ethernet: an Ethernet link with a device behind it (sysfs `device`), or,
    ///    when sysfs cannot say, any Ethernet link without a driver kind (physical NICs have
    ///    none).
    package static func classify(_ link: NetlinkLink, facts: LinkDeviceFacts?) -> LinkKind {
        if link.flags & NetlinkLink.flagLoopback != 0 || link.hardwareType == hardwareLoopback { return .loopback }
        if facts?.isWireless == true || facts?.deviceType == "wlan" || link.hasWirelessAttribute
            || hardwareIEEE80211.contains(link.hardwareType)
        {
            return .wifi
        }
        if facts?.deviceType == "wwan" || link.hardwareType == hardwareRawIP || link.name.hasPrefix("wwan") { return .cellular }
        guard link.kind == nil, link.hardwareType == hardwareEthernet else { return .other }
        return facts?.hasDevice ?? true ? .wiredEthernet : .other
    }
}

/// What /sys/class/net/NAME tells about a link's device.
package struct LinkDeviceFacts: Sendable, Equatable {
    /// `wireless/` or `phy80211/` exists.
    package var isWireless: Bool
    /// `DEVTYPE=` of the link's uevent (`wlan`, `wwan`, `bridge`, `vlan`, ...), if any.
    package var deviceType: String?
    /// `device` exists: a bus device (PCI, USB, virtio, ...) is behind the link.
    package var hasDevice: Bool

    package init(isWireless: Bool, deviceType: String?, hasDevice: Bool) {
        self.isWireless = isWireless
        self.deviceType = deviceType
        self.hasDevice = hasDevice
    }
}
