import BraidCore
import BraidIO
import Foundation

/// The classic API's view of a WebSocket connection: each send is one message whose opcode
/// (and close code) the content context's `NWProtocolWebSocket.Metadata` names (binary
/// without one), and each receive one whole message, its context carrying the metadata.
final class WebSocketClassicTransfer: MessageClassicTransfer {
    let connection: NetworkConnection<WebSocket>

    init(_ connection: NetworkConnection<WebSocket>) { self.connection = connection }

    func send(_ content: Data?, options: ClassicSendOptions) -> ClassicSendAttempt {
        let webSocket = options.metadata.lazy.compactMap { $0 as? NWProtocolWebSocket.Metadata }.first
        let opcode = webSocket?.opcode ?? .binary
        var payload = [UInt8](content ?? Data())
        if opcode == .close {
            payload = NetworkConnection<WebSocket>.closePayload(code: webSocket?.closeCode ?? .protocolCode(.normalClosure), reason: payload)
        }
        do {
            guard let bytes = try connection.queueWebSocketMessage(payload, opcode: opcode) else { return .done }
            let connection = connection
            return .wait {
                try await connection.webSocketEnd.end.sendWaiting(bytes, endOfStream: false, idempotent: false, queued: connection.start)
            }
        } catch {
            return .failed(NWError(NetworkError(error)))
        }
    }

    func receiveMessageWithMetadata() async throws -> ClassicReceipt {
        let (content, received) = try await connection.receive()
        let metadata = NWProtocolWebSocket.Metadata(opcode: received.opcode)
        if let code = received.closeCode { metadata.closeCode = code }
        return ClassicReceipt(content: content, isComplete: true, metadata: [metadata])
    }

    /// WebSocket's metadata once the upgrade completed: the subprotocol the server chose.
    func metadata(definition: NWProtocolDefinition) -> NWProtocolMetadata? {
        guard definition == NWProtocolWebSocket.definition, let upgrade = connection.shared.snapshot.withLock({ $0.upgrade }) else { return nil }
        return NWProtocolWebSocket.Metadata(opcode: .cont, selectedSubprotocol: upgrade.subprotocol)
    }
}

extension WebSocket: ClassicBinding {
    static func transfer(over connection: NetworkConnection<WebSocket>) -> any ClassicTransfer { WebSocketClassicTransfer(connection) }
}
