import Braid
import BraidCore
import Foundation
import HTTPTypes
import Testing

/// What `runHTTP3` keeps for each connection it accepts (its serving task, by channel, until
/// the listener's task for that connection takes it) is taken by that task; once `runHTTP3`
/// is cancelled, no connection is accepted that no task would take. In memory (`MemoryWorld`).
@Suite struct HTTP3ServingTaskTests {
    /// Lets a handler wait until the test opens it.
    private final class Gate: Sendable {
        private let state = Locked((entered: 0, isOpen: false))
        var entered: Int { state.withLock { $0.entered } }
        func open() { state.withLock { $0.isOpen = true } }
        func pass() async throws {
            state.withLock { $0.entered += 1 }
            while !state.withLock({ $0.isOpen }) { try await Task.sleep(for: .milliseconds(10)) }
        }
    }

    /// Once `runHTTP3` is cancelled (here while a request it took is held, so the shutdown
    /// lasts), new clients are refused at once as the server shutting down, so no connection
    /// is accepted that the listener runs no task for (such connections used to be served
    /// requests and then closed with QUIC code 0); the held request still completes.
    @Test(.timeLimit(.minutes(10))) func aShuttingDownListenerRefusesNewClients() async throws {
        try await MemoryWorld.run { world in
            let gate = Gate()
            let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any)) {
                testServer(alpn: ["h3"])
            }
            // A grace period far beyond the test, so the shutdown lasts until the gate opens.
            let task = Task {
                try await listener.runHTTP3(shutdownGracePeriod: .seconds(600)) { _, _ in
                    try await gate.pass()
                    return (HTTPResponse(status: .ok), .empty)
                }
            }
            try await listener.waitUntilReady()
            let port = try #require(listener.port)
            let endpoint = NWEndpoint.hostPort(host: "127.0.0.1", port: port)
            let client = HTTP3Client(quic: testClient(alpn: ["h3"]))
            let request = HTTPRequest(method: .get, scheme: "https", authority: "127.0.0.1:\(port.rawValue)", path: "/")
            let inFlight = Task { try await client.data(for: request) }
            let lateClient = HTTP3Client(quic: testClient(alpn: ["h3"]))
            defer {
                // Also on failure: the handler returns, the shutdown ends and `runHTTP3` with it.
                gate.open()
                client.close()
                lateClient.close()
            }
            try #require(try await world.eventually { gate.entered == 1 }, "the request never reached its handler")
            // The request's connection is taken by its task before the shutdown starts, so it
            // keeps `runHTTP3` running through the shutdown.
            try #require(try await world.eventually { listener.servingTaskCount == 0 }, "the listener's task never took the first connection's serving task")

            task.cancel()
            let refusal = NetworkError.serverBusy(endpoint: endpoint.description, reason: "server shutting down: not accepting new connections")
            for _ in 0..<3 {
                let late = NetworkConnection(to: endpoint) { testClient(alpn: ["h3"]) }
                late.start()
                var final: NetworkConnection<QUIC>.State?
                for await state in late.states where state == .ready || state.isFinal {
                    final = state
                    break
                }
                await late.close()
                #expect(final == .failed(refusal))
            }
            await #expect(throws: refusal) { _ = try await lateClient.data(for: request) }
            // Nothing was kept for the refused clients, and the shutdown still waits for the held request.
            #expect(listener.servingTaskCount == 0)
            #expect(gate.entered == 1)
            #expect((await listener.statistics?.refusedConnections ?? 0) >= 4)

            gate.open()
            let (_, response) = try await inFlight.value
            #expect(response.status == .ok)
            try await task.value
            #expect(listener.servingTaskCount == nil)
        }
    }
}
