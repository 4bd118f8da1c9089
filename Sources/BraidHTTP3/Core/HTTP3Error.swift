/// Every way an HTTP/3 connection or request can fail, with a message that says what to do.
public enum HTTP3Error: Error, Sendable, Hashable, CustomStringConvertible {
    /// The connection failed with this HTTP/3 error code: `byPeer` when the peer closed it,
    /// otherwise the engine found the peer's input invalid (the reason is nghttp3's).
    case connectionError(HTTP3ErrorCode, reason: String, byPeer: Bool)
    /// The peer sent GOAWAY: the request was not sent. Retryable on a new connection.
    case goingAway(lastStreamID: Int64)
    /// The server did not process this request (GOAWAY or H3_REQUEST_REJECTED). Retryable.
    case requestRejected(streamID: Int64)
    /// No such stream, or the call does not fit its state.
    case invalidStream(streamID: Int64, reason: String)
    /// The call does not fit the connection's role or state.
    case invalidState(String)
    /// nghttp3 failed in a way the engine did not expect.
    case internalError(code: Int32, function: String)

    /// The request was not processed and may be sent again on a new connection.
    public var isRetryable: Bool {
        switch self {
        case .goingAway, .requestRejected: true
        default: false
        }
    }

    public var description: String {
        switch self {
        case .connectionError(let code, let reason, let byPeer):
            byPeer
                ? "The peer closed the HTTP/3 connection with \(code) (\(reason))."
                : "The peer broke the HTTP/3 protocol; the connection closes with \(code) (\(reason))."
        case .goingAway(let lastStreamID):
            "The server is shutting this connection down (GOAWAY \(lastStreamID)); the request was not sent. Retry it on a new connection."
        case .requestRejected(let streamID):
            "The server did not process the request on stream \(streamID); retry it on a new connection."
        case .invalidStream(let streamID, let reason):
            "Stream \(streamID): \(reason)"
        case .invalidState(let message):
            message
        case .internalError(let code, let function):
            "\(function) failed with nghttp3 error \(code); this is a bug in Braid."
        }
    }
}
