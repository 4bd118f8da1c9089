#if canImport(Glibc)
import Glibc
#endif
import CBraid

/// A point in time on the caller's monotonic clock, in nanoseconds.
///
/// The engine never reads a clock: every input carries `now`, so tests can drive it with a
/// virtual clock and the datapath with `CLOCK_MONOTONIC`.
public struct QUICInstant: Comparable, Hashable, Sendable, CustomStringConvertible {
    public var nanoseconds: UInt64

    public init(nanoseconds: UInt64) { self.nanoseconds = nanoseconds }

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.nanoseconds < rhs.nanoseconds }

    public static func + (lhs: Self, rhs: Duration) -> Self {
        Self(nanoseconds: lhs.nanoseconds &+ rhs.nanosecondsClamped)
    }

    public static func - (lhs: Self, rhs: Self) -> Duration {
        .nanoseconds(Int64(clamping: lhs.nanoseconds) - Int64(clamping: rhs.nanoseconds))
    }

    public var description: String { "\(Double(nanoseconds) / 1e6) ms" }
}

extension Duration {
    /// Whole nanoseconds, clamped to zero for negative durations.
    var nanosecondsClamped: UInt64 {
        let (seconds, attoseconds) = components
        if seconds < 0 { return 0 }
        return UInt64(seconds) * 1_000_000_000 + UInt64(attoseconds / 1_000_000_000)
    }

    init(ngtcp2Duration: UInt64) { self = .nanoseconds(Int64(clamping: ngtcp2Duration)) }
}

/// The two ECN bits of the IP header (RFC 3168).
public enum ECN: UInt8, Sendable, Hashable {
    case notECT = 0
    case ect1 = 1
    case ect0 = 2
    case congestionExperienced = 3

    package init(bits: UInt32) { self = ECN(rawValue: UInt8(bits & 0x3)) ?? .notECT }
}

/// An IPv4 or IPv6 address with a port, stored as a `sockaddr` so ngtcp2 and the socket calls use it
/// without conversion.
public struct QUICAddress: Hashable, Sendable, CustomStringConvertible {
    /// Room for either family (a `sockaddr_in` fits in a `sockaddr_in6`): 28 bytes instead of
    /// a 128-byte `sockaddr_storage`, because every packet written carries a path of two.
    package var storage: sockaddr_in6

