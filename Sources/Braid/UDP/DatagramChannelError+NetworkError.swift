import BraidIO

extension DatagramChannelError: NetworkErrorConvertible {
    func networkError(endpoint: String, handshakeTimeout: Duration) -> NetworkError {
        switch self {
        case .datagramTooLarge(let size, let maximum): .datagramTooLarge(size: size, maximum: maximum)
        case .cancelled: .cancelled
        case .idleTimeout: .idleTimeout
        case .displaced:
            .serverBusy(
                endpoint: endpoint,
                reason: "connection limit reached: closed to make room for a new peer (this peer had not answered a datagram the listener sent it)")
        case .handshakeTimedOut(let timeout): .noResponse(endpoint: endpoint, timeout: timeout)
        case .overBufferLimit:
            .serverBusy(endpoint: endpoint, reason: "buffer limit reached: closed a connection whose buffered bytes drained too slowly")
        case .peerClosed:
            .peerClosed(code: 0, reason: "the peer ended the DTLS session (close_notify); open a new connection to send more")
        }
    }
}
