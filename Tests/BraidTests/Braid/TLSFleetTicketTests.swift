import Foundation
import Testing

@testable import Braid

/// TLS listeners sharing `QUIC.FleetKeys`: a ticket one of them issues resumes on the other
/// (the two listen on 127.0.0.1 and 127.0.0.2 with one port and one certificate name, so the
/// client offers the ticket to both), also after the keys rotate within their overlap; a
/// listener with keys of its own makes the client do a full handshake.
@Suite(.timeLimit(.minutes(3))) struct TLSFleetTicketTests {
    private func listen(on host: String, port: NWEndpoint.Port, keys: QUIC.FleetKeys) async throws -> RunningStreamListener<TLS> {
        let listener = NetworkListener(for: .hostPort(host: .init(host), port: port)) { testTLSServer().fleetKeys(keys) }
        let task = Task { try await listener.run(echoBytes) }
        try await listener.waitUntilReady()
        return RunningStreamListener(listener: listener, task: task)
    }

    /// One echo to `host`; returns whether the connection resumed, after its ticket (if any) is in `cache`.
    private func echo(_ host: String, port: NWEndpoint.Port, cache: TLS.SessionCache) async throws -> Bool {
        let connection = NetworkConnection(to: .hostPort(host: .init(host), port: port)) { testTLSClient().sessionCache(cache) }
        defer { connection.cancel() }
        try await connection.send(Data("fleet".utf8))
        #expect(try await connection.receive(exactly: 5).content == Data("fleet".utf8))
        // A ticket arrives after the handshake: wait (at most 60 s) for it before the next connection.
        let deadline = ContinuousClock.now + .seconds(60)
        while cache.count == 0 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        return connection.isResumed
    }

    @Test(arguments: [true, false]) func aTicketFromOneListenerResumesOnAnotherHoldingTheSameKeys(sharing: Bool) async throws {
        let secret = Data(repeating: 0x42, count: 32)
        let first = try await listen(on: "127.0.0.1", port: .any, keys: try QUIC.FleetKeys(secrets: [secret]))
        defer { first.task.cancel() }
        let port = try #require(first.listener.port)
        let secondKeys = try QUIC.FleetKeys(secrets: [sharing ? secret : Data(repeating: 0x43, count: 32)])
        let second = try await listen(on: "127.0.0.2", port: port, keys: secondKeys)
        defer { second.task.cancel() }
        let cache = TLS.SessionCache()
        #expect(try await echo("127.0.0.1", port: port, cache: cache) == false)
        #expect(cache.count == 1, "the first listener issued a ticket")
        #expect(try await echo("127.0.0.2", port: port, cache: cache) == sharing)
    }

    @Test func aTicketOfARetiredGenerationResumesWithinTheOverlap() async throws {
        let old = Data(repeating: 0x11, count: 32)
        let new = Data(repeating: 0x22, count: 32)
        let firstKeys = try QUIC.FleetKeys(secrets: [old], overlap: .seconds(3600))
        let first = try await listen(on: "127.0.0.1", port: .any, keys: firstKeys)
        defer { first.task.cancel() }
        let port = try #require(first.listener.port)
        let secondKeys = try QUIC.FleetKeys(secrets: [new, old], overlap: .seconds(3600))
        let second = try await listen(on: "127.0.0.2", port: port, keys: secondKeys)
        defer { second.task.cancel() }
        let cache = TLS.SessionCache()
        _ = try await echo("127.0.0.1", port: port, cache: cache)
        // The old secret leaves the second listener's list: accepted for the overlap still.
        try secondKeys.update(secrets: [new])
        #expect(try await echo("127.0.0.2", port: port, cache: cache) == true)
    }
}
