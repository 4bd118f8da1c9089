import Foundation

/// The classic API's view of a custom framer's connection: each send is one message, handed to
/// the framer with the content context's `NWProtocolFramer.Message` (an empty one without) and
/// the send's `isComplete`,
/// and each receive one message the framer delivered, its context carrying the framer's
/// message.
final class FramerClassicTransfer: ClassicTransfer {
    let connection: NetworkConnection<FramerStack>

    init(_ connection: NetworkConnection<FramerStack>) { self.connection = connection }

    var states: StateBroadcast { connection.shared.states }
    func start() { connection.start() }
    func cancel() { connection.cancel() }
    func forceCancel() { connection.forceCancel() }
    func restart() { connection.retryNow() }
    func cancelCurrentEndpoint() { connection.tryNextEndpoint() }

    func send(_ content: Data?, isFinal: Bool) -> ClassicSendAttempt {
        send(content, options: ClassicSendOptions(isFinal: isFinal))
    }

    func send(_ content: Data?, options: ClassicSendOptions) -> ClassicSendAttempt {
        let message = options.metadata.lazy.compactMap { $0 as? NWProtocolFramer.Message }.first
        let content = content ?? Data()
        let connection = connection
        if options.isFinal {
            return .wait { try await connection.sendFramerMessage(content, message: message, lastMessage: true) }
        }
        do {
            guard let bytes = try connection.queueFramerMessage(content, message: message, isComplete: options.isComplete) else { return .done }
            return .wait { try await connection.sendFramerRecord(bytes) }
        } catch {
            return .failed(NWError(NetworkError(error)))
        }
    }

    func receive(minimum: Int, maximum: Int) async throws -> (content: Data?, isComplete: Bool) {
        let receipt = try await receiveMessageWithMetadata()
        return (receipt.content, receipt.isComplete)
    }

    func receiveMessage() async throws -> (content: Data?, isComplete: Bool) {
        try await receive(minimum: 1, maximum: .max)
    }

    /// Messages are whole whatever the sizes asked: a framer delivers messages.
    func receiveWithMetadata(minimum: Int, maximum: Int) async throws -> ClassicReceipt {
        try await receiveMessageWithMetadata()
    }

    func receiveMessageWithMetadata() async throws -> ClassicReceipt {
        let (content, message) = try await connection.receiveFramerMessage(definition: connection.stack.definition)
        return ClassicReceipt(content: content, isComplete: true, metadata: [message])
    }

    func batch(_ body: () -> Void) { body() }

    func metadata(definition: NWProtocolDefinition) -> NWProtocolMetadata? { nil }

    func onPathUpdate(_ handler: @escaping @Sendable (NWPath) -> Void) { connection.onPathUpdate { _, path in handler(path) } }
    func onViabilityUpdate(_ handler: @escaping @Sendable (Bool) -> Void) { connection.onViabilityUpdate { _, viable in handler(viable) } }
    func onBetterPathUpdate(_ handler: @escaping @Sendable (Bool) -> Void) { connection.onBetterPathUpdate { _, better in handler(better) } }
}

extension FramerStack: ClassicBinding {
    static func transfer(over connection: NetworkConnection<FramerStack>) -> any ClassicTransfer { FramerClassicTransfer(connection) }
}
