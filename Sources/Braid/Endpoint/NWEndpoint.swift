import BraidCore
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Where to connect or listen, with Network.framework's names.
///
/// ```swift
/// let byName: NWEndpoint = .hostPort(host: "example.com", port: 443)
/// let literal: NWEndpoint = .hostPort(host: .ipv6(.loopback), port: 4433)
/// let local: NWEndpoint = .unix(path: "/run/game/socket")
/// ```
public enum NWEndpoint: Sendable, Hashable, CustomStringConvertible {
    /// A host (a DNS name or an IP address) and a port.
    case hostPort(host: Host, port: Port)
    /// A Unix-domain socket: a socket file at `path` (at most 107 bytes, Linux's
    /// `sockaddr_un`), for clients and listeners in both dialects: a stream socket under
    /// `TCP()` and `TLS()`, a datagram socket under `UDP()`. A connection's both endpoints are
    /// the socket file (a client's socket has no name a user gave it), and so is each of a
    /// listener's connections'. A listener replaces a stale socket file (one nobody holds),
    /// never anything else, and removes its file when it stops. TCP's
    /// and IP's tuning options (`noDelay`, keep-alive, fast open, the service class) mean
    /// nothing there and are ignored; a local endpoint, an interface requirement or Multipath
    /// TCP is an `invalidConfiguration` error. A TLS client names the server "localhost"
    /// unless its `serverName` says otherwise. Connecting to a path with no socket file fails
    /// with ENOENT, and to one nobody listens on with ECONNREFUSED, at once (as a refused TCP
    /// connect does in Braid). QUIC does not run over it (`NetworkError.unsupported`).
    case unix(path: String)

    /// A URL: its host, and its port or the scheme's (`wss` and `https` 443, `ws` and `http`
    /// 80). A WebSocket connection also sends its path and query in the upgrade.
    ///
    /// ```swift
    /// let chat: NWEndpoint = .url(URL(string: "wss://chat.example.com/room/1")!)
    /// ```
    case url(URL)

    /// A DNS-SD service instance by name ("Table 7"), type ("_game._tcp"), domain (nil or
    /// "local." for multicast DNS) and optionally the interface it was found on: what a browser
    /// reports. A connection resolves it over multicast DNS (its SRV record, then the host's
    /// A and AAAA records) and races the addresses as it races a name's.
    ///
    /// ```swift
    /// let table: NWEndpoint = .service(name: "Table 7", type: "_game._tcp", domain: "local.", interface: nil)
    /// ```
    case service(name: String, type: String, domain: String, interface: NWInterface?)

    /// A DNS name or an IP address.
    public enum Host: Sendable, Hashable, ExpressibleByStringLiteral, CustomStringConvertible {
        /// A DNS name, resolved (getaddrinfo) when connecting or binding.
        case name(String)
        /// An IPv4 address.
        case ipv4(IPv4Address)
        /// An IPv6 address.
        case ipv6(IPv6Address)

        /// IP literals become `.ipv4`/`.ipv6`; anything else is a name.
        public init(_ string: String) {
            if let v4 = IPv4Address(string) {
                self = .ipv4(v4)
            } else if let v6 = IPv6Address(string.trimmingCharacters(in: CharacterSet(charactersIn: "[]"))) {
                self = .ipv6(v6)
            } else {
                self = .name(string)
            }
        }

        /// The same as `init(_:)`: `"::1"` is `.ipv6`, `"example.com"` is `.name`.
        public init(stringLiteral value: String) { self.init(value) }

        /// The name or address as text (IPv6 without brackets).
        public var description: String {
            switch self {
            case .name(let name): name
            case .ipv4(let address): address.description
            case .ipv6(let address): address.description
            }
        }
    }

    /// A UDP or TCP port.
    public struct Port: Sendable, Hashable, ExpressibleByIntegerLiteral, CustomStringConvertible {
        /// The port number.
        public let rawValue: UInt16
        /// A port from a number literal: `443`.
        public init(integerLiteral value: UInt16) { rawValue = value }
        /// The port `rawValue`; never nil (0 is `.any`).
        public init?(rawValue: UInt16) { self.rawValue = rawValue }
        /// Let the system choose (listeners).
        public static let any = Port(integerLiteral: 0)
        /// The port number in decimal.
        public var description: String { String(rawValue) }
    }

    /// `host:port`, with an IPv6 address in brackets: `[::1]:4433`; a Unix-domain socket's path.
    public var description: String {
        switch self {
        case .hostPort(let host, let port):
            if case .ipv6 = host { "[\(host)]:\(port)" } else { "\(host):\(port)" }
        case .unix(let path): path
        case .url(let url): url.absoluteString
        case .service(let name, let type, let domain, _): "\(name).\(type).\(domain)"
        }
    }

    /// A Unix-domain peer is on this machine: "localhost" is the name TLS checks by default.
    var host: Host {
        switch self {
        case .hostPort(let host, _): host
        case .unix: .name("localhost")
        case .url(let url): Host(url.host ?? "")
        case .service(let name, _, _, _): .name(name)
        }
    }

