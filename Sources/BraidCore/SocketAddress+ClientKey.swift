import Glibc

/// What a listener's per-address connection limits count by.
extension SocketAddress {
    /// The IP address without the port; for IPv6, its /64 prefix (one subscriber's network,
    /// whose 2^64 addresses cost an attacker nothing), except IPv4-mapped addresses (a
    /// dual-stack socket's IPv4 clients), kept whole.
    package var clientKey: SocketAddress {
        var key = withPort(0)
        guard key.isIPv6 else { return key }
        key.storage.sin6_flowinfo = 0
        key.storage.sin6_scope_id = 0
        withUnsafeMutableBytes(of: &key.storage.sin6_addr) { bytes in
            let mapped = bytes[0..<10].allSatisfy { $0 == 0 } && bytes[10] == 0xff && bytes[11] == 0xff
            if !mapped { for index in 8..<16 { bytes[index] = 0 } }
        }
        return key
    }
}
