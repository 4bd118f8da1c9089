import BraidQUIC

extension QUICError: NetworkErrorConvertible {
    func networkError(endpoint: String, handshakeTimeout: Duration) -> NetworkError {
        NetworkError(quic: self, endpoint: endpoint, handshakeTimeout: handshakeTimeout)
    }
}

extension NetworkError {
    init(quic error: QUICError, endpoint: String, handshakeTimeout: Duration) {
        switch error {
        case .certificateRejected(let problem): self = .certificateRejected(problem)
        case .peerTLSAlert(let code): self = .handshakeRejectedByPeer(alert: code)
        case .alpnMismatch(let offered): self = .alpnMismatch(offered: offered)
        case .tls(let message): self = .internalError("TLS: \(message)")
        case .transportError(let code, let reason, let byPeer) where (byPeer && code == 0x2) || (code == 0 && reason.hasPrefix("server busy")):
            // CONNECTION_REFUSED, or a connection the server closed at one of its limits (an
            // idle one evicted, one stalled at the buffer limit): the client's view and the
            // server's own.
            self = .serverBusy(endpoint: endpoint, reason: reason)
        case .transportError(let code, let reason, let byPeer): self = .protocolError(code: code, reason: reason, byPeer: byPeer)
        case .applicationClosed(let code, let reason): self = .peerClosed(code: code, reason: reason)
        case .closedLocally: self = .cancelled
        case .idleTimeout: self = .idleTimeout
        case .handshakeTimeout: self = .noResponse(endpoint: endpoint, timeout: handshakeTimeout)
        case .statelessReset: self = .peerReset
        case .versionNegotiationFailed: self = .protocolError(code: 0x11, reason: "no common QUIC version", byPeer: true)
        case .streamReset(_, let code): self = .streamReset(code: code)
        case .streamStopped(_, let code): self = .streamStopped(code: code)
        case .invalidStream(_, let reason): self = .invalidState(reason)
        case .streamLimitReached: self = .invalidState("the peer's stream limit is reached")
        case .datagramsNotSupported: self = .datagramsNotSupported
        case .datagramTooLarge(let size, let maximum): self = .datagramTooLarge(size: size, maximum: maximum)
        case .connectionClosed(let reason): self = NetworkError(quic: reason, endpoint: endpoint, handshakeTimeout: handshakeTimeout)
        case .invalidState(let what): self = .invalidState(what)
        case .configuration(let what): self = .invalidConfiguration(what)
        case .internalError(let code, let function): self = .internalError("\(function) returned \(code)")
        }
    }
}
