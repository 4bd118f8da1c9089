import BraidHTTP3
import BraidIO
import BraidQUIC
import BraidTLS
import Foundation

/// Why a peer certificate was not accepted (`NetworkError.certificateRejected`).
public typealias CertificateProblem = BraidTLS.CertificateProblem

/// Every way a Braid connection, listener, stream or datagram operation fails. The
/// `description` says what happened and what to do about it.
///
/// Apple's Network.framework reports `NWError` (POSIX, DNS and TLS status codes); Braid has no
/// such codes to report, so it names the situations instead:
///
/// ```swift
/// do {
///     let stream = try await connection.openStream()
///     try await stream.send(Data("hello".utf8), endOfStream: true)
/// } catch NetworkError.certificateRejected(let problem) {
///     print("the server's certificate is \(problem)")
/// } catch NetworkError.noResponse {
///     print("nothing answers on that port")
/// }
/// ```
public enum NetworkError: Error, Sendable, Hashable, CustomStringConvertible, LocalizedError {
    /// DNS has no address for this name.
    case dnsNameNotFound(host: String)
    /// Name resolution failed for another reason (no resolver reachable, temporary failure).
    case dnsFailure(host: String, message: String)
    /// The server did not answer the handshake in time: nothing listens there, or a firewall
    /// drops UDP.
    case noResponse(endpoint: String, timeout: Duration)
    /// We rejected the server's (or, on a listener, the client's) certificate.
    case certificateRejected(CertificateProblem)
    /// The peer aborted the TLS handshake with this alert (42/48: it rejected our certificate).
    case handshakeRejectedByPeer(alert: UInt8)
    /// Client and server share no application protocol.
    case alpnMismatch(offered: [String])
    /// The peer closed the connection with an application error code.
    case peerClosed(code: UInt64, reason: String)
    /// A QUIC protocol error ended the connection.
    case protocolError(code: UInt64, reason: String, byPeer: Bool)
    /// The peer reset the stream (RESET_STREAM) with this application error code.
    case streamReset(code: UInt64)
    /// The peer stopped reading the stream (STOP_SENDING); `code` is nil if not known yet.
    case streamStopped(code: UInt64?)
    /// The stream ended before the requested number of bytes arrived.
    case unexpectedEndOfStream(received: Int, wanted: Int)
    /// Sending after `endOfStream: true`, or on the receive-only side of a stream.
    case streamNotWritable
    /// Receiving on the send-only side of a unidirectional stream.
    case streamNotReadable
    /// No packet from the peer within the idle timeout.
    case idleTimeout
    /// The peer lost its state for this connection (stateless reset), e.g. after a restart.
    case peerReset
    /// Nothing accepts TCP connections at the endpoint (connection refused).
    case connectionRefused(endpoint: String)
    /// The server is at one of its limits: it refused the connection (QUIC's
    /// CONNECTION_REFUSED), or closed this idle one to make room for a new client. `reason` is
    /// the server's, e.g. "server busy: connection limit reached".
    case serverBusy(endpoint: String, reason: String)
    /// The peer reset the TCP connection (RST): it closed abruptly or crashed.
    case connectionReset
    /// The peer closed the TCP connection without TLS's close_notify: what arrived may have
    /// been cut short (by a crash, or by an attacker), so the end of the stream is not trusted.
    case truncated
    /// TLS failed for another reason (no common version or cipher, a malformed record).
    case tlsFailure(String)
    /// The operation, or the connection it belonged to, was cancelled.
    case cancelled
    /// The peer did not enable RFC 9221 datagrams.
    case datagramsNotSupported
    /// The datagram does not fit in one QUIC packet on this connection.
    case datagramTooLarge(size: Int, maximum: Int)
    /// The configuration cannot work (unreadable certificate file, empty ALPN, bad pin).
    case invalidConfiguration(String)
    /// A socket call failed.
    case system(call: String, errno: Int32)
    /// The stack or option is not implemented yet in Braid.
    case unsupported(String)
    /// No interface satisfies the connection's interface parameters (`requiredInterfaceType`,
    /// `prohibitedInterfaceTypes`, `requiredInterface`, `prohibitedInterfaces`,
    /// `expensivePathsProhibited`, `constrainedPathsProhibited`); `reason` names the
    /// constraint and the interfaces it rules out. A connection reports it in `waiting`, and
    /// connects when an allowed interface appears.
    case noAllowedInterface(reason: String)
    /// The call does not fit the object's state (e.g. a listener that is already running).
    case invalidState(String)
    /// An unexpected failure inside the QUIC engine.
    case internalError(String)
    /// A framed connection's (`TLV`, `Coder`) peer announced a message of `size` bytes, more
    /// than the `maximum` this side accepts (`maximumMessageSize`); the connection failed
    /// (`Coder` over UDP: the datagram was dropped and the connection goes on). On a send: the
    /// message is larger than a TLV header can announce.
    case messageTooLarge(size: Int, maximum: Int)
    /// A TLV message type outside what the wire's 32-bit type field carries; nothing was sent.
    case messageTypeOutOfRange(type: Int)
    /// A `Coder` connection received a message that is not a `type`; `reason` is the
    /// decoder's. The message was consumed; the connection stays usable.
    case messageDecodingFailed(type: String, reason: String)
    /// A `Coder` connection could not encode a `type` to send it; `reason` is the encoder's.
    case messageEncodingFailed(type: String, reason: String)
    /// An HTTP/3 response body (`size` bytes so far, or its content-length) is larger than
    /// the client's `maximumResponseBodySize`: the request was cancelled.
    case responseTooLarge(size: Int, maximum: Int)
    /// The peer's HTTP/3 broke the protocol (a malformed message, invalid QPACK): Braid ended
    /// the request's stream, or the connection, with this HTTP/3 error code (RFC 9114 section
    /// 8.1, RFC 9204 section 6), which the peer received. `reason` says what was wrong.
    case http3ProtocolError(code: UInt64, reason: String)
    /// The WebSocket upgrade failed: the server refused it or answered wrongly (a listener:
    /// the client's request was not a valid upgrade, and it got an HTTP error response).
    case webSocketHandshakeFailed(String)
    /// The peer broke RFC 6455 (a bad mask, a reserved bit or opcode, a fragmented or
    /// oversized control frame, invalid UTF-8 text): Braid sent it a close with `closeCode`
    /// (1002, or 1007 for text) and ended the connection.
    case webSocketProtocolError(closeCode: UInt16, reason: String)

