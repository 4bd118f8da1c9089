import BraidWebSocket

extension WebSocketError: NetworkErrorConvertible {
    func networkError(endpoint: String, handshakeTimeout: Duration) -> NetworkError {
        switch self {
        case .handshakeFailed(let reason): .webSocketHandshakeFailed(reason)
        case .handshakeTooLarge: .webSocketHandshakeFailed(description)
        case .messageTooLarge(let size, let maximum): .messageTooLarge(size: size, maximum: maximum)
        case .protocolViolation(let reason): .webSocketProtocolError(closeCode: 1002, reason: reason)
        case .invalidUTF8: .webSocketProtocolError(closeCode: 1007, reason: "text that is not valid UTF-8")
        case .compressedDataInvalid(let reason): .webSocketProtocolError(closeCode: 1007, reason: "a compressed message did not inflate: \(reason)")
        case .controlFrameTooLarge(let size): .messageTooLarge(size: size, maximum: 125)
        }
    }
}
