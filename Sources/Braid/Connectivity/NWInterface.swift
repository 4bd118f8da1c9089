/// A network interface a path can use, with Network.framework's shape: its name, the kernel's
/// index for it, and its type.
///
/// ```swift
/// let monitor = NWPathMonitor()
/// if let first = monitor.currentPath.availableInterfaces.first {
///     print(first.name, first.index, first.type == .wiredEthernet)
/// }
/// ```
public struct NWInterface: Hashable, Sendable, CustomDebugStringConvertible {
    /// The kind of medium an interface is. On Linux the type comes from the kernel (see
    /// `NWPathMonitor` for the rules): a loopback device, an 802.11 device, a WWAN device, a
    /// physical Ethernet device, or anything else (tunnels, veth pairs, bridges, VLANs, VPNs).
    public enum InterfaceType: Hashable, Sendable {
        /// Tunnels, veth pairs, bridges, bonds, VLANs, VPNs: anything not listed below.
        case other
        /// An 802.11 wireless device.
        case wifi
        /// A WWAN (mobile broadband) device.
        case cellular
        /// A physical Ethernet device.
        case wiredEthernet
        /// The loopback device.
        case loopback
    }

    /// The interface's type.
    public let type: InterfaceType
    /// The interface's name (`eth0`, `wlan0`, `wwan0`).
    public let name: String
    /// The kernel's index for the interface (`if_nametoindex`).
    public let index: Int

    init(type: InterfaceType, name: String, index: Int) {
        self.type = type
        self.name = name
        self.index = index
    }

    /// The interface's name.
    public var debugDescription: String { name }
}