    /// What happened and what to do about it, in a sentence or two.
    /// The same text as `description`, so `error.localizedDescription` says what happened and
    /// what to do instead of Foundation's "The operation could not be completed".
    public var errorDescription: String? { description }

    public var description: String {
        switch self {
        case .dnsNameNotFound(let host):
            "DNS has no address for \"\(host)\". Check the spelling, or use an IP address."
        case .dnsFailure(let host, let message):
            "Looking up \"\(host)\" failed: \(message). Check the resolver configuration (/etc/resolv.conf) and connectivity."
        case .noResponse(let endpoint, let timeout):
            "No response from \(endpoint) within \(timeout): check the address and port and that a server listens there (QUIC: UDP, TLS and TCP: TCP), or raise the timeout."
        case .certificateRejected(.rejected):
            "The peer's TLS certificate was refused by the application's own check (its verify block answered false): the peer is not the one that check expects, or the check needs updating."
        case .certificateRejected(let problem):
            "The peer's TLS certificate was rejected: \(problem). Trust its CA (trust(.certificateAuthorities(file:)) on the QUIC, TLS or DTLS stack, or the system store), connect with the name in the certificate, or update the pins."
        case .handshakeRejectedByPeer(let alert):
            "The peer aborted the TLS handshake with alert \(alert) (\(tlsAlertName(alert)))\(Self.alertAdvice(alert))."
        case .alpnMismatch(let offered):
            "The server supports none of the application protocols offered (ALPN \(offered)). Use an ALPN the server is configured for."
        case .peerClosed(let code, let reason):
            "The peer closed the connection with application error \(code)\(reason.isEmpty ? "" : ": \(reason)")."
        case .protocolError(let code, let reason, let byPeer):
            "QUIC protocol error \(quicTransportErrorLabel(code)) \(byPeer ? "reported by the peer" : "detected locally")\(reason.isEmpty ? "" : ": \(reason)")."
        case .streamReset(let code):
            "The peer reset the stream with application error code \(code)."
        case .streamStopped(let code):
            "The peer stopped reading the stream\(code.map { " (application error code \($0))" } ?? "")."
        case .unexpectedEndOfStream(let received, let wanted):
            "The stream ended after \(received) of the \(wanted) bytes wanted."
        case .streamNotWritable:
            "The stream cannot be written: its sending side has ended, or it is the peer's unidirectional stream."
        case .streamNotReadable:
            "The stream cannot be read: it is our own unidirectional stream."
        case .idleTimeout:
            "The connection timed out: no packet from the peer within the idle timeout. Check that the peer is reachable, or raise QUIC.idleTimeout."
        case .peerReset:
            "The peer has no state for this connection any more (stateless reset), e.g. it restarted. Connect again."
        case .connectionRefused(let endpoint):
            "\(endpoint) refused the TCP connection: nothing listens on that port. Check the address and port, and that the server runs."
        case .serverBusy(let endpoint, let reason):
            "The server\(endpoint.isEmpty ? "" : " \(endpoint)") is busy and \(reason.contains("idle") ? "closed this idle connection" : "refused the connection")\(reason.isEmpty ? "" : " (\(reason))"). Try again later, or use another server."
        case .connectionReset:
            "The peer reset the TCP connection (RST): it closed abruptly, crashed, or rejected what was sent. Connect again."
        case .tlsFailure(let why):
            "TLS failed: \(why)"
        case .truncated:
            "The peer closed the connection without TLS close_notify, so the data may have been cut short (a crash, or an attacker on the path). Treat what arrived as incomplete."
        case .cancelled:
            "The operation was cancelled."
        case .datagramsNotSupported:
            "The peer did not enable QUIC datagrams (RFC 9221); set a non-zero maxDatagramFrameSize on both ends."
        case .datagramTooLarge(let size, let maximum):
            "A \(size)-byte datagram exceeds this connection's maximum of \(maximum) bytes (usableDatagramFrameSize); split it or use a stream."
        case .invalidConfiguration(let message):
            "Invalid configuration: \(message)."
        case .system(let call, let code):
            "\(call) failed: \(String(cString: strerror(code))) (errno \(code))."
        case .unsupported(let what):
            "Not supported by Braid yet: \(what)."
        case .noAllowedInterface(let reason):
            "No interface satisfies the parameters: \(reason). The connection waits until an allowed interface appears; relax the parameters, or change NetworkInterfacePolicy's marks, to use the others."
        case .invalidState(let what):
            "Invalid state: \(what)."
        case .internalError(let what):
            "Internal QUIC error: \(what)."
        case .messageTooLarge(let size, let maximum):
            "A \(size)-byte message exceeds the maximum of \(maximum) bytes. If the peer is trusted, raise maximumMessageSize on the receiving stack (TLV or Coder); otherwise the peer is misbehaving, and the connection (for a framer on a QUIC stream: the stream) was closed (for Coder over UDP: the datagram was dropped, and the connection is still usable)."
        case .messageTypeOutOfRange(let type):
            "TLV message type \(type) is outside 0...\(UInt32.max), the range of its 32-bit type field; nothing was sent. Use a type in that range."
        case .messageDecodingFailed(let type, let reason):
            "A received message could not be decoded as \(type): \(reason). Check that both ends send the same type with the same coder; the message was skipped and the connection is still usable."
        case .messageEncodingFailed(let type, let reason):
            "A \(type) could not be encoded: \(reason). Nothing was sent."
        case .responseTooLarge(let size, let maximum):
            "The HTTP/3 response body (\(size) bytes) exceeds the client's maximumResponseBodySize of \(maximum) bytes; the request was cancelled. Raise maximumResponseBodySize if the server is trusted."
        case .http3ProtocolError(let code, let reason):
            "The peer broke the HTTP/3 protocol (\(HTTP3ErrorCode(code: code))): \(reason). The peer was sent that error code; this is the peer's bug, not something to retry."
        case .webSocketHandshakeFailed(let reason):
            "The WebSocket upgrade failed: \(reason). Check the URL's path, the subprotocols, and that the server speaks WebSocket on that port."
        case .webSocketProtocolError(let closeCode, let reason):
            "The peer broke the WebSocket protocol: \(reason). Braid closed the connection with code \(closeCode); this is the peer's bug, not something to retry."
        }
    }

