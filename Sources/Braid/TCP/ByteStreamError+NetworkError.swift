import BraidIO

extension ByteStreamError: NetworkErrorConvertible {
    func networkError(endpoint: String, handshakeTimeout: Duration) -> NetworkError {
        switch self {
        case .handshakeTimedOut(let timeout): .noResponse(endpoint: endpoint, timeout: timeout)
        }
    }
}
