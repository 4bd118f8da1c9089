import Foundation
import Testing

@testable import Braid

/// Session resumption and TLS 1.3 early data between a Braid client and a Braid listener.
@Suite struct TLSSessionResumptionTests {
    private func earlyDataServer(port: NWEndpoint.Port = .any) async throws -> RunningStreamListener<TLS> {
        let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: port)) { testTLSServer().earlyDataEnabled(true) }
        let task = Task { try await listener.run(echoBytes) }
        try await listener.waitUntilReady()
        return RunningStreamListener(listener: listener, task: task)
    }

    /// One echo of `early` (sent with `sendIdempotent` before the connection starts) then
    /// `later` (sent with `send`); returns the echo and the connection's resumption facts.
    private func exchange(
        _ endpoint: NWEndpoint, cache: TLS.SessionCache, early: Data, later: Data
    ) async throws -> (echo: Data, resumed: Bool, earlyDataAccepted: Bool) {
        let connection = NetworkConnection(to: endpoint) { testTLSClient().earlyDataEnabled(true).sessionCache(cache) }
        defer { connection.cancel() }
        try await connection.sendIdempotent(early)
        try await connection.send(later)
        let echo = try await connection.receive(exactly: early.count + later.count).content
        // A ticket arrives after the handshake: wait for it before the next connection.
        #expect(try await waitUntil { cache.count > 0 }, "no session ticket arrived")
        return (echo, connection.isResumed, connection.earlyDataAccepted)
    }

    /// A ticket earned by a client that skipped the certificate checks does not let a client
    /// that checks resume past them: sharing the cache, the checking client still refuses a
    /// server its authorities do not sign.
    @Test func aTicketResumesOnlyUnderTheChecksThatEarnedIt() async throws {
        let server = try await RunningStreamListener.start(
            TLS().alpn(["echo"]).identity(certificateChainFile: Fixtures.path("untrusted.pem"), privateKeyFile: Fixtures.path("untrusted-key.pem")))
        defer { server.task.cancel() }
        let cache = TLS.SessionCache()
        let lax = NetworkConnection(to: server.endpoint) {
            TLS().alpn(["echo"]).serverName("localhost").insecureAcceptAnyCertificate().sessionCache(cache)
        }
        defer { lax.cancel() }
        try await lax.send(Data("x".utf8))
        _ = try await lax.receive(exactly: 1)
        #expect(try await waitUntil { cache.count > 0 }, "no session ticket arrived")
        #expect(cache.count == 1)
        let strict = NetworkConnection(to: server.endpoint) { testTLSClient().sessionCache(cache) }
        defer { strict.cancel() }
        await #expect(throws: NetworkError.self) { try await strict.send(Data("x".utf8)) }
        #expect(!strict.isResumed)
    }

    /// A ticket earned while presenting a client certificate does not let a client without
    /// one resume past a listener that requires one.
    @Test func aTicketResumesOnlyAsTheClientThatEarnedIt() async throws {
        let server = try await RunningStreamListener.start(
            testTLSServer().peerAuthentication(.required).trust(.certificateAuthorities(file: Fixtures.caFile)))
        defer { server.task.cancel() }
        let cache = TLS.SessionCache()
        let identified = NetworkConnection(to: server.endpoint) {
            testTLSClient().identity(certificateChainFile: Fixtures.path("client.pem"), privateKeyFile: Fixtures.path("client-key.pem"))
                .sessionCache(cache)
        }
        defer { identified.cancel() }
        try await identified.send(Data("x".utf8))
        _ = try await identified.receive(exactly: 1)
        #expect(try await waitUntil { cache.count > 0 }, "no session ticket arrived")
        #expect(cache.count == 1)
        let anonymous = NetworkConnection(to: server.endpoint) { testTLSClient().sessionCache(cache) }
        defer { anonymous.cancel() }
        await #expect(throws: NetworkError.self) {
            try await anonymous.send(Data("y".utf8))
            _ = try await anonymous.receive(exactly: 1)
        }
        #expect(!anonymous.isResumed)
    }

    @Test func aResumedConnectionSendsEarlyDataTheServerAccepts() async throws {
        let server = try await earlyDataServer()
        defer { server.task.cancel() }
        let cache = TLS.SessionCache()
        let early = Data(repeating: 0x45, count: 1000), later = Data("after".utf8)
        let first = try await exchange(server.endpoint, cache: cache, early: early, later: later)
        #expect(first.echo == early + later)
        #expect(!first.resumed && !first.earlyDataAccepted)
        #expect(cache.count == 1)
        let second = try await exchange(server.endpoint, cache: cache, early: early, later: later)
        #expect(second.echo == early + later)
        #expect(second.resumed)
        #expect(second.earlyDataAccepted)
    }

    /// A restarted server (new ticket keys) cannot resume: it refuses the early data, and the
    /// client sends it again after the handshake, ahead of what followed it.
    @Test func refusedEarlyDataIsSentAgainInOrder() async throws {
        let cache = TLS.SessionCache()
        let early = Data(repeating: 0x52, count: 2000), later = Data("then this".utf8)
        let server = try await earlyDataServer()
        let port = server.port
        _ = try await exchange(server.endpoint, cache: cache, early: early, later: later)
        #expect(cache.count == 1)
        server.task.cancel()
        _ = try? await server.task.value
        let restarted = try await earlyDataServer(port: port)
        defer { restarted.task.cancel() }
        let second = try await exchange(restarted.endpoint, cache: cache, early: early, later: later)
        #expect(second.echo == early + later)
        #expect(!second.resumed)
        #expect(!second.earlyDataAccepted)
    }
}
