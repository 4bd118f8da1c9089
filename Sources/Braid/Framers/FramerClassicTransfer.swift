import Foundation

/// The classic API's view of a custom framer's connection: each send is one message, handed to
/// the framer with the content context's `NWProtocolFramer.Message` (an empty one without) and
/// the send's `isComplete`,
/// and each receive one message the framer delivered, its context carrying the framer's
/// message.
final class FramerClassicTransfer: MessageClassicTransfer {
    let connection: NetworkConnection<FramerStack>

    init(_ connection: NetworkConnection<FramerStack>) { self.connection = connection }

    func send(_ content: Data?, options: ClassicSendOptions) -> ClassicSendAttempt {
        let message = options.metadata.lazy.compactMap { $0 as? NWProtocolFramer.Message }.first
        let content = content ?? Data()
        let connection = connection
        if connection.shared.datagram != nil {
            let isComplete = options.isComplete
            return .wait { try await connection.sendFramerMessage(content, message: message, lastMessage: false, isComplete: isComplete) }
        }
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

    func receiveMessageWithMetadata() async throws -> ClassicReceipt {
        let (content, message) = try await connection.receiveFramerMessage(definition: connection.stack.definition)
        return ClassicReceipt(content: content, isComplete: true, metadata: [message])
    }

    func metadata(definition: NWProtocolDefinition) -> NWProtocolMetadata? { nil }
}

extension FramerStack: ClassicBinding {
    static func transfer(over connection: NetworkConnection<FramerStack>) -> any ClassicTransfer { FramerClassicTransfer(connection) }
}
