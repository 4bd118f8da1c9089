import Dispatch
import Foundation
import Testing

@testable import Braid
import BraidCore

/// `.idempotent` sends on a classic TLS connection with `allowFastOpen`: a connection that
/// resumes a session sends them as TLS 1.3 early data, as the new API's `sendIdempotent` does.
@Suite(.timeLimit(.minutes(3))) struct NWConnectionEarlyDataTests {
    /// A Braid TLS listener accepting early data that answers each request with how it came
    /// (as early data, on a resumed session, or on a full handshake: the server's engine
    /// knows), then the request, and ends the stream.
    private func earlyDataReportingServer() async throws -> RunningStreamListener<TLS> {
        try await RunningStreamListener.start(testTLSServer().earlyDataEnabled(true), handler: { connection in
            let request = try await connection.receive(exactly: 5).content
            // Early data arrives before the handshake completes; what the engine saw is set
            // once the connection is ready.
            for await state in connection.states where state == .ready { break }
            let tag = connection.earlyDataAccepted ? "early:" : connection.isResumed ? "resumed:" : "late:"
            try await connection.send(Data(tag.utf8) + request, endOfStream: true)
        })
    }

    /// One classic connection that sends "hello" as idempotent content before it starts, and
    /// what the server answered.
    private func exchange(port: NWEndpoint.Port, cache: TLS.SessionCache) async throws -> String {
        let tls = NWProtocolTLS.Options()
        sec_protocol_options_set_tls_server_name(tls.securityProtocolOptions, "localhost")
        tls.securityProtocolOptions.update {
            $0.trustRoots = .certificateAuthorities(file: Fixtures.caFile)
            $0.sessionCache = cache
        }
        let parameters = NWParameters(tls: tls)
        parameters.allowFastOpen = true
        let connection = NWConnection(host: "127.0.0.1", port: port, using: parameters)
        defer { connection.cancel() }
        connection.send(content: Data("hello".utf8), completion: .idempotent)
        connection.start(queue: DispatchQueue(label: "client"))
        let (content, isComplete, error) = await connection.receiveMessageAsync()
        #expect(error == nil)
        #expect(isComplete)
        return String(decoding: content ?? Data(), as: UTF8.self)
    }

    @Test func idempotentContentOfAResumedConnectionTravelsAsEarlyData() async throws {
        let server = try await earlyDataReportingServer()
        defer { server.task.cancel() }
        let cache = TLS.SessionCache()
        // The first connection has no ticket: its bytes wait for the handshake.
        #expect(try await exchange(port: server.port, cache: cache) == "late:hello")
        // Its ticket arrives after the handshake, on the connection's loop.
        let stored = try await withDeadline(.seconds(60)) {
            while cache.count == 0 { try await Task.sleep(for: .milliseconds(10)) }
            return true
        }
        #expect(stored == true)
        // The second resumes, and the server received the bytes as early data.
        #expect(try await exchange(port: server.port, cache: cache) == "early:hello")
    }

    /// Without `allowFastOpen`, a connection that resumes sends its idempotent content after
    /// the handshake, like any other.
    @Test func withoutFastOpenIdempotentContentIsNotEarlyData() async throws {
        let server = try await earlyDataReportingServer()
        defer { server.task.cancel() }
        let cache = TLS.SessionCache()
        _ = try await exchange(port: server.port, cache: cache)
        let tls = NWProtocolTLS.Options()
        sec_protocol_options_set_tls_server_name(tls.securityProtocolOptions, "localhost")
        tls.securityProtocolOptions.update {
            $0.trustRoots = .certificateAuthorities(file: Fixtures.caFile)
            $0.sessionCache = cache
        }
        let stored = try await withDeadline(.seconds(60)) {
            while cache.count == 0 { try await Task.sleep(for: .milliseconds(10)) }
            return true
        }
        #expect(stored == true)
        let connection = NWConnection(host: "127.0.0.1", port: server.port, using: NWParameters(tls: tls))
        defer { connection.cancel() }
        connection.send(content: Data("hello".utf8), completion: .idempotent)
        connection.start(queue: DispatchQueue(label: "client"))
        let (content, _, error) = await connection.receiveMessageAsync()
        #expect(error == nil)
        #expect(content == Data("resumed:hello".utf8))
    }
}
