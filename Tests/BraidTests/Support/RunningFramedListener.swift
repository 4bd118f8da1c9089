import Foundation

@testable import Braid

/// A listener of any stack (TLV, Coder, ...) on 127.0.0.1 with `port` (by default one the
/// system chooses), running `handler` in a task.
struct RunningFramedListener<P: NetworkProtocol> {
    let listener: NetworkListener<P>
    let task: Task<Void, any Error>
    var endpoint: NWEndpoint { .hostPort(host: "127.0.0.1", port: listener.port!) }

    static func start(
        _ stack: P, port: NWEndpoint.Port = .any, handler: @escaping @Sendable (NetworkConnection<P>) async throws -> Void
    ) async throws -> RunningFramedListener {
        let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: port), using: NetworkParameters(stack: stack))
        let task = Task { try await listener.run(handler) }
        try await listener.waitUntilReady()
        return RunningFramedListener(listener: listener, task: task)
    }
}

/// Echoes every TLV message with its type until the peer finishes.
@Sendable func echoMessages(_ connection: NetworkConnection<TLV>) async throws {
    for try await (content, metadata) in connection.messages {
        try await connection.send(content, type: metadata.type)
    }
}
