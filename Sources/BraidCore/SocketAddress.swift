#if canImport(Glibc)
import Glibc
#endif

/// An IPv4 or IPv6 address with a port, stored as a `sockaddr` so the socket calls and the C
/// engines (ngtcp2) use it without conversion.
///
/// The members the packet path calls are `@inlinable`: the engines and the datapath are other
/// modules, and an out-of-line call with a closure context per packet cost measurable CPU.
public struct SocketAddress: Hashable, Sendable, CustomStringConvertible {
    /// Room for either family (a `sockaddr_in` fits in a `sockaddr_in6`): 28 bytes instead of
    /// a 128-byte `sockaddr_storage`, because every packet written carries a path of two.
    @usableFromInline package var storage: sockaddr_in6

    /// Takes the IPv4 or IPv6 address in `storage` (as `getsockname` or `recvmsg` fill it).
    @inlinable package init(storage: sockaddr_storage) {
        var compact = sockaddr_in6()
        withUnsafeBytes(of: storage) { source in
            withUnsafeMutableBytes(of: &compact) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: source[0..<$0.count])) }
        }
        self.storage = compact
    }

    /// Parses an IP literal ("127.0.0.1", "::1", "fe80::1%2" is not supported).
    public init?(ip: String, port: UInt16) {
        var storage = sockaddr_in6()
        var v4 = in_addr()
        var v6 = in6_addr()
        if inet_pton(AF_INET, ip, &v4) == 1 {
            withUnsafeMutableBytes(of: &storage) { raw in
                let sin = raw.baseAddress!.assumingMemoryBound(to: sockaddr_in.self)
                sin.pointee.sin_family = sa_family_t(AF_INET)
                sin.pointee.sin_port = port.bigEndian
                sin.pointee.sin_addr = v4
            }
        } else if inet_pton(AF_INET6, ip, &v6) == 1 {
            withUnsafeMutableBytes(of: &storage) { raw in
                let sin6 = raw.baseAddress!.assumingMemoryBound(to: sockaddr_in6.self)
                sin6.pointee.sin6_family = sa_family_t(AF_INET6)
                sin6.pointee.sin6_port = port.bigEndian
                sin6.pointee.sin6_addr = v6
            }
        } else {
            return nil
        }
        self.storage = storage
    }

    /// Copies an IPv4 or IPv6 `sockaddr`; other families return nil.
    @inlinable public init?(_ address: UnsafePointer<sockaddr>, length: Int) {
        let family = Int32(address.pointee.sa_family)
        guard (family == AF_INET && length >= MemoryLayout<sockaddr_in>.size)
            || (family == AF_INET6 && length >= MemoryLayout<sockaddr_in6>.size)
        else { return nil }
        var storage = sockaddr_in6()
        withUnsafeMutableBytes(of: &storage) { raw in
            raw.copyMemory(from: UnsafeRawBufferPointer(start: address, count: min(length, raw.count)))
        }
        self.storage = storage
    }

    /// 0.0.0.0:0, for an address that is not known.
    public static let unspecified = SocketAddress(ip: "0.0.0.0", port: 0)!

    @inlinable public var isIPv6: Bool { Int32(storage.sin6_family) == AF_INET6 }

    @inlinable public var port: UInt16 {
        withUnsafeBytes(of: storage) { raw in
            isIPv6
                ? UInt16(bigEndian: raw.load(as: sockaddr_in6.self).sin6_port)
                : UInt16(bigEndian: raw.load(as: sockaddr_in.self).sin_port)
        }
    }

    /// The address without the port, in presentation form.
    public var ipString: String {
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        withUnsafeBytes(of: storage) { raw in
            if isIPv6 {
                var addr = raw.load(as: sockaddr_in6.self).sin6_addr
                _ = inet_ntop(AF_INET6, &addr, &text, socklen_t(text.count))
            } else {
                var addr = raw.load(as: sockaddr_in.self).sin_addr
                _ = inet_ntop(AF_INET, &addr, &text, socklen_t(text.count))
            }
        }
        return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    public var description: String { isIPv6 ? "[\(ipString)]:\(port)" : "\(ipString):\(port)" }

    /// Length of the meaningful part of the storage (what `sendmsg`, `bind` and the C engines want).
    @inlinable public var length: Int { isIPv6 ? MemoryLayout<sockaddr_in6>.size : MemoryLayout<sockaddr_in>.size }

    /// The first `length` bytes compared, field by field: the packet path compares each
    /// datagram's source with its peer's, and a `memcmp` over copies of both cost several times
    /// the few integer compares. An IPv4 address's 16 bytes are family, port, address and
    /// `sin_zero`, which lie over `sin6_flowinfo` and the first half of `sin6_addr`.
    @inlinable public static func == (lhs: Self, rhs: Self) -> Bool {
        guard lhs.storage.sin6_family == rhs.storage.sin6_family, lhs.storage.sin6_port == rhs.storage.sin6_port,
            lhs.storage.sin6_flowinfo == rhs.storage.sin6_flowinfo
        else { return false }
        let a = lhs.storage.sin6_addr.__in6_u.__u6_addr32, b = rhs.storage.sin6_addr.__in6_u.__u6_addr32
        guard a.0 == b.0, a.1 == b.1 else { return false }
        guard lhs.isIPv6 else { return true }
        return a.2 == b.2 && a.3 == b.3 && lhs.storage.sin6_scope_id == rhs.storage.sin6_scope_id
    }

    @inlinable public func hash(into hasher: inout Hasher) {
        withUnsafeBytes(of: storage) { hasher.combine(bytes: UnsafeRawBufferPointer(rebasing: $0[0..<length])) }
    }

    /// The same address with another port.
    @inlinable package func withPort(_ port: UInt16) -> SocketAddress {
        var copy = self
        withUnsafeMutableBytes(of: &copy.storage) { raw in
            if isIPv6 {
                raw.baseAddress!.assumingMemoryBound(to: sockaddr_in6.self).pointee.sin6_port = port.bigEndian
            } else {
                raw.baseAddress!.assumingMemoryBound(to: sockaddr_in.self).pointee.sin_port = port.bigEndian
            }
        }
        return copy
    }

    /// True for 0.0.0.0 and ::, the addresses a wildcard-bound socket has.
    @inlinable public var isWildcard: Bool {
        withUnsafeBytes(of: storage) { raw in
            if isIPv6 {
                return withUnsafeBytes(of: raw.load(as: sockaddr_in6.self).sin6_addr) { $0.allSatisfy { $0 == 0 } }
            }
            return raw.load(as: sockaddr_in.self).sin_addr.s_addr == 0
        }
    }

    /// True for an IPv6 address of the form ::ffff:a.b.c.d: an IPv4 peer as a dual-stack
    /// socket reports it.
    @inlinable public var isIPv4Mapped: Bool {
        guard isIPv6 else { return false }
        return withUnsafeBytes(of: storage.sin6_addr) { bytes in
            bytes[0..<10].allSatisfy { $0 == 0 } && bytes[10] == 0xff && bytes[11] == 0xff
        }
    }

    /// The plain IPv4 address (same port) of an IPv4-mapped one; any other address as it is.
    /// A dual-stack socket's IPv4 peers are reported through this, so that nothing above the
    /// socket sees two spellings of one IPv4 address.
    @inlinable public var unmappingIPv4: SocketAddress {
        guard isIPv4Mapped else { return self }
        var plain = sockaddr_in6()
        withUnsafeBytes(of: storage) { raw in
            let mapped = raw.load(as: sockaddr_in6.self)
            withUnsafeMutableBytes(of: &plain) { target in
                let sin = target.baseAddress!.assumingMemoryBound(to: sockaddr_in.self)
                sin.pointee.sin_family = sa_family_t(AF_INET)
                sin.pointee.sin_port = mapped.sin6_port
                withUnsafeBytes(of: mapped.sin6_addr) { bytes in
                    withUnsafeMutableBytes(of: &sin.pointee.sin_addr) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[12..<16])) }
                }
            }
        }
        var copy = self
        copy.storage = plain
        return copy
    }

    /// Calls `body` with a `sockaddr` pointer and length that stay valid during the call.
    @inlinable package func withSockAddr<R>(_ body: (UnsafePointer<sockaddr>, Int) throws -> R) rethrows -> R {
        try withUnsafeBytes(of: storage) { raw in
            try body(raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), length)
        }
    }
}
