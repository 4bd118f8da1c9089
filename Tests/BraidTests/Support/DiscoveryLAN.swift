import BraidCore
import BraidDiscovery
import BraidDiscoveryIO
import BraidIO
import Foundation

@testable import Braid

/// One host of a `DiscoveryLAN`: a network namespace with a link `eth0` (10.77.0.N/24) to the
/// LAN's bridge, an event loop inside it, and a multicast DNS discovery of its own on that loop
/// (its sockets and interfaces are the namespace's). Browsers, listeners and connections made
/// inside `run` run there.
final class LANHost: Sendable {
    let namespace: NetworkNamespace
    /// The address of each of its links, by link name.
    let addresses: [String: String]
    /// The address of its first link.
    let address: String
    let environment: NetworkEnvironment
    let discovery: MDNSDiscovery

    init(namespace: NetworkNamespace, addresses: [String: String], address: String, environment: NetworkEnvironment, discovery: MDNSDiscovery) {
        self.namespace = namespace
        self.addresses = addresses
        self.address = address
        self.environment = environment
        self.discovery = discovery
    }

    /// Runs `body` with this host's loop as the task's network environment.
    func run<T: Sendable>(_ body: () async throws -> T) async rethrows -> T {
        try await NetworkEnvironment.$current.withValue(environment) { try await body() }
    }

    /// Runs `body` (synchronous: `start(queue:)` and such) in this host's environment.
    func runNow<T>(_ body: () throws -> T) rethrows -> T {
        try NetworkEnvironment.$current.withValue(environment) { try body() }
    }
}

/// Hosts on Ethernet segments, each host in a network namespace of its own, each segment a
/// bridge (multicast snooping off, so every host on it hears every multicast DNS packet) in a
/// namespace of its own: the set-up of the discovery tests between hosts.
enum DiscoveryLAN {
    /// One host's link to one segment: `name` in the host, address 10.(77 + segment).0.(host + 1)/24.
    struct Link: Sendable {
        var host: Int
        var name: String
        var segment: Int
    }

    /// `count` hosts, by default each with `eth0` on segment 0 (10.77.0.1, .2, ...), their
    /// discoveries publishing `recordTTLs`.
    static func with<T: Sendable>(
        hosts count: Int, links: [Link]? = nil, recordTTLs: MDNSResponder.RecordTTLs = .standard, _ body: ([LANHost]) async throws -> T
    ) async throws -> T {
        let links = links ?? (0..<count).map { Link(host: $0, name: "eth0", segment: 0) }
        let segments = Set(links.map(\.segment)).sorted()
        return try await NetworkNamespace.with { lan in
            for segment in segments {
                try await lan.ip("link", "add", "br\(segment)", "type", "bridge", "mcast_snooping", "0")
                try await lan.ip("link", "set", "br\(segment)", "up")
            }
            return try await withNamespaces(count) { namespaces in
                var hosts: [LANHost] = []
                var loops: [EventLoop] = []
                defer { for loop in loops { loop.shutdown() } }
                do {
                    for (index, link) in links.enumerated() {
                        let address = "10.\(77 + link.segment).0.\(link.host + 1)"
                        try await attach(namespaces[link.host], link: link.name, as: address, port: "p\(index)", to: "br\(link.segment)", in: lan)
                    }
                    for (index, namespace) in namespaces.enumerated() {
                        let own = links.filter { $0.host == index }
                        let addresses = Dictionary(uniqueKeysWithValues: own.map { ($0.name, "10.\(77 + $0.segment).0.\(index + 1)") })
                        let loop = try EventLoop(name: "braid-lan-\(index)")
                        loops.append(loop)
                        try await loop.submit { _ in try namespace.enterOnCurrentThread() }
                        let discovery = try await MDNSDiscovery.attach(to: loop, recordTTLs: recordTTLs)
                        let environment = NetworkEnvironment(loop: loop, sockets: UDPSockets())
                        hosts.append(LANHost(
                            namespace: namespace, addresses: addresses, address: addresses[own[0].name]!, environment: environment, discovery: discovery))
                    }
                    let result = try await body(hosts)
                    for host in hosts { await host.discovery.detach() }
                    return result
                } catch {
                    for host in hosts { await host.discovery.detach() }
                    throw error
                }
            }
        }
    }

    /// `count` fresh namespaces for `body`.
    private static func withNamespaces<T: Sendable>(_ count: Int, _ body: ([NetworkNamespace]) async throws -> T) async throws -> T {
        guard count > 0 else { return try await body([]) }
        return try await NetworkNamespace.with { first in
            try await withNamespaces(count - 1) { rest in try await body([first] + rest) }
        }
    }

    /// A veth pair: `link` with `address` in `host`, `port` on `bridge` in `lan`. Without
    /// IPv6 link-local addresses (their duplicate address detection would add traffic the
    /// tests do not need): multicast DNS runs over IPv4.
    private static func attach(_ host: NetworkNamespace, link: String, as address: String, port: String, to bridge: String, in lan: NetworkNamespace) async throws {
        try await host.ip("link", "add", link, "type", "veth", "peer", "name", port, "netns", lan.name)
        try await host.ip("link", "set", link, "addrgenmode", "none")
        try await host.ip("address", "add", "\(address)/24", "dev", link)
        try await host.ip("link", "set", link, "up")
        try await lan.ip("link", "set", port, "addrgenmode", "none")
        try await lan.ip("link", "set", port, "master", bridge)
        try await lan.ip("link", "set", port, "up")
    }
}
