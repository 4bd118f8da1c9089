import BraidIO
import BraidQUIC
import Foundation
import Glibc
import Synchronization
import Testing

@testable import Braid

/// How a client gets from an endpoint to `ready`: Happy Eyeballs across address families, and
/// the `waiting` state while no path is usable. The connections are real (loopback); the
/// internal hooks only fix what a name resolves to and make a port look unroutable.
@Suite(.serialized) struct EstablishmentTests {
    /// A listener on `host` (an IP literal) with a system-chosen port.
    private func listener(on host: NWEndpoint.Host) async throws -> (NetworkListener<QUIC>, Task<Void, any Error>) {
        let listener = NetworkListener(for: .hostPort(host: host, port: .any)) {
            QUIC(alpn: ["echo"]).identity(
                certificateChainFile: Fixtures.path("server.pem"), privateKeyFile: Fixtures.path("server-key.pem"))
        }
        let task = Task { try await listener.run(echo) }
        for await state in listener.states {
            if state == .ready { break }
            if case .failed(let error) = state { throw error }
        }
        return (listener, task)
    }

    private func echoOnce(_ connection: NetworkConnection<QUIC>) async throws -> Data {
        let stream = try await connection.openStream()
        try await stream.send(Data("ping".utf8), endOfStream: true)
        return try await stream.receive(exactly: 4).content
    }

    /// A name with an IPv6 and an IPv4 address, the server on only one of them, the silent one
    /// listed first: the connection races to the server in both cases. With a 10-minute handshake
    /// timeout and a one-minute limit on the test, a client that tried the addresses in turn
    /// (or only the first) fails.
    @Test(.timeLimit(.minutes(3)), arguments: [("::1", "127.0.0.1"), ("127.0.0.1", "::1")])
    func happyEyeballsReachesTheServerOnEitherFamily(serverHost: String, silentHost: String) async throws {
        // The silent address is held by a socket that never answers: a free port there could be
        // taken by another test's listener (the suite runs in parallel), which the client would
        // reach instead and see closed or reset when that test ended. A port already taken on
        // the silent host means another listener, on another port.
        var attempt: (listener: NetworkListener<QUIC>, task: Task<Void, any Error>, silent: UDPSocket)?
        for _ in 0..<20 where attempt == nil {
            let (listener, task) = try await listener(on: NWEndpoint.Host(serverHost))
            if let silent = try? UDPSocket(bindTo: SocketAddress(ip: silentHost, port: listener.port!.rawValue)!) {
                attempt = (listener, task, silent)
            } else {
                task.cancel()
                _ = try? await task.value
            }
        }
        let (listener, task, silent) = try #require(attempt, "no port free on both \(serverHost) and \(silentHost)")
        defer { task.cancel(); silent.close() }
        let port = listener.port!.rawValue
        let name = "dual-\(port).test"
        // The silent address is listed first, so it is tried first.
        Resolver.namesForTesting.withLock {
            $0[name] = [QUICAddress(ip: silentHost, port: port)!, QUICAddress(ip: serverHost, port: port)!]
        }
        defer { _ = Resolver.namesForTesting.withLock { $0.removeValue(forKey: name) } }

        let connection = NetworkConnection(to: .hostPort(host: .name(name), port: listener.port!)) {
            testClient().handshakeTimeout(.seconds(600)).idleTimeout(600_000)
        }
        defer { connection.cancel() }
        #expect(try await echoOnce(connection) == Data("ping".utf8))
        #expect(connection.remoteEndpoint == .hostPort(host: NWEndpoint.Host(serverHost), port: listener.port!))
    }

    @Test func happyEyeballsOrderAlternatesFamiliesFromTheFirst() {
        let addresses = ["::1", "::2", "::3", "10.0.0.1", "10.0.0.2"].map { QUICAddress(ip: $0, port: 1)! }
        let ordered = ClientEstablishment.happyEyeballsOrder(addresses).map(\.ipString)
        #expect(ordered == ["::1", "10.0.0.1", "::2", "10.0.0.2", "::3"])
    }

    /// No route for two rounds: the connection waits (with the reason), retries by itself and
    /// becomes ready; the call made meanwhile completes.
    @Test func noRouteWaitsThenConnectsWhenThePathReturns() async throws {
        let server = try await RunningListener.start()
        defer { server.task.cancel() }
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

    /// Cancelling a waiting connection ends the calls that wait on it.
    @Test func cancellingAWaitingConnectionFailsPendingCalls() async throws {
        let port: UInt16 = 9
        ClientEstablishment.routeFailuresForTesting.withLock { $0[port] = (EHOSTUNREACH, 1000) }
        defer { _ = ClientEstablishment.routeFailuresForTesting.withLock { $0.removeValue(forKey: port) } }

        let connection = NetworkConnection(to: .hostPort(host: "127.0.0.1", port: 9)) { testClient() }
        let pending = Task { try await connection.openStream() }
        for await state in connection.states {
            if case .waiting = state { break }
        }
        connection.cancel()
        await #expect(throws: NetworkError.cancelled) { _ = try await pending.value }
        #expect(connection.state == .cancelled)
    }

    @Test(.timeLimit(.minutes(3))) func anUnknownNameFailsWithoutWaiting() async throws {
        let connection = NetworkConnection(to: .hostPort(host: "no-such-host.invalid", port: 4433)) { testClient() }
        await #expect(throws: NetworkError.dnsNameNotFound(host: "no-such-host.invalid")) {
            _ = try await connection.openStream()
        }
        #expect(connection.state == .failed(.dnsNameNotFound(host: "no-such-host.invalid")))
    }
}
