import BraidIO
import Foundation
import Synchronization
import Testing

@testable import Braid

/// TLS and TCP connections and listeners on a virtual loop over in-memory sockets
/// (`MemoryStreamNetwork`): the public API, the byte-stream channel and the establishment run
/// as for real, while the test moves time, so timeouts are exact and take no wall-clock time.
@Suite struct VirtualByteStreamTests {
    private struct Setup {
        let loop: EventLoop
        let network: MemoryStreamNetwork
        let environment: NetworkEnvironment

        init() throws {
            loop = try EventLoop(virtualTimeStartingAt: MonotonicInstant(nanoseconds: 1_000_000_000))
            network = MemoryStreamNetwork(loop: loop)
            environment = NetworkEnvironment(loop: loop, sockets: UDPSockets(), streamSockets: network)
        }

        /// An echoing listener for `stack` on the virtual network, and a connection to it made
        /// by `connect`; the caller cancels the task that runs the listener.
        func echoPair<Stack: StreamProtocol>(
            listening stack: @escaping @Sendable () -> Stack, connecting connect: @escaping @Sendable () -> Stack
        ) async throws -> (connection: NetworkConnection<Stack>, listening: Task<Void, any Error>) {
            let listener = NetworkEnvironment.$current.withValue(environment) {
                NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any)) { stack() }
            }
            let running = NetworkEnvironment.$current.withValue(environment) { Task { try await listener.run(echoBytes) } }
            let port = try await loop.drive {
                for await state in listener.states where state == .ready { break }
                return listener.port!
            }
            let connection = NetworkEnvironment.$current.withValue(environment) {
                NetworkConnection(to: .hostPort(host: "127.0.0.1", port: port)) { connect() }
            }
            return (connection, running)
        }
    }

    @Test(.timeLimit(.minutes(3))) func tlsEchoThroughAListenerOnAVirtualLoop() async throws {
        let setup = try Setup()
        defer { setup.loop.shutdown() }
        let (connection, running) = try await setup.echoPair(listening: { testTLSServer() }, connecting: { testTLSClient() })
        defer { running.cancel() }
        defer { connection.cancel() }
        let payload = pattern(seed: 9, count: 300_000)
        let echoed = try await setup.loop.drive {
            try await connection.send(payload, endOfStream: true)
            return try await receiveAll(connection)
        }
        #expect(echoed == payload)
        #expect(connection.negotiatedALPN == "echo")
    }

    /// Runs `body` with a TCP connection to an echo server on a virtual loop, once ready; the
    /// loop runs only while `body` drives it.
    private func withReadyTCPEcho(_ body: (Setup, NetworkConnection<TCP>) async throws -> Void) async throws {
        let setup = try Setup()
        defer { setup.loop.shutdown() }
        let (connection, running) = try await setup.echoPair(listening: { TCP() }, connecting: { TCP() })
        defer { running.cancel() }
        defer { connection.cancel() }
        connection.start()
        try await setup.loop.drive {
            for await state in connection.states where state == .ready { break }
        }
        try await body(setup, connection)
    }

    /// A hundred small sends queued while the loop is busy leave in one write instead of a
    /// hundred (they are copied into one shared 16 KiB block; a gathered sendmsg takes up to 64
    /// regions besides), and arrive whole and in order.
    @Test(.timeLimit(.minutes(3))) func smallTCPSendsLeaveInGatheredWrites() async throws {
        try await withReadyTCPEcho { setup, connection in try await Self.smallSendsLeaveInOneWrite(setup, connection) }
    }

    private static func smallSendsLeaveInOneWrite(_ setup: Setup, _ connection: NetworkConnection<TCP>) async throws {
        // The loop does not run until driven: every send is queued first.
        let messages = (0..<100).map { pattern(seed: UInt64($0), count: 100) }
        for message in messages { try await connection.send(message) }
        try await connection.send([UInt8](), endOfStream: true)
        let echoed = try await setup.loop.drive { try await receiveAll(connection) }
        #expect(echoed == messages.flatMap { $0 })
        let network = setup.network
        let writes = try await setup.loop.drive {
            try await setup.loop.submit { _ in network.connectedSocketCounters().map(\.sendmsgCalls) }
        }
        #expect(writes == [1], "write calls of the client's socket: \(writes)")
    }

    /// Large sends on plain TCP keep the caller's bytes (no copy) until the socket has them;
    /// one queued behind small sends not yet written is copied then. Either way the peer gets
    /// every byte in order, and the caller may change its own copy of the value right after
    /// the send returns.
    @Test(.timeLimit(.minutes(3))) func largeTCPSendsBorrowedOrCopiedArriveInOrder() async throws {
        try await withReadyTCPEcho { setup, connection in try await Self.largeSendsArriveInOrder(setup, connection) }
    }

    private static func largeSendsArriveInOrder(_ setup: Setup, _ connection: NetworkConnection<TCP>) async throws {
        // The loop does not run until driven: small sends, then a large one behind them.
        var expected: [UInt8] = []
        for seed in 0..<5 {
            let small = pattern(seed: UInt64(seed), count: 300)
            expected += small
            try await connection.send(small)
        }
        var large = Data(pattern(seed: 99, count: 40_000))
        expected += large
        try await connection.send(large)
        large.resetBytes(in: 0..<large.count)  // the sender's own copy; what was sent stays
        let last = pattern(seed: 100, count: 50_000)
        expected += last
        let echoed = try await setup.loop.drive {
            try await connection.send(last, endOfStream: true)
            return try await receiveAll(connection)
        }
        #expect(echoed == expected)
    }

    /// A server that accepts TCP but never answers the ClientHello: the client fails with
    /// `noResponse` once the handshake timeout has passed, in virtual time.
    @Test(.timeLimit(.minutes(3))) func aSilentTLSServerTimesOutTheHandshake() async throws {
        let setup = try Setup()
        defer { setup.loop.shutdown() }
        // Listening, but nobody ever accepts or reads.
        let network = setup.network
        let silent = try await setup.loop.drive {
            try await setup.loop.submit { _ in
                try network.listen(on: SocketAddress(ip: "127.0.0.1", port: 0)!, options: TCPOptions(), reusePort: false, backlog: 8).localAddress
            }
        }
        let connection = NetworkEnvironment.$current.withValue(setup.environment) {
            NetworkConnection(to: .hostPort(host: "127.0.0.1", port: NWEndpoint.Port(integerLiteral: silent.port))) {
                testTLSClient().handshakeTimeout(.seconds(3))
            }
        }
        let started = setup.loop.virtualNow!
        let outcome = try await setup.loop.drive(limit: .seconds(10), step: .milliseconds(10)) {
            do {
                try await connection.send(Data("hello?".utf8))
                _ = try await connection.receive(exactly: 1)
                return NetworkError.internalError("answered")
            } catch let error as NetworkError {
                return error
            }
        }
        #expect(outcome == .noResponse(endpoint: "127.0.0.1:\(silent.port)", timeout: .seconds(3)))
        let took = setup.loop.virtualNow! - started
        #expect(took >= .seconds(3) && took < .seconds(4))
    }
}