    /// What an alert the peer sent means for the user.
    private static func alertAdvice(_ alert: UInt8) -> String {
        switch alert {
        case 42, 43, 44, 45, 46, 48: ": it did not accept our certificate"
        case 116: ": it requires a client certificate (TLS.identity(certificateChainFile:privateKeyFile:))"
        case 70: ": it allows none of our TLS versions"
        case 112: ": it does not serve the name we asked for (SNI)"
        default: ""
        }
    }

    /// The public form of an engine or datapath error.
    init(_ error: any Error, endpoint: String = "", handshakeTimeout: Duration = .zero) {
        if let error = error as? NetworkError {
            self = error
        } else if let error = error as? any NetworkErrorConvertible {
            self = error.networkError(endpoint: endpoint, handshakeTimeout: handshakeTimeout)
        } else if let error = error as? DatapathError {
            switch error {
            case .system(_, ECONNREFUSED): self = .connectionRefused(endpoint: endpoint)
            case .system(_, ECONNRESET), .system(_, EPIPE): self = .connectionReset
            case .system(let call, let code): self = .system(call: call, errno: code)
            case .timedOut(let duration): self = .noResponse(endpoint: endpoint, timeout: duration)
            }
        } else if let error = error as? StreamBridgeError {
            switch error {
            case .unexpectedEndOfStream(let received, let wanted): self = .unexpectedEndOfStream(received: received, wanted: wanted)
            case .notWritable: self = .streamNotWritable
            }
        } else if error is CancellationError {
            self = .cancelled
        } else {
            self = .internalError(String(describing: error))
        }
    }

    /// Runs a call into the loop-side machinery and reports any failure as a `NetworkError`:
    /// the queues, the engine and the datapath speak their own errors, and cancellation
    /// arrives as `CancellationError`.
    static func mapping<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch {
            throw NetworkError(error)
        }
    }
}

#if canImport(Glibc)
import Glibc
#endif
