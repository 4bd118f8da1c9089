import Braid
import BraidServiceLifecycle
import Foundation
import Logging
import ServiceLifecycle
import Testing

/// A listener run by a ServiceGroup: the group's graceful shutdown closes every connection with
/// application error code 0 and the group's `run` returns.
@Suite struct NetworkListenerServiceTests {
    @Test func gracefulShutdownClosesEveryConnectionWithCodeZero() async throws {
        let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any)) {
            testServer()
        }
        let service = NetworkListenerService(listener) { connection in
            try await connection.inboundStreams { stream in
                let (request, _) = try await stream.receive(atLeast: 1, atMost: 65536)
                try await stream.send(request, endOfStream: true)
            }
        }
        let group = ServiceGroup(services: [service], logger: Logger(label: "test.lifecycle"))
        let running = Task { try await group.run() }
        defer { running.cancel() }

        for await state in listener.states where state == .ready { break }
        let connection = NetworkConnection(to: .hostPort(host: "127.0.0.1", port: try #require(listener.port))) {
            testClient().idleTimeout(120_000)
        }
        defer { connection.cancel() }
        let stream = try await connection.openStream()
        try await stream.send(Data("ping".utf8), endOfStream: true)
        #expect(try await stream.receive(atLeast: 4, atMost: 4).content == Data("ping".utf8))
        // A second stream keeps its handler busy while the shutdown comes.
        let waiting = try await connection.openStream()
        try await waiting.send(Data("x".utf8), endOfStream: false)

        await group.triggerGracefulShutdown()
        try await running.value
        #expect(listener.state == .cancelled)
        // The client hears the listener's close at once (its own idle timeout is two minutes).
        var final: NetworkConnectionState?
        for await state in connection.states where state.isFinal {
            final = state
            break
        }
        if case .failed(.peerClosed(code: 0, _)) = final {} else {
            Issue.record("the client's connection ended \(String(describing: final)), not closed by the listener with code 0")
        }
    }

    /// A shutdown that comes before the group runs: `run` returns, and the listener does not
    /// stay listening.
    @Test func aShutdownBeforeTheGroupRunsReturnsAndLeavesNothingListening() async throws {
        let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any)) {
            testServer()
        }
        let service = NetworkListenerService(listener) { _ in Issue.record("no connection was expected") }
        let group = ServiceGroup(services: [service], logger: Logger(label: "test.lifecycle"))
        await group.triggerGracefulShutdown()
        try await group.run()
        #expect(listener.state != .ready)
    }
}
