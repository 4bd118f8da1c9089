import BraidIO
import BraidTLS
import Foundation
import Synchronization
import Testing

@testable import Braid

/// The public API end to end (`NetworkListener`, `NetworkConnection(to:)`, establishment,
/// streams, datagrams, resumption) on a virtual loop over an in-memory network: the same code
/// as over loopback, less the kernel, with the test moving time.
@Suite struct MemoryNetworkTests {
    /// A virtual loop, its network, and a listener on 127.0.0.1:4433 running `handler`.
    private struct World {
        let loop: EventLoop
        let network: MemoryNetwork
        let endpoint: NWEndpoint = .hostPort(host: "127.0.0.1", port: 4433)

        init(delay: Duration = .milliseconds(5)) throws {
            loop = try EventLoop(virtualTimeStartingAt: MonotonicInstant(nanoseconds: 1_000_000_000))
            network = MemoryNetwork(loop: loop, delay: delay)
        }

        /// Runs `body` in the network's environment with a listener serving `handler`, moving
        /// virtual time until `body` returns.
        func run<T: Sendable>(
            limit: Duration = .seconds(30), configure: @escaping @Sendable (QUIC) -> QUIC = { $0 },
            handler: @escaping @Sendable (NetworkConnection<QUIC>) async throws -> Void = echo,
            _ body: @escaping @Sendable (NWEndpoint) async throws -> T
        ) async throws -> T {
            try await run(limit: limit, configure: configure, handler: handler) { endpoint, _ in try await body(endpoint) }
        }

        /// As above, with the listener for `body` too.
        func run<T: Sendable>(
            limit: Duration = .seconds(30), configure: @escaping @Sendable (QUIC) -> QUIC = { $0 },
            handler: @escaping @Sendable (NetworkConnection<QUIC>) async throws -> Void = echo, connectionLimit: Int = 10_000,
            withListener body: @escaping @Sendable (NWEndpoint, NetworkListener<QUIC>) async throws -> T
        ) async throws -> T {
            let endpoint = endpoint
            return try await NetworkEnvironment.$current.withValue(network.environment) {
                let listener = NetworkListener(for: endpoint) {
                    configure(QUIC(alpn: ["echo"]).identity(
                        certificateChainFile: Fixtures.path("server.pem"), privateKeyFile: Fixtures.path("server-key.pem")))
                }
                listener.newConnectionLimit = connectionLimit
                let serving = Task { try await listener.run(handler) }
                defer { serving.cancel() }
                return try await loop.drive(limit: limit) {
                    for await state in listener.states where state == .ready { break }
                    return try await body(endpoint, listener)
                }
            }
        }
    }

    @Test(.timeLimit(.minutes(3))) func echoOverOneHundredConcurrentStreams() async throws {
        let world = try World()
        let intact = try await world.run { endpoint in
            let connection = NetworkConnection(to: endpoint) { testClient() }
            defer { connection.cancel() }
            return try await echoOnConcurrentStreams(connection, count: 100)
        }
        #expect(intact == 100)
    }

    /// Twenty clients at once, each its own connection through establishment, each echoed.
    @Test(.timeLimit(.minutes(3))) func aListenerServesTwentyClients() async throws {
        let world = try World()
        let served = try await world.run { endpoint in
            try await withThrowingTaskGroup(of: Bool.self) { group in
                for index in 0..<20 {
                    group.addTask {
                        try await withNetworkConnection(to: endpoint) { testClient() } _: { connection in
                            let stream = try await connection.openStream()
                            try await stream.send(Data("client \(index)".utf8), endOfStream: true)
                            return try await stream.receive(atLeast: 1, atMost: 100).content == Data("client \(index)".utf8)
                        }
                    }
                }
                return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
        }
        #expect(served == 20)
    }

    @Test(.timeLimit(.minutes(3))) func statesGoPreparingReadyCancelled() async throws {
        let world = try World()
        let seen = try await world.run { endpoint in
            let connection = NetworkConnection(to: endpoint) { testClient() }
            let observed = Task {
                var seen: [NetworkConnection<QUIC>.State] = []
                for await state in connection.states { seen.append(state) }
                return seen
            }
            let stream = try await connection.openStream()
            try await stream.send(Data([1]), endOfStream: true)
            _ = try await stream.receive(atLeast: 1, atMost: 1)
            connection.cancel()
            return await observed.value
        }
        #expect(seen.filter { $0 != .setup } == [.preparing, .ready, .cancelled])
    }

    /// The handshake's failures reach the caller as the same errors as over loopback.
    @Test(.timeLimit(.minutes(3))) func handshakeFailuresHaveTheirReasons() async throws {
        let world = try World()
        try await world.run { endpoint in
            let wrongALPN = NetworkConnection(to: endpoint) { testClient(alpn: ["h3"]) }
            await #expect(throws: NetworkError.alpnMismatch(offered: ["h3"])) { _ = try await wrongALPN.openStream() }
            let untrusted = NetworkConnection(to: endpoint) { QUIC(alpn: ["echo"]).serverName("localhost") }
            await #expect(throws: NetworkError.certificateRejected(.untrusted)) { _ = try await untrusted.openStream() }
            let nobody: NWEndpoint = .hostPort(host: "127.0.0.1", port: 9)
            let unanswered = NetworkConnection(to: nobody) { testClient().handshakeTimeout(.seconds(1)) }
            await #expect(throws: NetworkError.noResponse(endpoint: nobody.description, timeout: .seconds(1))) {
                _ = try await unanswered.openStream()
            }
        }
    }

