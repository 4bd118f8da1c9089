#if canImport(Glibc)
import Glibc
#endif

/// A non-blocking NETLINK_ROUTE socket subscribed to link, address and route events, which
/// sends dump requests and receives the kernel's messages. It belongs to the network
/// namespace of the thread that makes it, wherever it is read afterwards.
package final class RouteNetlinkSocket {
    package let fd: Int32
    /// System calls made on this socket (including the ones that made it).
    package private(set) var systemCalls = 0

    /// RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_IFADDR |
    /// RTMGRP_IPV6_ROUTE.
    package static let pathGroups: UInt32 = 0x1 | 0x10 | 0x40 | 0x100 | 0x400
    /// The receive buffer asked for: room for a burst of events (a bridge with many ports
    /// going down) before the kernel drops some and reports ENOBUFS.
    package static let receiveBufferSize: Int32 = 1 << 20

    private static let familyNetlink: Int32 = 16  // AF_NETLINK
    private static let protocolRoute: Int32 = 0  // NETLINK_ROUTE

    package enum Received {
        /// `count` bytes are in the buffer.
        case bytes(Int)
        /// Nothing more to read now.
        case wouldBlock
        /// The kernel dropped messages (ENOBUFS): the caller's view is stale.
        case overrun
    }

    package init(groups: UInt32 = RouteNetlinkSocket.pathGroups) throws {
        systemCalls += 1
        let fd = socket(Self.familyNetlink, Int32(SOCK_RAW.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), Self.protocolRoute)
        guard fd >= 0 else { throw DatapathError.system("socket(AF_NETLINK, NETLINK_ROUTE)", errno) }
        self.fd = fd
        var size = Self.receiveBufferSize
        systemCalls += 1
        // Best effort: a smaller buffer only makes an overrun (and a fresh dump) likelier.
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        // struct sockaddr_nl: family u16, pad u16, pid u32 (0: the kernel picks), groups u32.
        var address = [UInt8](repeating: 0, count: 12)
        address.withUnsafeMutableBytes { raw in
            raw.storeBytes(of: UInt16(Self.familyNetlink), toByteOffset: 0, as: UInt16.self)
            raw.storeBytes(of: groups, toByteOffset: 8, as: UInt32.self)
        }
        systemCalls += 1
        let bound = address.withUnsafeBytes { raw in
            bind(fd, raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(raw.count))
        }
        guard bound == 0 else {
            let error = errno
            Glibc.close(fd)
            throw DatapathError.system("bind(AF_NETLINK)", error)
        }
    }

    /// Asks the kernel for every object of one kind: `type` is RTM_GETLINK, RTM_GETADDR or
    /// RTM_GETROUTE; the answers carry `sequence` and end with NLMSG_DONE.
    package func requestDump(_ type: UInt16, sequence: UInt32) throws {
        // nlmsghdr, then the request's family header (ifinfomsg 16, ifaddrmsg 8, rtmsg 12
        // bytes), all zero: every family.
        let body = type == RouteNetlinkParser.getLink ? 16 : type == RouteNetlinkParser.getAddress ? 8 : 12
        var message = [UInt8](repeating: 0, count: RouteNetlinkParser.headerSize + body)
        message.withUnsafeMutableBytes { raw in
            raw.storeBytes(of: UInt32(raw.count), toByteOffset: 0, as: UInt32.self)
            raw.storeBytes(of: type, toByteOffset: 4, as: UInt16.self)
            raw.storeBytes(of: RouteNetlinkParser.flagRequest | RouteNetlinkParser.flagDump, toByteOffset: 6, as: UInt16.self)
            raw.storeBytes(of: sequence, toByteOffset: 8, as: UInt32.self)
        }
        while true {
            systemCalls += 1
            let sent = message.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
            if sent == message.count { return }
            if sent < 0, errno == EINTR { continue }
            throw DatapathError.system("send(netlink dump request)", sent < 0 ? errno : EMSGSIZE)
        }
    }

    /// One receive into `buffer`.
    package func receive(into buffer: UnsafeMutableRawBufferPointer) throws -> Received {
        while true {
            systemCalls += 1
            let count = recv(fd, buffer.baseAddress, buffer.count, 0)
            if count >= 0 { return .bytes(count) }
            switch errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK: return .wouldBlock
            case ENOBUFS: return .overrun
            default: throw DatapathError.system("recv(netlink)", errno)
            }
        }
    }

    package func close() {
        systemCalls += 1
        Glibc.close(fd)
    }
}
