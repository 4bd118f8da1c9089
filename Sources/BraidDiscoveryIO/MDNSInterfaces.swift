import BraidDiscovery
import Glibc

/// The interfaces mDNS runs on: up, multicast-capable, not loopback, with their addresses (the
/// A and AAAA records a responder publishes) and their subnets (which sources are on the link).
package struct MDNSInterface: Hashable, Sendable {
    package var index: Int32
    package var name: String
    package var ipv4: [[UInt8]]
    package var ipv6: [[UInt8]]
    package var subnets: [MDNSSubnet] = []

    package static func current() -> [MDNSInterface] {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0, let first = list else { return [] }
        defer { freeifaddrs(list) }
        var found: [String: MDNSInterface] = [:]
        var cursor: UnsafeMutablePointer<ifaddrs>? = first
        while let entry = cursor {
            defer { cursor = entry.pointee.ifa_next }
            let flags = Int32(bitPattern: entry.pointee.ifa_flags)
            guard flags & Int32(IFF_UP) != 0, flags & Int32(IFF_MULTICAST) != 0,
                  flags & Int32(IFF_LOOPBACK) == 0, let address = entry.pointee.ifa_addr else { continue }
            let name = String(cString: entry.pointee.ifa_name)
            let index = Int32(if_nametoindex(entry.pointee.ifa_name))
            guard index > 0 else { continue }
            var interface = found[name] ?? MDNSInterface(index: index, name: name, ipv4: [], ipv6: [])
            switch Int32(address.pointee.sa_family) {
            case AF_INET:
                let bytes = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                    var value = $0.pointee.sin_addr
                    return withUnsafeBytes(of: &value) { Array($0) }
                }
                interface.ipv4.append(bytes)
                let mask = entry.pointee.ifa_netmask.map { netmask in
                    netmask.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                        var value = $0.pointee.sin_addr
                        return withUnsafeBytes(of: &value) { Array($0) }
                    }
                }
                interface.subnets.append(MDNSSubnet(address: bytes, mask: mask ?? [255, 255, 255, 255]))
            case AF_INET6:
                let bytes = address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                    var value = $0.pointee.sin6_addr
                    return withUnsafeBytes(of: &value) { Array($0) }
                }
                interface.ipv6.append(bytes)
                let mask = entry.pointee.ifa_netmask.map { netmask in
                    netmask.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                        var value = $0.pointee.sin6_addr
                        return withUnsafeBytes(of: &value) { Array($0) }
                    }
                }
                interface.subnets.append(MDNSSubnet(address: bytes, mask: mask ?? [UInt8](repeating: 255, count: 16)))
            default:
                break
            }
            found[name] = interface
        }
        return found.values.sorted { $0.index < $1.index }
    }

    /// The interface's addresses as A and AAAA record data.
    package var records: [DNSRecordData] { ipv4.map { .a($0) } + ipv6.map { .aaaa($0) } }
}
