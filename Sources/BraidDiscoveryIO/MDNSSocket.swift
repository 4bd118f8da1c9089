import BraidDiscovery
import CBraidUDP
import Glibc

/// One multicast DNS socket: bound to port 5353 of every address (SO_REUSEADDR and SO_REUSEPORT,
/// so it shares the port with a system responder and with other processes), joined to the group
/// (224.0.0.251 or ff02::fb) on each interface it is told of, reporting the interface each
/// message arrived on. Non-blocking; owned by the discovery channel on its loop.
package final class MDNSSocket {
    package static let port: UInt16 = 5353
    package let fd: Int32
    package let ipv6: Bool
    package private(set) var joined: Set<Int32> = []

    package init(ipv6: Bool, port: UInt16 = MDNSSocket.port) throws(MDNSSocketError) {
        let fd = socket(ipv6 ? AF_INET6 : AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .system("socket", errno) }
        self.fd = fd
        self.ipv6 = ipv6
        var one: Int32 = 1
        var ttl: Int32 = 255
        let size = socklen_t(MemoryLayout<Int32>.size)
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, size)
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, size)
        if ipv6 {
            setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &one, size)
            setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_RECVPKTINFO, &one, size)
            setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_MULTICAST_HOPS, &ttl, size)
            setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_MULTICAST_LOOP, &one, size)
            setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_UNICAST_HOPS, &ttl, size)
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = port.bigEndian
            let result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) }
            }
            guard result == 0 else { let error = errno; close(fd); throw .system("bind [::]:\(port)", error) }
        } else {
            setsockopt(fd, Int32(IPPROTO_IP), IP_PKTINFO, &one, size)
            setsockopt(fd, Int32(IPPROTO_IP), IP_MULTICAST_TTL, &ttl, size)
            setsockopt(fd, Int32(IPPROTO_IP), IP_MULTICAST_LOOP, &one, size)
            setsockopt(fd, Int32(IPPROTO_IP), IP_TTL, &ttl, size)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            let result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard result == 0 else { let error = errno; close(fd); throw .system("bind 0.0.0.0:\(port)", error) }
        }
    }

    deinit { close(fd) }

    /// Joins the group on `interface`; false if the kernel refuses (no address of the family).
    @discardableResult
    package func join(interface: Int32) -> Bool {
        guard !joined.contains(interface) else { return true }
        let result: Int32
        if ipv6 {
            var request = ipv6_mreq()
            request.ipv6mr_multiaddr = Self.groupV6.sin6_addr
            request.ipv6mr_interface = UInt32(interface)
            result = setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_ADD_MEMBERSHIP, &request, socklen_t(MemoryLayout<ipv6_mreq>.size))
        } else {
            var request = ip_mreqn()
            request.imr_multiaddr = Self.groupV4.sin_addr
            request.imr_ifindex = interface
            result = setsockopt(fd, Int32(IPPROTO_IP), IP_ADD_MEMBERSHIP, &request, socklen_t(MemoryLayout<ip_mreqn>.size))
        }
        guard result == 0 || errno == EADDRINUSE else { return false }
        joined.insert(interface)
        return true
    }

    /// Forgets a membership the kernel dropped (its interface went away).
    package func forget(interface: Int32) { joined.remove(interface) }

    static let groupV4: sockaddr_in = {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = MDNSSocket.port.bigEndian
        address.sin_addr.s_addr = UInt32(0xE000_00FB).bigEndian
        return address
    }()

    static let groupV6: sockaddr_in6 = {
        var address = sockaddr_in6()
        address.sin6_family = sa_family_t(AF_INET6)
        address.sin6_port = MDNSSocket.port.bigEndian
        withUnsafeMutableBytes(of: &address.sin6_addr) { bytes in
            for index in bytes.indices { bytes[index] = 0 }
            bytes[0] = 0xFF
            bytes[1] = 0x02
            bytes[15] = 0xFB
        }
        return address
    }()

    /// One received datagram: its bytes, where it came from, the interface it arrived on.
    package struct Received {
        package var bytes: [UInt8]
        package var source: sockaddr_storage
        package var sourcePort: UInt16
        /// The source address: 4 bytes for IPv4, 16 for IPv6.
        package var sourceAddress: [UInt8]
        package var interface: Int32
    }

    /// The next datagram waiting, or nil when none is (or it was larger than a DNS message may be).
    package func receive() -> Received?? {
        var buffer = [UInt8](repeating: 0, count: DNSMessage.maximumSize + 1)
        var source = sockaddr_storage()
        var control = [UInt8](repeating: 0, count: 128)
        let count = buffer.withUnsafeMutableBytes { bytes in
            control.withUnsafeMutableBytes { controlBytes in
                withUnsafeMutablePointer(to: &source) { sourcePointer in
                    var iov = iovec(iov_base: bytes.baseAddress, iov_len: bytes.count)
                    return withUnsafeMutablePointer(to: &iov) { iovPointer in
                        var message = msghdr()
                        message.msg_name = UnsafeMutableRawPointer(sourcePointer)
                        message.msg_namelen = socklen_t(MemoryLayout<sockaddr_storage>.size)
                        message.msg_iov = iovPointer
                        message.msg_iovlen = 1
                        message.msg_control = controlBytes.baseAddress
                        message.msg_controllen = controlBytes.count
                        let count = recvmsg(fd, &message, 0)
                        guard count >= 0 else { return (count, Int32(0), false) }
                        return (count, braid_udp_cmsg_interface(&message), message.msg_flags & Int32(MSG_TRUNC) != 0)
                    }
                }
            }
        }
        guard count.0 >= 0 else { return nil }
        // A datagram above the largest DNS message is dropped whole rather than read in part.
        guard !count.2, count.0 <= DNSMessage.maximumSize else { return .some(nil) }
        let (port, address): (UInt16, [UInt8]) = withUnsafeBytes(of: &source) { raw in
            let port = UInt16(bigEndian: raw.load(fromByteOffset: 2, as: UInt16.self))
            // sockaddr_in keeps the address at offset 4, sockaddr_in6 at offset 8.
            return (port, ipv6 ? Array(raw[8..<24]) : Array(raw[4..<8]))
        }
        return Received(bytes: Array(buffer.prefix(count.0)), source: source, sourcePort: port, sourceAddress: address, interface: count.1)
    }

    /// Sends `bytes` to the group out of `interface`.
    package func sendToGroup(_ bytes: [UInt8], interface: Int32) {
        if ipv6 {
            var group = Self.groupV6
            withUnsafePointer(to: &group) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    _ = braid_udp_send_on_interface(fd, 1, bytes, bytes.count, $0, socklen_t(MemoryLayout<sockaddr_in6>.size), interface)
                }
            }
        } else {
            var group = Self.groupV4
            withUnsafePointer(to: &group) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    _ = braid_udp_send_on_interface(fd, 0, bytes, bytes.count, $0, socklen_t(MemoryLayout<sockaddr_in>.size), interface)
                }
            }
        }
    }

    /// Sends `bytes` to one address (a legacy unicast answer).
    package func send(_ bytes: [UInt8], to address: sockaddr_storage) {
        var address = address
        let length = socklen_t(ipv6 ? MemoryLayout<sockaddr_in6>.size : MemoryLayout<sockaddr_in>.size)
        withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { _ = sendto(fd, bytes, bytes.count, 0, $0, length) }
        }
    }
}

/// Why the discovery socket could not be opened.
package enum MDNSSocketError: Error, Sendable, CustomStringConvertible {
    case system(String, Int32)

    package var description: String {
        switch self {
        case .system(let call, let code): "\(call) failed: \(String(cString: strerror(code))) (errno \(code))"
        }
    }
}