    /// Takes the IPv4 or IPv6 address in `storage` (as `getsockname` or `recvmsg` fill it).
    package init(storage: sockaddr_storage) {
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
    public init?(_ address: UnsafePointer<sockaddr>, length: Int) {
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

    /// 0.0.0.0:0, for paths whose address ngtcp2 did not report.
    public static let unspecified = QUICAddress(ip: "0.0.0.0", port: 0)!

    public var isIPv6: Bool { Int32(storage.sin6_family) == AF_INET6 }

    public var port: UInt16 {
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

    /// Length of the meaningful part of the storage (what `sendmsg` and ngtcp2 want).
    public var length: Int { isIPv6 ? MemoryLayout<sockaddr_in6>.size : MemoryLayout<sockaddr_in>.size }

    public static func == (lhs: Self, rhs: Self) -> Bool {
        guard lhs.length == rhs.length else { return false }
        return withUnsafeBytes(of: lhs.storage) { a in
            withUnsafeBytes(of: rhs.storage) { b in memcmp(a.baseAddress!, b.baseAddress!, lhs.length) == 0 }
        }
    }

    public func hash(into hasher: inout Hasher) {
        withUnsafeBytes(of: storage) { hasher.combine(bytes: UnsafeRawBufferPointer(rebasing: $0[0..<length])) }
    }

    /// The same address with another port.
    package func withPort(_ port: UInt16) -> QUICAddress {
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
    public var isWildcard: Bool {
        withUnsafeBytes(of: storage) { raw in
            if isIPv6 {
                return withUnsafeBytes(of: raw.load(as: sockaddr_in6.self).sin6_addr) { $0.allSatisfy { $0 == 0 } }
            }
            return raw.load(as: sockaddr_in.self).sin_addr.s_addr == 0
        }
    }

    /// Calls `body` with a `sockaddr` pointer and length that stay valid during the call.
    package func withSockAddr<R>(_ body: (UnsafePointer<sockaddr>, Int) throws -> R) rethrows -> R {
        try withUnsafeBytes(of: storage) { raw in
            try body(raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), length)
        }
    }
}

/// The 4-tuple a packet travels on: our address and the peer's.
public struct QUICPath: Hashable, Sendable, CustomStringConvertible {
    public var local: QUICAddress
    public var remote: QUICAddress

    public init(local: QUICAddress, remote: QUICAddress) {
        self.local = local
        self.remote = remote
    }

    public var description: String { "\(local) <-> \(remote)" }
}

/// A QUIC connection ID (0 to 20 bytes), stored inline so routing needs no allocation.
public struct ConnectionID: Hashable, Sendable, CustomStringConvertible {
    private var words: (UInt64, UInt64, UInt64) = (0, 0, 0)
    public private(set) var count: Int

    init(_ cid: ngtcp2_cid) {
        var cid = cid
        self.init(pointer: &cid.data.0, count: cid.datalen)
    }

    init(pointer: UnsafePointer<UInt8>, count: Int) {
        precondition(count <= 20)
        self.count = count
        withUnsafeMutableBytes(of: &words) { $0.copyMemory(from: UnsafeRawBufferPointer(start: pointer, count: count)) }
    }

    public init(bytes: [UInt8]) {
        self.init(pointer: bytes, count: min(bytes.count, 20))
    }

    /// A random connection ID of `length` bytes.
    /// A random ID; `tag`, when given, replaces the first byte (it routes the ID to a socket).
    static func random(length: Int, tag: UInt8? = nil) -> ConnectionID {
        var bytes = [UInt8](repeating: 0, count: length)
        fillRandom(&bytes)
        if let tag, length > 0 { bytes[0] = tag }
        return ConnectionID(bytes: bytes)
    }

    public var bytes: [UInt8] { withUnsafeBytes(of: words) { Array($0.prefix(count)) } }

    var ngtcp2: ngtcp2_cid {
        var cid = ngtcp2_cid()
        withUnsafeBytes(of: words) { raw in
            ngtcp2_cid_init(&cid, raw.baseAddress!.assumingMemoryBound(to: UInt8.self), count)
        }
        return cid
    }

    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.count == rhs.count && lhs.words == rhs.words
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(count)
        hasher.combine(words.0)
        hasher.combine(words.1)
        hasher.combine(words.2)
    }

    public var description: String { bytes.map { String($0, radix: 16).leftPadded(to: 2) }.joined() }
}

extension String {
    func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}

/// Fills `buffer` with cryptographically strong random bytes (GnuTLS's nonce generator).
func fillRandom(_ buffer: UnsafeMutableRawBufferPointer) {
    guard buffer.count > 0 else { return }
    let rc = gnutls_rnd(GNUTLS_RND_NONCE, buffer.baseAddress, buffer.count)
    precondition(rc == 0, "GnuTLS random generator failed (\(rc))")
}

func fillRandom(_ bytes: inout [UInt8]) {
    bytes.withUnsafeMutableBytes { fillRandom($0) }
}

/// One UDP send: a run of QUIC packets for one path and ECN mark, laid out back to back.
///
/// Every packet but the last is exactly `segmentSize` bytes, so the datapath can hand the
/// whole buffer to the kernel as one UDP_SEGMENT (GSO) send, or split it into datagrams.
public struct Transmit: Sendable {
    public var path: QUICPath
    public var ecn: ECN
    public var segmentSize: Int
    public var bytes: [UInt8]

    /// Number of UDP datagrams this transmit carries.
    public var segmentCount: Int { segmentSize == 0 ? 0 : (bytes.count + segmentSize - 1) / segmentSize }

    /// The individual datagrams.
    public var datagrams: [ArraySlice<UInt8>] {
        stride(from: 0, to: bytes.count, by: max(segmentSize, 1)).map {
            bytes[$0..<min($0 + segmentSize, bytes.count)]
        }
    }

    /// Calls `body` with each UDP datagram of a batch laid out as `writeTransmits` produces it
    /// (what the kernel does with a GSO send; also what a sender without GSO must do).
    public static func forEachDatagram(
        in batch: UnsafeRawBufferPointer, segmentSize: Int, _ body: (UnsafeRawBufferPointer) -> Void
    ) {
        var offset = 0
        while offset < batch.count {
            let end = min(offset + max(segmentSize, 1), batch.count)
            body(UnsafeRawBufferPointer(rebasing: batch[offset..<end]))
            offset = end
        }
    }
}
