import BraidCore
import Foundation

/// The classic API's view of a QUIC connection, as Apple's: one bidirectional stream of it. A
/// client's is the stream it opens when it starts, and `cancel()` closes the connection; a
/// listener hands each stream a client opens to `newConnectionHandler`, and `cancel()` ends
/// that stream alone. A final context with `isComplete` ends the stream (FIN).
final class QUICStreamClassicTransfer: ClassicTransfer {
    let connection: NetworkConnection<QUIC>
    /// The stream, opened once by the first call that needs it (an inbound one: given).
    private let opening = Locked<Task<QUIC.Stream<QUICStream>, any Error>?>(nil)
    /// An inbound stream's own states (nil: a client's, whose states are its connection's).
    private let streamStates: StateBroadcast?

    /// A client: the connection's first stream, opened when it starts.
    init(_ connection: NetworkConnection<QUIC>) {
        self.connection = connection
        streamStates = nil
    }

    /// A stream the peer opened on a listener's `connection`: ready at once, and ends with
    /// the connection, or when cancelled.
    init(_ connection: NetworkConnection<QUIC>, inbound stream: QUIC.Stream<QUICStream>) {
        self.connection = connection
        let states = StateBroadcast()
        states.update(.ready)
        streamStates = states
        opening.withLock { $0 = Task { stream } }
    }

    var states: StateBroadcast { streamStates ?? connection.shared.states }

    func start() {
        guard streamStates == nil else { return }
        connection.start()
        _ = openedStream()
    }

    func cancel() {
        guard let streamStates else {
            connection.cancel()
            opening.withLock { $0?.cancel() }
            return
        }
        guard streamStates.update(.cancelled), let stream = opening.withLock({ $0 }) else { return }
        // The peer answers STOP_SENDING with a reset, which ends a receive still waiting.
        Task {
            let stream = try await stream.value
            try? await stream.stopSending(streamApplicationErrorCode: 0)
            try? await stream.reset(streamApplicationErrorCode: 0)
        }
    }

    /// QUIC has no abortive close of its own here: as `cancel()`.
    func forceCancel() { cancel() }

    func restart() { connection.retryNow() }

    /// While connecting, the next address; a ready QUIC connection stays on its path (an
    /// inbound stream's connection is the listener's, not this stream's to move).
    func cancelCurrentEndpoint() {
        if streamStates == nil { connection.tryNextEndpoint() }
    }

    /// An inbound stream ends with its connection (its own cancellation aside).
    func endsWithConnection() async {
        guard let streamStates else { return }
        for await state in connection.states where state.isFinal {
            streamStates.update(state)
            return
        }
    }

    /// The stream's task: a client's is opened on the first call (it waits for the
    /// handshake, or opens in 0-RTT when the connection resumes).
    private func openedStream() -> Task<QUIC.Stream<QUICStream>, any Error> {
        opening.withLock { opening in
            if let task = opening { return task }
            let connection = connection
            let task = Task { try await connection.openStream(directionality: .bidirectional) }
            opening = task
            return task
        }
    }

    private func stream() async throws -> QUIC.Stream<QUICStream> {
        if let streamStates, streamStates.current.isFinal { throw NetworkError.cancelled }
        return try await NetworkError.mapping { try await openedStream().value }
    }

    func send(_ content: Data?, isFinal: Bool) -> ClassicSendAttempt {
        send(content, options: ClassicSendOptions(isFinal: isFinal))
    }

    /// Every send waits for the stream; idempotent content may go in 0-RTT.
    func send(_ content: Data?, options: ClassicSendOptions) -> ClassicSendAttempt {
        let content = content ?? Data()
        return .wait { [self] in
            let stream = try await stream()
            if options.idempotent {
                try await stream.sendIdempotent(content, endOfStream: options.isFinal)
            } else {
                try await stream.send(content, endOfStream: options.isFinal)
            }
        }
    }

    func receive(minimum: Int, maximum: Int) async throws -> (content: Data?, isComplete: Bool) {
        do {
            let (content, metadata) = try await stream().receive(atLeast: minimum, atMost: max(minimum, maximum))
            return (content.isEmpty && metadata.isEndOfStream ? nil : content, metadata.isEndOfStream)
        } catch {
            // A cancelled inbound stream's receive ends with the peer's reset: to the
            // application, it was cancelled.
            if streamStates?.current == .cancelled { throw NetworkError.cancelled }
            throw error
        }
    }

    func receiveMessage() async throws -> (content: Data?, isComplete: Bool) {
        try await gatherUntilEnd()
    }

    func batch(_ body: () -> Void) { body() }

    func metadata(definition: NWProtocolDefinition) -> NWProtocolMetadata? { nil }

    var currentPath: NWPath? { connection.currentPath }
    func onPathUpdate(_ handler: @escaping @Sendable (NWPath) -> Void) { connection.onPathUpdate { _, path in handler(path) } }
    func onViabilityUpdate(_ handler: @escaping @Sendable (Bool) -> Void) { connection.onViabilityUpdate { _, viable in handler(viable) } }
    func onBetterPathUpdate(_ handler: @escaping @Sendable (Bool) -> Void) { connection.onBetterPathUpdate { _, better in handler(better) } }
}

extension QUIC: ClassicBinding {
    static func transfer(over connection: NetworkConnection<QUIC>) -> any ClassicTransfer { QUICStreamClassicTransfer(connection) }

    /// Each stream the client opens is one `NWConnection` (Apple's `NWListener` with QUIC
    /// parameters); the connection lasts until its client closes it.
    static func serve(_ connection: NetworkConnection<QUIC>, handing hand: @escaping @Sendable (any ClassicTransfer) -> Void) async throws {
        try await connection.inboundStreams { stream in
            let transfer = QUICStreamClassicTransfer(connection, inbound: stream)
            hand(transfer)
            await transfer.endsWithConnection()
        }
    }
}
