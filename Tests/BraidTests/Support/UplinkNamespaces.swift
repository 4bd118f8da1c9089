import BraidCore
import BraidIO
import Foundation
import Testing

@testable import Braid

/// A client namespace joined to a server namespace by veth pairs (each pair an uplink), the
/// server's address 10.76.0.9 on its loopback, reached through the client's default routes:
/// the set-up of the interface-parameter and path-change tests. Which uplink a connection used
/// is what the server sees: the source address of its packets.
enum UplinkNamespaces {
    static let service = "10.76.0.9"

    /// A client and a server namespace, the server's address on its loopback.
    static func withNamespaces<T: Sendable>(_ body: (_ client: NetworkNamespace, _ server: NetworkNamespace) async throws -> T) async throws -> T {
        try await NetworkNamespace.with { server in
            try await NetworkNamespace.with { client in
                try await server.ip("address", "add", "\(service)/32", "dev", "lo")
                return try await body(client, server)
            }
        }
    }

    /// An uplink `name` (10.X.0.1 in the client) to the server (10.X.0.2), with a default
    /// route through it of `metric`.
    static func addUplink(_ name: String, subnet: Int, metric: Int, client: NetworkNamespace, server: NetworkNamespace) async throws {
        try await client.addVethPair(name, address: "10.\(subnet).0.1", peer: "s\(name)", peerAddress: "10.\(subnet).0.2", peerNamespace: server)
        try await client.ip("route", "add", "default", "via", "10.\(subnet).0.2", "dev", name, "metric", "\(metric)")
    }

    /// Two uplinks: `wwan7` (cellular by its name, so expensive; 10.74.0.1, metric 10: the
    /// kernel's choice) and `ipw2` (other; 10.75.0.1, metric 20).
    static func addTwoUplinks(client: NetworkNamespace, server: NetworkNamespace) async throws {
        try await addUplink("wwan7", subnet: 74, metric: 10, client: client, server: server)
        try await addUplink("ipw2", subnet: 75, metric: 20, client: client, server: server)
    }

    /// A loop inside `namespace`, for the connections and listeners made in `body`.
    static func withLoop<T: Sendable>(in namespace: NetworkNamespace, _ body: (NetworkEnvironment) async throws -> T) async throws -> T {
        let loop = try EventLoop(name: "braid-netns-loop")
        defer { loop.shutdown() }
        try await loop.submit { _ in try namespace.enterOnCurrentThread() }
        return try await body(NetworkEnvironment(loop: loop, sockets: UDPSockets()))
    }

    /// Runs a listener on the server's address in `environment` (the server's namespace) that
    /// records where each connection came from; returns the port.
    static func serve<Stack: NetworkProtocol>(
        _ stack: Stack, in environment: NetworkEnvironment, peers: PeerLog, requiredInterface: NWInterface? = nil,
        _ handler: @escaping @Sendable (NetworkConnection<Stack>) async throws -> Void = { _ in }
    ) async throws -> (port: NWEndpoint.Port, task: Task<Void, any Error>) {
        var parameters = NetworkParameters.parameters { stack }
        if let requiredInterface { parameters = parameters.requiredInterface(requiredInterface) }
        let listener = NetworkListener(for: .hostPort(host: .init(service), port: .any), using: parameters)
        let task = NetworkEnvironment.$current.withValue(environment) {
            Task {
                try await listener.run { connection in
                    peers.record(connection.endpoint)
                    try await handler(connection)
                }
            }
        }
        try await listener.waitUntilReady()
        return (listener.port!, task)
    }

    /// Waits until `connection` is ready (at most 60 s), failing with its last state.
    static func ready<Stack>(_ connection: NetworkConnection<Stack>) async throws {
        let watchdog = Task {
            try await Task.sleep(for: .seconds(60))
            connection.cancel()
        }
        defer { watchdog.cancel() }
        connection.start()
        var last: NetworkConnectionState?
        for await state in connection.states {
            switch state {
            case .ready: return
            case .failed(let error): throw error
            case .cancelled: throw NamespaceFailure("not ready within 20 s; last state \(last.map { "\($0)" } ?? "none")")
            default: last = state
            }
        }
    }

    /// Waits for the first `waiting` state and returns its error.
    static func waitingError<Stack>(_ connection: NetworkConnection<Stack>) async throws -> NetworkError {
        for await state in connection.states {
            if case .waiting(let error) = state { return error }
            if state == .ready { throw NamespaceFailure("ready, but no allowed interface existed") }
            if case .failed(let error) = state { throw error }
        }
        throw NamespaceFailure("the connection ended without waiting")
    }
}

/// The client addresses a server saw, in order.
final class PeerLog: Sendable {
    private let peers = Locked<[String]>([])
    private let taken = Locked(0)

    func record(_ endpoint: NWEndpoint) {
        guard case .hostPort(let host, _) = endpoint else { return }
        peers.withLock { $0.append("\(host)") }
    }

    var count: Int { peers.withLock(\.count) }

    /// The next address not returned yet, waiting up to 10 s for it.
    func next() async throws -> String {
        let index = taken.withLock { $0 }
        for _ in 0..<1000 {
            if let peer = peers.withLock({ $0.count > index ? $0[index] : nil }) {
                taken.withLock { $0 += 1 }
                return peer
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw NamespaceFailure("the server saw no new connection within 10 s (it saw \(peers.withLock { $0 }))")
    }
}
