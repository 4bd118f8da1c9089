import BraidCore
import Foundation

/// The classic API's view of a QUIC connection, as Apple's: one bidirectional stream of it,
/// opened when the connection starts. A final context with `isComplete` ends the stream
/// (FIN); `cancel()` closes the connection.
final class QUICStreamClassicTransfer: ClassicTransfer {
    let connection: NetworkConnection<QUIC>
    /// The stream, opened once by the first call that needs it.
    private let opening = Locked<Task<QUIC.Stream<QUICStream>, any Error>?>(nil)

    init(_ connection: NetworkConnection<QUIC>) { self.connection = connection }

    var states: StateBroadcast { connection.shared.states }

    func start() {
        connection.start()
        _ = openedStream()
    }

    func cancel() {
        connection.cancel()
        opening.withLock { $0?.cancel() }
    }

    func restart() { connection.retryNow() }

    /// The stream's task: opened on the first call (it waits for the handshake, or opens in
    /// 0-RTT when the connection resumes).
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
        try await NetworkError.mapping { try await openedStream().value }
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
        let (content, metadata) = try await stream().receive(atLeast: minimum, atMost: max(minimum, maximum))
        return (content.isEmpty && metadata.isEndOfStream ? nil : content, metadata.isEndOfStream)
    }

    func receiveMessage() async throws -> (content: Data?, isComplete: Bool) {
        try await gatherUntilEnd()
    }

    func batch(_ body: () -> Void) { body() }

    func metadata(definition: NWProtocolDefinition) -> NWProtocolMetadata? { nil }

    func onPathUpdate(_ handler: @escaping @Sendable (NWPath) -> Void) { connection.onPathUpdate { _, path in handler(path) } }
    func onViabilityUpdate(_ handler: @escaping @Sendable (Bool) -> Void) { connection.onViabilityUpdate { _, viable in handler(viable) } }
    func onBetterPathUpdate(_ handler: @escaping @Sendable (Bool) -> Void) { connection.onBetterPathUpdate { _, better in handler(better) } }
}

extension QUIC: ClassicBinding {
    static func transfer(over connection: NetworkConnection<QUIC>) -> any ClassicTransfer { QUICStreamClassicTransfer(connection) }

    static var listenerRefusal: String? {
        "QUIC on NWListener (Apple hands each inbound stream to newConnectionHandler; Braid does not yet): use NetworkListener { QUIC(...) } with inboundStreams"
    }
}
