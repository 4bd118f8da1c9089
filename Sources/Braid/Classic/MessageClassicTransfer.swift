import Foundation

/// The classic API's view of a connection whose every send and receive is one whole message
/// (WebSocket, a custom framer, a UDP datagram). What such views share is here, besides the
/// connection's own parts (`ConnectionClassicTransfer`): the receive shapes, which all come
/// back to one whole message whatever the sizes asked; each stack says how a send becomes its
/// message (`send(_:options:)`), how a message becomes a receipt
/// (`receiveMessageWithMetadata()`), and what metadata the connection has.
protocol MessageClassicTransfer: ConnectionClassicTransfer {}

extension MessageClassicTransfer {
    func send(_ content: Data?, isFinal: Bool) -> ClassicSendAttempt {
        send(content, options: ClassicSendOptions(isFinal: isFinal))
    }

    func receive(minimum: Int, maximum: Int) async throws -> (content: Data?, isComplete: Bool) {
        let receipt = try await receiveMessageWithMetadata()
        return (receipt.content, receipt.isComplete)
    }

    func receiveMessage() async throws -> (content: Data?, isComplete: Bool) {
        try await receive(minimum: 1, maximum: .max)
    }

    /// Messages are whole whatever the sizes asked.
    func receiveWithMetadata(minimum: Int, maximum: Int) async throws -> ClassicReceipt {
        try await receiveMessageWithMetadata()
    }

    func batch(_ body: () -> Void) { body() }
}
