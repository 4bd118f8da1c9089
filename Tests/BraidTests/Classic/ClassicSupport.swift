import Dispatch
import Foundation
import Testing

@testable import Braid
import BraidCore

/// The states an `NWConnection` reports on its queue, as an async sequence a test can wait on.
final class StateRecorder: Sendable {
    let states: AsyncStream<NWConnection.State>
    private let continuation: AsyncStream<NWConnection.State>.Continuation

    /// Records `connection`'s states (set before `start(queue:)`).
    init(_ connection: NWConnection) {
        (states, continuation) = AsyncStream.makeStream()
        let continuation = continuation
        connection.stateUpdateHandler = { state in
            continuation.yield(state)
            switch state {
            case .failed, .cancelled: continuation.finish()
            default: break
            }
        }
    }

    /// Waits (at most `deadline`) for a state `matches` accepts; fails the test with what it saw otherwise.
    @discardableResult
    func wait(
        for what: String, deadline: Duration = .seconds(60), _ matches: @escaping @Sendable (NWConnection.State) -> Bool
    ) async throws -> NWConnection.State {
        let states = states
        let seen = Locked<[NWConnection.State]>([])
        let found = try await withDeadline(deadline) {
            for await state in states {
                seen.withLock { $0.append(state) }
                if matches(state) { return state }
            }
            return nil
        }
        guard let found else {
            Issue.record("no \(what) state; saw \(seen.withLock { $0 })")
            throw CancellationError()
        }
        return found
    }
}

/// `body`'s result, or nil if it takes longer than `deadline`.
func withDeadline<T: Sendable>(_ deadline: Duration, _ body: @escaping @Sendable () async throws -> T?) async throws -> T? {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: deadline)
            return nil
        }
        let first = try await group.next() ?? nil
        group.cancelAll()
        return first
    }
}

extension NWConnection {
    /// `send(content:completion:)` as an async call: the completion's error, if any.
    func sendAsync(_ content: Data?, context: ContentContext = .defaultMessage, isComplete: Bool = true) async -> NWError? {
        await withCheckedContinuation { continuation in
            send(content: content, contentContext: context, isComplete: isComplete, completion: .contentProcessed { error in
                continuation.resume(returning: error)
            })
        }
    }

    /// `receive(minimumIncompleteLength:maximumLength:completion:)` as an async call.
    func receiveAsync(minimum: Int = 1, maximum: Int = 65536) async -> (content: Data?, isComplete: Bool, error: NWError?) {
        await withCheckedContinuation { continuation in
            receive(minimumIncompleteLength: minimum, maximumLength: maximum) { content, _, isComplete, error in
                continuation.resume(returning: (content, isComplete, error))
            }
        }
    }

    /// `receiveMessage(completion:)` as an async call, with the received content's context.
    func receiveMessageWithContext() async -> (content: Data?, context: ContentContext?, error: NWError?) {
        await withCheckedContinuation { continuation in
            receiveMessage { content, context, _, error in continuation.resume(returning: (content, context, error)) }
        }
    }

    /// `receiveMessage(completion:)` as an async call.
    func receiveMessageAsync() async -> (content: Data?, isComplete: Bool, error: NWError?) {
        await withCheckedContinuation { continuation in
            receiveMessage { content, _, isComplete, error in continuation.resume(returning: (content, isComplete, error)) }
        }
    }
}

/// A classic-API listener that echoes: each connection's bytes (TCP, TLS) or datagrams (UDP)
/// go back to it, written the way Network.framework's examples write an echo server.
final class ClassicEchoServer: Sendable {
    let listener: NWListener
    let queue = DispatchQueue(label: "classic-echo")

    /// A listener with `parameters` whose connections `serve` answers (by default: echoes).
    init(_ parameters: NWParameters, serving serve: @escaping @Sendable (NWConnection) -> Void = ClassicEchoServer.echo) throws {
        listener = try NWListener(using: parameters)
        let queue = queue
        listener.newConnectionHandler = { connection in
            connection.start(queue: queue)
            serve(connection)
        }
    }

    @Sendable static func echo(_ connection: NWConnection) {
        connection.receive(minimumIncompleteLength: 1, maximumLength: 65536) { content, context, isComplete, error in
            guard error == nil else {
                connection.cancel()
                return
            }
            // A byte stream's end (TCP, a QUIC stream) is echoed too; a datagram's is not an end.
            let final = isComplete && !(connection.parameters.defaultProtocolStack.transportProtocol is NWProtocolUDP.Options)
            if content != nil || final {
                connection.send(content: content, contentContext: final ? .finalMessage : .defaultMessage, isComplete: true,
                                completion: .contentProcessed { _ in })
            }
            if final { return }
            echo(connection)
        }
    }

    /// Starts listening and returns the port once ready.
    func start() async throws -> NWEndpoint.Port {
        try await startListening()
        return try #require(listener.port)
    }

    /// Starts listening and returns once ready (a Unix-domain listener has no port).
    func startListening() async throws {
        let (states, continuation) = AsyncStream<NWListener.State>.makeStream()
        listener.stateUpdateHandler = { state in continuation.yield(state) }
        listener.start(queue: queue)
        let ready = try await withDeadline(.seconds(60)) {
            for await state in states {
                if case .ready = state { return true }
                if case .failed(let error) = state { throw error }
            }
            return nil
        }
        #expect(ready == true)
    }
}
