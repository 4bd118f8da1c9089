import BraidTLS

extension TLSError: NetworkErrorConvertible {
    func networkError(endpoint: String, handshakeTimeout: Duration) -> NetworkError {
        NetworkError(tls: self)
    }
}

extension NetworkError {
    init(tls error: TLSError) {
        switch error {
        case .certificateRejected(let problem): self = .certificateRejected(problem)
        case .peerAlert(let code, _): self = .handshakeRejectedByPeer(alert: code)
        case .alpnMismatch(let offered): self = .alpnMismatch(offered: offered)
        case .truncated: self = .truncated
        case .protocolVersionMismatch, .handshakeFailed, .protocolError: self = .tlsFailure(error.description)
        case .messageTooLarge(let size, let maximum): self = .datagramTooLarge(size: size, maximum: maximum)
        case .configuration(let what): self = .invalidConfiguration(what)
        case .invalidState(let what): self = .invalidState(what)
        case .internalError: self = .internalError(error.description)
        }
    }
}
