import BraidIO
import BraidQUIC
import Foundation
import Glibc
import Synchronization
import Testing

@testable import Braid

/// How a client gets from an endpoint to `ready`: Happy Eyeballs across address families, and
/// the `waiting` state while no path is usable. In memory (`MemoryWorld`), on the world's own
/// ports; the internal hooks only fix what a name resolves to and make a port look unroutable.
/// `anUnknownNameFailsWithoutWaiting` asks the system's resolver.
@Suite(.serialized) struct EstablishmentTests {
    /// A listener on `host` (an IP literal) with `port`.
    private func listener(on host: NWEndpoint.Host, port: NWEndpoint.Port) async throws -> (NetworkListener<QUIC>, Task<Void, any Error>) {
        let listener = NetworkListener(for: .hostPort(host: host, port: port)) {
            testServer()
        }
        let task = Task { try await listener.run(echo) }
        try await listener.waitUntilReady()
        return (listener, task)
    }

    private func echoOnce(_ connection: NetworkConnection<QUIC>) async throws -> Data {
        let stream = try await connection.openStream()
        try await stream.send(Data("ping".utf8), endOfStream: true)
        return try await stream.receive(exactly: 4).content
    }

    /// A name with an IPv6 and an IPv4 address, the server on only one of them, the silent one
    /// listed first: the connection races to the server in both cases. With a 10-minute handshake
    /// timeout and a one-minute limit on the world's virtual time, a client that tried the
    /// addresses in turn (or only the first) fails.
    @Test(.timeLimit(.minutes(10)), arguments: [("::1", "127.0.0.1"), ("127.0.0.1", "::1")])
    func happyEyeballsReachesTheServerOnEitherFamily(serverHost: String, silentHost: String) async throws {
        try await MemoryWorld.run(limit: .seconds(60)) { world in
            // Nobody holds the silent address: what is sent there vanishes.
            let port = world.port()
            let (listener, task) = try await listener(on: NWEndpoint.Host(serverHost), port: port)
            defer { task.cancel() }
            let name = "dual-\(port.rawValue).test"
            // The silent address is listed first, so it is tried first.
            Resolver.namesForTesting.withLock {
                $0[name] = [QUICAddress(ip: silentHost, port: port.rawValue)!, QUICAddress(ip: serverHost, port: port.rawValue)!]
            }
            defer { _ = Resolver.namesForTesting.withLock { $0.removeValue(forKey: name) } }

            let connection = NetworkConnection(to: .hostPort(host: .name(name), port: listener.port!)) {
                testClient().handshakeTimeout(.seconds(600)).idleTimeout(600_000)
            }
            defer { connection.cancel() }
            #expect(try await echoOnce(connection) == Data("ping".utf8))
            #expect(connection.remoteEndpoint == .hostPort(host: NWEndpoint.Host(serverHost), port: listener.port!))
        }
    }

    @Test func happyEyeballsOrderAlternatesFamiliesFromTheFirst() {
        let addresses = ["::1", "::2", "::3", "10.0.0.1", "10.0.0.2"].map { QUICAddress(ip: $0, port: 1)! }
        let ordered = ClientEstablishment.happyEyeballsOrder(addresses).map(\.ipString)
        #expect(ordered == ["::1", "10.0.0.1", "::2", "10.0.0.2", "::3"])
    }

    /// No route for two rounds: the connection waits (with the reason), retries by itself and
    /// becomes ready; the call made meanwhile completes.
    @Test(.timeLimit(.minutes(10))) func noRouteWaitsThenConnectsWhenThePathReturns() async throws {
        try await MemoryWorld.run { _ in
            let server = try await RunningListener.start()
            defer { server.task.cancel() }
            // The port is this world's own: no other test's connection goes there.
            let port = server.listener.port!.rawValue
            ClientEstablishment.routeFailuresForTesting.withLock { $0[port] = (ENETUNREACH, 2) }
            defer { _ = ClientEstablishment.routeFailuresForTesting.withLock { $0.removeValue(forKey: port) } }

            let connection = NetworkConnection(to: server.endpoint) { testClient() }
            let states = connection.states  // subscribed now, before anything can change
            let observed = Task {
                var seen: [NetworkConnectionState] = []
                for await state in states { seen.append(state) }
                return seen
            }
            #expect(try await echoOnce(connection) == Data("ping".utf8))
            connection.cancel()
            let unreachable = NetworkConnectionState.waiting(.system(call: "connect(\(server.endpoint))", errno: ENETUNREACH))
            #expect(await observed.value == [.setup, .preparing, unreachable, .preparing, unreachable, .preparing, .ready, .cancelled])
        }
    }

    /// Cancelling a waiting connection ends the calls that wait on it.
    @Test(.timeLimit(.minutes(10))) func cancellingAWaitingConnectionFailsPendingCalls() async throws {
        try await MemoryWorld.run { world in
            let endpoint = world.nobody()
            guard case .hostPort(_, let port) = endpoint else { return }
            ClientEstablishment.routeFailuresForTesting.withLock { $0[port.rawValue] = (EHOSTUNREACH, 1000) }
            defer { _ = ClientEstablishment.routeFailuresForTesting.withLock { $0.removeValue(forKey: port.rawValue) } }

            let connection = NetworkConnection(to: endpoint) { testClient() }
            let pending = Task { try await connection.openStream() }
            for await state in connection.states {
                if case .waiting = state { break }
            }
            connection.cancel()
            await #expect(throws: NetworkError.cancelled) { _ = try await pending.value }
            #expect(connection.state == .cancelled)
        }
    }

    @Test(.timeLimit(.minutes(10))) func anUnknownNameFailsWithoutWaiting() async throws {
        let connection = NetworkConnection(to: .hostPort(host: "no-such-host.invalid", port: 4433)) { testClient() }
        await #expect(throws: NetworkError.dnsNameNotFound(host: "no-such-host.invalid")) {
            _ = try await connection.openStream()
        }
        #expect(connection.state == .failed(.dnsNameNotFound(host: "no-such-host.invalid")))
    }
}
