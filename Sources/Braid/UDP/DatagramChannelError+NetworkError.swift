import BraidIO

extension DatagramChannelError: NetworkErrorConvertible {
    func networkError(endpoint: String, handshakeTimeout: Duration) -> NetworkError {
        switch self {
        case .datagramTooLarge(let size, let maximum): .datagramTooLarge(size: size, maximum: maximum)
        case .cancelled: .cancelled
        case .idleTimeout: .idleTimeout
        case .handshakeTimedOut(let timeout): .noResponse(endpoint: endpoint, timeout: timeout)
        }
    }
}
