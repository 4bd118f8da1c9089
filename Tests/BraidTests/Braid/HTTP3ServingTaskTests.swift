import Braid
import BraidCore
import Foundation
import HTTPTypes
import Testing

/// What `runHTTP3` keeps for each connection it accepts (its serving task, by channel, until
/// the listener's task for that connection takes it) goes when the connection ends, also for
/// a connection the listener runs no task for.
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

    /// Polls `condition` every 10 ms for up to 10 s.
    private func eventually(_ condition: () -> Bool) async throws -> Bool {
        for _ in 0..<1000 {
            if condition() { return true }
            try await Task.sleep(for: .milliseconds(10))
        }
        return condition()
    }

    /// Clients that connect while the listener shuts down (cancelled, waiting for a request
    /// it took to finish) are accepted, but the listener starts no task for them: its loop
    /// over new connections has ended. Each one's serving task must go when its connection
    /// ends; kept until `runHTTP3` returned, they piled up with every client that came and went.
    @Test(.timeLimit(.minutes(3))) func connectionsAcceptedDuringShutdownLeaveNothingBehind() async throws {
        let gate = Gate()
        let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any)) {
            QUIC(alpn: ["h3"]).identity(certificateChainFile: Fixtures.path("server.pem"), privateKeyFile: Fixtures.path("server-key.pem"))
        }
        // A grace period far beyond the test, so the shutdown lasts until the gate opens.
        let task = Task {
            try await listener.runHTTP3(shutdownGracePeriod: .seconds(600)) { _, _ in
                try await gate.pass()
                return (HTTPResponse(status: .ok), .empty)
            }
        }
        for await state in listener.states {
            if state == .ready { break }
            if case .failed(let error) = state { throw error }
        }
        let port = try #require(listener.port)
        let client = HTTP3Client(quic: testClient(alpn: ["h3"]))
        let request = HTTPRequest(method: .get, scheme: "https", authority: "127.0.0.1:\(port.rawValue)", path: "/")
        let inFlight = Task { try await client.data(for: request) }
        defer {
            // Also on failure: the handler returns, the shutdown ends and `runHTTP3` with it.
            gate.open()
            client.close()
        }
        try #require(try await eventually { gate.entered == 1 }, "the request never reached its handler")
        // The request's connection is taken by its task before the shutdown starts, so it
        // keeps `runHTTP3` running through the shutdown.
        try #require(try await eventually { listener.servingTaskCount == 0 }, "the listener's task never took the first connection's serving task")

        task.cancel()
        for _ in 0..<3 {
            let late = NetworkConnection(to: .hostPort(host: "127.0.0.1", port: port)) { testClient(alpn: ["h3"]) }
            late.start()
            var isReady = false
            for await state in late.states {
                if state == .ready { isReady = true }
                if state == .ready || state.isFinal { break }
            }
            await late.close()
            try #require(isReady, "the shutting-down listener no longer accepts connections: this test needs another way to reach one it runs no task for")
        }
        let drained = try await eventually { listener.servingTaskCount == 0 }
        // Still shutting down: the count is of a `runHTTP3` that has not returned.
        let stillRunning = listener.servingTaskCount != nil
        #expect(drained, "\(listener.servingTaskCount ?? 0) serving tasks kept for connections that ended")
        #expect(stillRunning, "runHTTP3 returned before its connections were counted")

        gate.open()
        let (_, response) = try await inFlight.value
        #expect(response.status == .ok)
        try await task.value
        #expect(listener.servingTaskCount == nil)
    }
}
