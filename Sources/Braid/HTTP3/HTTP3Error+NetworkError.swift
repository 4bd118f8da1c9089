import BraidHTTP3
import BraidHTTP3IO

extension HTTP3Error: NetworkErrorConvertible {
    func networkError(endpoint: String, handshakeTimeout: Duration) -> NetworkError {
        switch self {
        case .connectionError(let code, let reason, let byPeer):
            byPeer ? .peerClosed(code: code.code, reason: reason) : .http3ProtocolError(code: code.code, reason: reason)
        case .goingAway, .requestRejected: .streamReset(code: HTTP3ErrorCode.requestRejected.code)
        case .invalidStream(_, let reason): .invalidState(reason)
        case .invalidState(let what): .invalidState(what)
        case .internalError: .internalError(description)
        }
    }
}

extension HTTP3StreamFailure: NetworkErrorConvertible {
    func networkError(endpoint: String, handshakeTimeout: Duration) -> NetworkError {
        byPeer ? .streamReset(code: code.code) : .http3ProtocolError(code: code.code, reason: description)
    }
}
