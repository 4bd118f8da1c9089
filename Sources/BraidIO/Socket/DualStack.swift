import BraidCore

#if canImport(Glibc)
import Glibc
#endif

/// One socket for IPv4 and IPv6 clients: a listener given no address binds `::` with
/// IPV6_V6ONLY off, so it takes both families on one port, and falls back to `0.0.0.0` on a
/// host without IPv6. The sockets report IPv4 peers as plain IPv4 (`unmappingIPv4`).
package enum DualStack {
    /// `[::]:port` where the host has IPv6, else `0.0.0.0:port`. Checked at each call (one
    /// socket opened and closed): IPv6 can be switched off while the process runs.
    package static func wildcard(port: UInt16) -> SocketAddress {
        let probe = socket(AF_INET6, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard probe >= 0 else { return SocketAddress(ip: "0.0.0.0", port: port)! }
        Glibc.close(probe)
        return SocketAddress(ip: "::", port: port)!
    }

    /// Turns IPV6_V6ONLY off on an IPv6 socket about to bind the wildcard, whatever the
    /// system default (net.ipv6.bindv6only) is.
    package static func acceptIPv4(on fd: Int32) throws {
        var zero: Int32 = 0
        guard setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &zero, socklen_t(MemoryLayout<Int32>.size)) == 0 else {
            throw DatapathError.system("setsockopt(IPV6_V6ONLY)", errno)
        }
    }
}