    var port: Port {
        switch self {
        case .hostPort(_, let port): port
        case .unix, .service: .any
        case .url(let url):
            Port(integerLiteral: url.port.flatMap { UInt16(exactly: $0) } ?? (["wss", "https"].contains(url.scheme?.lowercased()) ? 443 : 80))
        }
    }
}

/// An IPv4 address (four octets).
public struct IPv4Address: Sendable, Hashable, CustomStringConvertible {
    /// Network byte order.
    public let rawValue: [UInt8]
    /// The loopback address, 127.0.0.1.
    public static let loopback = IPv4Address("127.0.0.1")!
    /// The unspecified address, 0.0.0.0: every local IPv4 address when binding.
    public static let any = IPv4Address("0.0.0.0")!

    /// Parses dotted-decimal text (`"192.0.2.1"`); nil if `string` is not an IPv4 address.
    public init?(_ string: String) {
        var address = in_addr()
        guard inet_pton(AF_INET, string, &address) == 1 else { return nil }
        rawValue = withUnsafeBytes(of: address) { Array($0) }
    }

    /// Dotted-decimal text: `127.0.0.1`.
    public var description: String { rawValue.map(String.init).joined(separator: ".") }
}

/// An IPv6 address (sixteen octets).
public struct IPv6Address: Sendable, Hashable, CustomStringConvertible {
    /// Network byte order.
    public let rawValue: [UInt8]
    /// The loopback address, ::1.
    public static let loopback = IPv6Address("::1")!
    /// The unspecified address, `::`: every local IPv6 address when binding.
    public static let any = IPv6Address("::")!

    /// Parses IPv6 text (`"2001:db8::1"`, no brackets or zone); nil if `string` is not an
    /// IPv6 address.
    public init?(_ string: String) {
        var address = in6_addr()
        guard inet_pton(AF_INET6, string, &address) == 1 else { return nil }
        rawValue = withUnsafeBytes(of: address) { Array($0) }
    }

    /// Compressed text, as `inet_ntop` writes it: `2001:db8::1`.
    public var description: String {
        var address = in6_addr()
        withUnsafeMutableBytes(of: &address) { $0.copyBytes(from: rawValue) }
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        inet_ntop(AF_INET6, &address, &buffer, socklen_t(buffer.count))
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// Turns an endpoint into socket addresses. Names are resolved with getaddrinfo on a thread of
/// their own, because it blocks and must not stall an event loop or the cooperative pool.
enum Resolver {
    static func addresses(for endpoint: NWEndpoint) async throws -> [SocketAddress] {
        if case .unix(let path) = endpoint {
            throw NetworkError.invalidConfiguration("\(path) is a Unix-domain socket, which has no IP address")
        }
        if case .service = endpoint { return try await ServiceResolver.addresses(for: endpoint) }
        let port = endpoint.port.rawValue
        switch endpoint.host {
        case .ipv4, .ipv6:
            return literalAddresses(for: endpoint) ?? []
        case .name(let name):
            if let fixed = namesForTesting.withLock({ $0[name] }) { return fixed.map { $0.withPort(port) } }
            return try await withCheckedThrowingContinuation { continuation in
                let thread = Thread { continuation.resume(with: Result { try lookUp(name, port: port) }) }
                thread.name = "braid-resolve"
                thread.start()
            }
        }
    }

    /// The address of an IP-literal endpoint, without a lookup; nil for a name.
    static func literalAddresses(for endpoint: NWEndpoint) -> [SocketAddress]? {
        let port = endpoint.port.rawValue
        switch endpoint.host {
        case .ipv4(let address): return [SocketAddress(ip: address.description, port: port)!]
        case .ipv6(let address): return [SocketAddress(ip: address.description, port: port)!]
        case .name: return nil
        }
    }

    /// The addresses tests fixed for a name (`namesForTesting`), without a thread hop; nil for
    /// any other endpoint.
    static func fixedAddressesForTesting(for endpoint: NWEndpoint) -> [SocketAddress]? {
        guard case .hostPort(.name(let name), _) = endpoint else { return nil }
        return namesForTesting.withLock { $0[name] }?.map { $0.withPort(endpoint.port.rawValue) }
    }

    /// Tests give a name a fixed list of addresses (say, IPv6 and IPv4 with a server on only
    /// one) without touching the machine's resolver.
    static let namesForTesting = Locked<[String: [SocketAddress]]>([:])

    private static func lookUp(_ name: String, port: UInt16) throws -> [SocketAddress] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_DGRAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(name, String(port), &hints, &list)
        guard rc == 0 else {
            // -5 is EAI_NODATA, a GNU extension the Glibc module does not show.
            if rc == EAI_NONAME || rc == -5 { throw NetworkError.dnsNameNotFound(host: name) }
            throw NetworkError.dnsFailure(host: name, message: String(cString: gai_strerror(rc)))
        }
        defer { freeaddrinfo(list) }
        var result: [SocketAddress] = []
        var entry = list
        while let current = entry {
            if let address = current.pointee.ai_addr, let parsed = SocketAddress(address, length: Int(current.pointee.ai_addrlen)),
                !result.contains(parsed)
            {
                result.append(parsed)
            }
            entry = current.pointee.ai_next
        }
        guard !result.isEmpty else { throw NetworkError.dnsNameNotFound(host: name) }
        return result
    }
}