    /// A second connection resumes with the first one's ticket and its request goes in 0-RTT.
    @Test(.timeLimit(.minutes(3))) func resumptionDeliversEarlyData() async throws {
        let world = try World()
        let cache = QUIC.SessionCache()
        let (reply, early) = try await world.run { endpoint in
            try await withNetworkConnection(to: endpoint) { testClient().sessionCache(cache) } _: { connection in
                let stream = try await connection.openStream()
                try await stream.send(Data("first".utf8), endOfStream: true)
                _ = try await stream.receive(atLeast: 1, atMost: 100)
                // The ticket comes after the handshake: give it a round trip.
                try await Task.sleep(for: .milliseconds(20))
            }
            let resumed = NetworkConnection(to: endpoint) { testClient().sessionCache(cache) }
            defer { resumed.cancel() }
            let stream = try await resumed.openStream()
            try await stream.sendIdempotent(Data("again".utf8), endOfStream: true)
            let reply = try await stream.receive(atLeast: 1, atMost: 100).content
            return (reply, resumed.earlyDataAccepted)
        }
        #expect(reply == Data("again".utf8))
        #expect(early)
    }

    /// A listener's live counts follow its connections, and a client over its address's limit
    /// is refused with an error that says the server is busy.
    @Test(.timeLimit(.minutes(3))) func aBusyListenerSaysSo() async throws {
        let world = try World()
        try await world.run(configure: { $0.newConnectionLimitPerAddress(2) }) { endpoint, listener in
            let held = [NetworkConnection(to: endpoint) { testClient() }, NetworkConnection(to: endpoint) { testClient() }]
            defer { for connection in held { connection.cancel() } }
            for connection in held {
                let stream = try await connection.openStream()
                try await stream.send(Data([1]), endOfStream: false)
                _ = try await stream.receive(atLeast: 1, atMost: 1)
            }
            let statistics = try #require(await listener.statistics)
            #expect(statistics.connections == 2)
            #expect(statistics.halfOpenHandshakes == 0)
            #expect(statistics.streams == 2)
            let refused = NetworkConnection(to: endpoint) { testClient() }
            do {
                _ = try await refused.openStream()
                Issue.record("a third connection from the same address was served")
            } catch let error as NetworkError {
                guard case .serverBusy(_, let reason) = error else {
                    Issue.record("expected serverBusy, got \(error)")
                    return
                }
                #expect(reason == "server busy: too many connections from this address")
                #expect(error.description.contains("is busy and refused the connection"))
            }
            #expect(await listener.statistics?.refusedConnections == 1)
        }
    }

    /// At `newConnectionLimit` a new client takes the place of the connection idle longest,
    /// whose client learns that the server was busy; a client arriving while the only
    /// connection has a stream open is refused as busy.
    @Test(.timeLimit(.minutes(3))) func aFullListenerEvictsTheIdleConnection() async throws {
        let world = try World()
        try await world.run(connectionLimit: 1) { endpoint, listener in
            let idle = NetworkConnection(to: endpoint) { testClient() }
            defer { idle.cancel() }
            #expect(try await echoOnConcurrentStreams(idle, count: 1) == 1)
            // Every stream finished: the connection is idle.
            try await Task.sleep(for: .milliseconds(50))
            let newcomer = NetworkConnection(to: endpoint) { testClient() }
            defer { newcomer.cancel() }
            let held = try await newcomer.openStream()
            try await held.send(Data([7]), endOfStream: false)
            _ = try await held.receive(atLeast: 1, atMost: 1)
            for await state in idle.states {
                guard case .failed(let error) = state else { continue }
                guard case .serverBusy(_, let reason) = error else {
                    Issue.record("the evicted connection failed with \(error), not serverBusy")
                    break
                }
                #expect(reason == "server busy: idle connection closed to make room")
                #expect(error.description.contains("closed this idle connection"), "\(error)")
                break
            }
            #expect(await listener.statistics?.evictedConnections == 1)

            // The newcomer's stream is open: nothing is idle, so the next client is refused.
            let refused = NetworkConnection(to: endpoint) { testClient() }
            await #expect(throws: NetworkError.serverBusy(endpoint: endpoint.description, reason: "server busy: connection limit reached")) {
                _ = try await refused.openStream()
            }
        }
    }
}
