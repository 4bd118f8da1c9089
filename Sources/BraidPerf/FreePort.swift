import Foundation
import Glibc

/// The transport a port is wanted for, by `freePort(_:)`.
package enum PortTransport: Sendable {
    case udp
    case tcp
}

/// A port that no socket of `transport` held a moment ago, on any address of either family,
/// for a server or peer that must be told its port before it binds.
///
/// It comes from 20000-32000, below the kernel's ephemeral range (32768 and up by default), so
/// no client socket of a concurrent test can be given it between this check and the bind.
/// The check binds the IPv6 wildcard without `IPV6_V6ONLY`, which fails if any IPv4 or IPv6
/// address already holds the port.
package func freePort(_ transport: PortTransport) throws -> UInt16 {
    let type = transport == .udp ? Int32(SOCK_DGRAM.rawValue) : Int32(SOCK_STREAM.rawValue)
    for _ in 0..<1000 {
        let candidate = UInt16.random(in: 20000..<32000)
        let fd = socket(AF_INET6, type | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { break }
        defer { close(fd) }
        var address = sockaddr_in6()
        address.sin6_family = sa_family_t(AF_INET6)
        address.sin6_port = candidate.bigEndian
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) == 0 }
        }
        if bound { return candidate }
    }
    throw ApplicationFailure("no free \(transport == .udp ? "UDP" : "TCP") port between 20000 and 32000")
}
