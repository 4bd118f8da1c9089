import BraidFramers

extension TLVFramingError: NetworkErrorConvertible {
    func networkError(endpoint: String, handshakeTimeout: Duration) -> NetworkError {
        switch self {
        case .messageTooLarge(_, let size, let maximum): .messageTooLarge(size: Int(size), maximum: maximum)
        }
    }
}

extension CoderFramingError: NetworkErrorConvertible {
    func networkError(endpoint: String, handshakeTimeout: Duration) -> NetworkError {
        switch self {
        case .decodingFailed(let type, let reason): .messageDecodingFailed(type: type, reason: reason)
        case .encodingFailed(let type, let reason): .messageEncodingFailed(type: type, reason: reason)
        }
    }
}
