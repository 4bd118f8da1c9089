import BraidIO
import Foundation
import Glibc
import Testing

@testable import Braid
import BraidCore

/// A connection `waiting` for a path retries when the kernel's interfaces change, not when its
/// backoff timer fires. The tests run the connection on a loop whose thread has entered a
/// network namespace the test made, and give it an hour-long retry timer: it can only become
/// ready through the path.
@Suite(.timeLimit(.minutes(3))) struct WaitingOnPathTests {
    /// A loop inside `namespace`, for the connections made in `body`.
    private static func withLoop<T: Sendable>(
        in namespace: NetworkNamespace, _ body: (NetworkEnvironment) async throws -> T
    ) async throws -> T {
        let loop = try EventLoop(name: "braid-netns-loop")
        defer { loop.shutdown() }
        try await loop.submit { _ in try namespace.enterOnCurrentThread() }
        return try await body(NetworkEnvironment(loop: loop, sockets: UDPSockets()))
    }

    /// When `connection` became ready, stamped by its state handler on the loop.
    private static func stampReady<Stack>(_ connection: NetworkConnection<Stack>) -> ReadyStamp {
        let stamp = ReadyStamp()
        connection.onStateUpdate { _, state in
            if state == .ready { stamp.at.withLock { $0 = $0 ?? ContinuousClock.now } }
        }
        return stamp
    }

    @Test func aWaitingConnectionBecomesReadyWhenItsLinkComesUp() async throws {
        try await NetworkNamespace.with { namespace in
            // 10.88.0.5 is on va's subnet (vb's is another): reachable exactly while va is up.
            try await namespace.addVethPair("va", address: "10.88.0.1", peer: "vb", peerAddress: "10.89.0.2")
            _ = try await namespace.setLink("va", up: false)
            try await Self.withLoop(in: namespace) { environment in
                let port: UInt16 = 47_901
                ClientEstablishment.retryDelaysForTesting.withLock { $0[port] = [.seconds(3600)] }
                defer { _ = ClientEstablishment.retryDelaysForTesting.withLock { $0.removeValue(forKey: port) } }
                let connection = NetworkEnvironment.$current.withValue(environment) {
                    NetworkConnection(to: .hostPort(host: "10.88.0.5", port: NWEndpoint.Port(rawValue: port)!)) { UDP() }
                }
                defer { connection.cancel() }
                // Stamped on the loop as the state changes, so the latency printed does not
                // include the wait for a busy task pool.
                let readyAt = Self.stampReady(connection)
                let states = connection.states
                let observed = Task {
                    var seen: [NetworkConnectionState] = []
                    for await state in states {
                        seen.append(state)
                        if state == .ready { break }
                    }
                    return seen
                }
                connection.start()
                for await state in connection.states {
                    if case .waiting = state { break }
                    try #require(state != .ready, "ready while the link was down")
                }
                // Any retries the link's own events cause before it is up only wait again.
                let up = try await namespace.setLink("va", up: true)
                // Not ready 60 s after the link came up: cancelling ends the states, and the test.
                let watchdog = Task {
                    try await Task.sleep(for: .seconds(60))
                    connection.cancel()
                }
                let seen = await observed.value
                watchdog.cancel()
                print("link up -> ready after \(await readyAt.latency(since: up)) (the retry timer was an hour)")
                let unreachable = NetworkConnectionState.waiting(.system(call: "connect(10.88.0.5:\(port))", errno: ENETUNREACH))
                #expect(Array(seen.prefix(3)) == [.setup, .preparing, unreachable], "\(seen)")
                #expect(seen.last == .ready, "not ready 20 s after the link came up: \(seen)")
                // Between: only waits for the same reason and retries.
                #expect(seen.dropFirst(3).dropLast().allSatisfy { $0 == .preparing || $0 == unreachable }, "\(seen)")
            }
        }
    }

    /// A ready connection whose link goes down is not viable, and viable again when the link
    /// comes back, without being torn down: it stays ready throughout.
    @Test func aConnectionIsNotViableWhileItsLinkIsDownAndIsNotTornDown() async throws {
        try await NetworkNamespace.with { namespace in
            try await namespace.addVethPair("va", address: "10.88.0.1", peer: "vb", peerAddress: "10.89.0.2")
            try await Self.withLoop(in: namespace) { environment in
                let connection = NetworkEnvironment.$current.withValue(environment) {
                    NetworkConnection(to: .hostPort(host: "10.88.0.5", port: 47_902)) { UDP() }
                }
                defer { connection.cancel() }
                let updates = AsyncStream<Bool>.makeStream()
                connection.onViabilityUpdate { _, isViable in updates.continuation.yield(isViable) }
                let paths = Locked<[NWPath]>([])
                connection.onPathUpdate { _, path in paths.withLock { $0.append(path) } }
                // No update within 60 s: the stream ends, and the expectations below fail.
                let watchdog = Task {
                    try await Task.sleep(for: .seconds(60))
                    updates.continuation.finish()
                }
                defer { watchdog.cancel() }
                connection.start()
                for await state in connection.states where state == .ready { break }
                // The first path comes once the loop has read the kernel's interfaces, which may
                // finish after ready: the link goes down only after it.
                #expect(try await waitUntil { !paths.withLock(\.isEmpty) }, "no path came")
                var viability = updates.stream.makeAsyncIterator()
                let down = try await namespace.setLink("va", up: false)
                #expect(await viability.next() == false)
                print("link down -> not viable after \(ContinuousClock.now - down)")
                #expect(connection.state == .ready)
                _ = try await namespace.setLink("va", up: true)
                #expect(await viability.next() == true)
                #expect(connection.state == .ready)
                try await connection.send(Data("still here".utf8))
                // The path events (handlers run in registration order): satisfied over va,
                // unsatisfied saying why, satisfied again.
                let seen = paths.withLock { $0 }
                #expect(seen.map(\.status) == [.satisfied, .unsatisfied, .satisfied], "\(seen)")
                #expect(seen.dropFirst().first?.unsatisfiedDescription == "va, which holds 10.88.0.1, is down", "\(seen)")
                #expect(seen.first?.availableInterfaces.map(\.name) == ["va"], "\(seen)")
            }
        }
    }

    /// A server in one namespace, a client in another, joined by a veth pair whose client end
    /// is down at first: the client's connection waits, the link comes up, and `exchange` runs
    /// over the new path (the retry timer is an hour, so only the path can wake it).
    private static func waitThenConnect<ServerStack: NetworkProtocol, ClientStack: NetworkProtocol>(
        _ name: String, server serverStack: ServerStack, serving: @escaping @Sendable (NetworkConnection<ServerStack>) async throws -> Void,
        client clientStack: ClientStack, exchange: (NetworkConnection<ClientStack>) async throws -> Void
    ) async throws {
        try await NetworkNamespace.with { server in
            try await NetworkNamespace.with { client in
                try await client.addVethPair("qa", address: "10.90.0.1", peer: "qb", peerAddress: "10.90.0.2", peerNamespace: server)
                _ = try await client.setLink("qa", up: false)
                try await withLoop(in: server) { serverEnvironment in
                    let listener = NetworkListener(for: .hostPort(host: "10.90.0.2", port: .any)) { serverStack }
                    // The listener binds in `run`, on the environment's loop (inside the server's namespace).
                    let running = NetworkEnvironment.$current.withValue(serverEnvironment) { Task { try await listener.run(serving) } }
                    defer { running.cancel() }
                    try await listener.waitUntilReady()
                    let port = listener.port!
                    ClientEstablishment.retryDelaysForTesting.withLock { $0[port.rawValue] = [.seconds(3600)] }
                    defer { _ = ClientEstablishment.retryDelaysForTesting.withLock { $0.removeValue(forKey: port.rawValue) } }
                    try await withLoop(in: client) { clientEnvironment in
                        let connection = NetworkEnvironment.$current.withValue(clientEnvironment) {
                            NetworkConnection(to: .hostPort(host: "10.90.0.2", port: port)) { clientStack }
                        }
                        defer { connection.cancel() }
                        let readyAt = stampReady(connection)
                        connection.start()
                        for await state in connection.states {
                            if case .waiting = state { break }
                            try #require(state != .ready, "ready while the link was down")
                        }
                        let up = try await client.setLink("qa", up: true)
                        let watchdog = Task {
                            try await Task.sleep(for: .seconds(60))
                            connection.cancel()
                        }
                        defer { watchdog.cancel() }
                        try await exchange(connection)
                        print("link up -> \(name) connection ready after \(await readyAt.latency(since: up)) (the retry timer was an hour)")
                    }
                }
            }
        }
    }

    /// QUIC, with a handshake to finish.
    @Test func aWaitingQUICConnectionConnectsWhenItsLinkComesUp() async throws {
        let identity = testServer()
        try await Self.waitThenConnect("QUIC", server: identity, serving: echo, client: testClient()) { connection in
            let stream = try await connection.openStream()
            try await stream.send(Data("through the new path".utf8), endOfStream: true)
            let (reply, _) = try await stream.receive(atLeast: 20, atMost: 1024)
            #expect(String(decoding: reply, as: UTF8.self) == "through the new path")
        }
    }

    /// TLS over TCP: the connect that found no route is made again, then the handshake.
    @Test func aWaitingTLSConnectionConnectsWhenItsLinkComesUp() async throws {
        try await Self.waitThenConnect("TLS", server: testTLSServer(), serving: echoBytes, client: testTLSClient()) { connection in
            try await connection.send(Data("through the new path".utf8))
            let (reply, _) = try await connection.receive(atLeast: 20, atMost: 1024)
            #expect(String(decoding: reply, as: UTF8.self) == "through the new path")
        }
    }
}

/// When a connection became ready.
final class ReadyStamp: Sendable {
    let at = Locked<ContinuousClock.Instant?>(nil)

    /// The time from `start` to ready, as text. The states stream can deliver `ready` before
    /// the loop has called the state handler, so this waits for the stamp (with a deadline).
    func latency(since start: ContinuousClock.Instant) async -> String {
        _ = try? await waitUntil { at.withLock { $0 != nil } }
        return at.withLock { $0.map { "\($0 - start)" } } ?? "unknown (no ready stamp)"
    }
}
