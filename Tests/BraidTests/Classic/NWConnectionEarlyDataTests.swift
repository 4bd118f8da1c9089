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
        let answer = String(decoding: content ?? Data(), as: UTF8.self)
        if let stream = connection.transfer as? StreamClassicTransfer<TLS> {
            // What the client's engine saw, for a failure's message.
            return answer + " (client: resumed \(stream.connection.isResumed), early data accepted \(stream.connection.earlyDataAccepted))"
        }
        return answer
    }

    @Test func idempotentContentOfAResumedConnectionTravelsAsEarlyData() async throws {
        let server = try await earlyDataReportingServer()
        defer { server.task.cancel() }
        let cache = TLS.SessionCache()
        // The first connection has no ticket: its bytes wait for the handshake.
        let first = try await exchange(port: server.port, cache: cache)
        #expect(first.hasPrefix("late:hello "), "\(first)")
        // Each connection resumes with the ticket the one before got. A server may refuse
        // early data (RFC 8446 §4.2.10): GnuTLS compares the client's and its own view of the
        // ticket's age in whole milliseconds, and on loopback, where they are within a
        // millisecond of each other, it refuses some (about one run in six). The refused bytes
        // are sent again after the handshake; the next connection tries again.
        let answers = try await withDeadline(.seconds(120)) { () -> [String]? in
            var answers: [String] = []
            while true {
                while cache.count == 0 { try await Task.sleep(for: .milliseconds(10)) }
                let answer = try await exchange(port: server.port, cache: cache)
                answers.append(answer)
                if answer.hasPrefix("early:hello ") { return answers }
            }
        }
        let seen = try #require(answers, "no connection's early data was accepted in 120 s")
        #expect(seen.last?.hasPrefix("early:hello (client: resumed true, early data accepted true)") == true, "\(seen)")
        // A refused attempt still delivered the bytes, after the handshake of a resumed session.
        #expect(seen.dropLast().allSatisfy { $0.hasPrefix("resumed:hello ") }, "\(seen)")
    }

    /// Without `allowFastOpen`, a connection that resumes sends its idempotent content after
    /// the handshake, like any other.
    @Test func withoutFastOpenIdempotentContentIsNotEarlyData() async throws {
        let server = try await earlyDataReportingServer()
        defer { server.task.cancel() }
        let cache = TLS.SessionCache()
        #expect(try await exchange(port: server.port, cache: cache).hasPrefix("late:hello "))
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

    /// Idempotent content sent before `start(queue:)` waits for it, and goes first once the
    /// connection starts (plain TCP: no early data, the bytes follow the handshake).
    @Test func idempotentContentBeforeStartDoesNotStartTheConnection() async throws {
        let server = try ClassicEchoServer(.tcp)
        let port = try await server.start()
        defer { server.listener.cancel() }
        let connection = NWConnection(host: "127.0.0.1", port: port, using: .tcp)
        defer { connection.cancel() }
        let states = StateRecorder(connection)
        connection.send(content: Data("first ".utf8), completion: .idempotent)
        #expect(connection.state == .setup)
        #expect((connection.transfer as? StreamClassicTransfer<TCP>)?.connection.state == .setup)
        connection.start(queue: DispatchQueue(label: "client"))
        try await states.wait(for: "ready") { $0 == .ready }
        #expect(await connection.sendAsync(Data("second".utf8), context: .finalMessage) == nil)
        let (content, isComplete, error) = await connection.receiveMessageAsync()
        #expect(error == nil && isComplete)
        #expect(content == Data("first second".utf8))
    }
}
