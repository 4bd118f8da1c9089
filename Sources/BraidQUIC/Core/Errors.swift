import BraidTLS

/// Every way a QUIC connection, stream or datagram operation can fail, with a message that says
/// what to do about it.
package enum QUICError: Error, Sendable, Hashable, CustomStringConvertible {
    /// We rejected the peer's certificate.
    case certificateRejected(CertificateProblem)
    /// The peer aborted the handshake with a TLS alert (e.g. it rejected our certificate, 42/48).
    case peerTLSAlert(code: UInt8)
    /// Client and server share no application protocol.
    case alpnMismatch(offered: [String])
    /// The TLS stack failed locally (configuration or protocol error).
    case tls(String)
    /// The peer, or we, closed the connection with a QUIC transport error.
    case transportError(code: UInt64, reason: String, byPeer: Bool)
    /// The peer closed the connection with an application error code.
    case applicationClosed(code: UInt64, reason: String)
    /// We closed the connection (normal local close).
    case closedLocally(code: UInt64, reason: String)
    /// No packet from the peer within the idle timeout.
    case idleTimeout
    /// The handshake did not complete within the handshake timeout.
    case handshakeTimeout
    /// The peer sent a stateless reset: it lost all state for this connection.
    case statelessReset
    /// The server supports none of the QUIC versions we offered.
    case versionNegotiationFailed
    /// The peer reset the stream (RESET_STREAM) with this application error code.
    case streamReset(streamID: Int64, code: UInt64)
    /// The peer asked us to stop sending on this stream (STOP_SENDING) with this code
    /// (nil if ngtcp2 has not reported it yet).
    case streamStopped(streamID: Int64, code: UInt64?)
    /// No such stream, or it is closed in the direction used.
    case invalidStream(streamID: Int64, reason: String)
    /// The peer's stream limit is reached; retry when it grants more streams.
    case streamLimitReached
    /// The peer did not enable RFC 9221 datagrams.
    case datagramsNotSupported
    /// A datagram larger than the negotiated maximum frame payload.
    case datagramTooLarge(size: Int, maximum: Int)
    /// The connection is closed or closing; carries the reason it ended.
    indirect case connectionClosed(QUICError)
    /// The connection is not in a state that allows the call.
    case invalidState(String)
    /// Invalid configuration (unreadable certificate file, bad pin, ...).
    case configuration(String)
    /// ngtcp2 reported an unexpected error.
    case internalError(code: Int32, function: String)

    package var description: String {
        switch self {
        case .certificateRejected(let problem):
            "The server's TLS certificate was rejected: \(problem). Trust its CA (a CA file or the system store), fix the name you connect to, or update the pins."
        case .peerTLSAlert(let code):
            "The peer aborted the TLS handshake with alert \(code) (\(tlsAlertName(code))). If it is 42/48 it did not accept our certificate."
        case .alpnMismatch(let offered):
            "The server supports none of the application protocols offered (ALPN \(offered)). Use an ALPN the server is configured for."
        case .tls(let message):
            "TLS failed: \(message)"
        case .transportError(let code, let reason, let byPeer):
            "QUIC transport error \(quicTransportErrorLabel(code)) \(byPeer ? "from the peer" : "detected locally")\(reason.isEmpty ? "" : ": \(reason)")."
        case .applicationClosed(let code, let reason):
            "The peer closed the connection with application error \(code)\(reason.isEmpty ? "" : ": \(reason)")."
        case .closedLocally(let code, let reason):
            "The connection was closed locally with application code \(code)\(reason.isEmpty ? "" : ": \(reason)")."
        case .idleTimeout:
            "The connection timed out: no packet from the peer within the idle timeout. Check that the peer is reachable, or raise the idle timeout / enable keep-alive."
        case .handshakeTimeout:
            "No handshake response from the server within the handshake timeout. Check the address and port and that a QUIC server listens there (UDP)."
        case .statelessReset:
            "The peer reset the connection statelessly (it lost its state, e.g. after a restart)."
        case .versionNegotiationFailed:
            "The server supports none of our QUIC versions."
        case .streamReset(let id, let code):
            "The peer reset stream \(id) with application error code \(code)."
        case .streamStopped(let id, let code):
            "The peer stopped reading stream \(id) (STOP_SENDING\(code.map { ", application error code \($0)" } ?? ""))."
        case .invalidStream(let id, let reason):
            "Stream \(id): \(reason)."
        case .streamLimitReached:
            "The peer's limit of concurrent streams is reached; wait for it to grant more."
        case .datagramsNotSupported:
            "The peer did not enable QUIC datagrams (RFC 9221); set a non-zero max datagram frame size on both ends."
        case .datagramTooLarge(let size, let maximum):
            "A \(size)-byte datagram exceeds the negotiated maximum of \(maximum) bytes; split it or use a stream."
        case .connectionClosed(let reason):
            "The connection is closed: \(reason)"
        case .invalidState(let what):
            "Invalid state: \(what)."
        case .configuration(let what):
            "Invalid configuration: \(what)."
        case .internalError(let code, let function):
            "QUIC engine error in \(function): \(ngtcp2ErrorName(code)) (\(code))."
        }
    }
}
