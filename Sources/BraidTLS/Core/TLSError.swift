/// Every way TLS configuration or a TLS connection can fail, with a message that says what to do
/// about it.
///
/// Decision: a server whose `peerAuthentication` is `.required` and whose client presents no
/// certificate fails with `certificateRejected(.missing)` (our check failed: the certificate is
/// missing); the client learns it as `peerAlert` `certificate_required` (TLS 1.3).
public enum TLSError: Error, Sendable, Hashable, CustomStringConvertible {
    /// We rejected the peer's certificate (our check failed).
    case certificateRejected(CertificateProblem)
    /// The peer aborted the connection with a fatal TLS alert, e.g. `bad_certificate` or
    /// `unknown_ca` when it rejected our certificate. `name` is the RFC 8446 name.
    case peerAlert(code: UInt8, name: String)
    /// Client and server share no application protocol. `offered` is what the client offered
    /// (on a client, our own list; on a server, the client's).
    case alpnMismatch(offered: [String])
    /// The transport ended without the peer's close_notify: the data may have been cut short
    /// (a truncation attack looks exactly like this).
    case truncated
    /// The two ends allow no common TLS version.
    case protocolVersionMismatch
    /// The handshake failed for another reason (no common cipher, bad handshake message, ...).
    case handshakeFailed(String)
    /// The peer broke the protocol after the handshake (bad record, unexpected message, ...).
    case protocolError(String)
    /// A DTLS message does not fit one record in one datagram: `size` bytes against the `maximum`
    /// the path MTU leaves (`DTLSConnection.maximumMessageSize`). Nothing was sent.
    case messageTooLarge(size: Int, maximum: Int)
    /// Invalid configuration (unreadable certificate file, bad pin, inconsistent versions, ...).
    case configuration(String)
    /// The call is not allowed in the connection's current state.
    case invalidState(String)
    /// GnuTLS failed unexpectedly in `function` with error `code`.
    case internalError(function: String, code: Int32)

    public var description: String {
        switch self {
        case .certificateRejected(let problem):
            "The peer's TLS certificate was rejected: \(problem). Trust its CA (a CA file or the system store), fix the name you connect to, update the pins, or give the peer a valid certificate."
        case .peerAlert(let code, let name):
            "The peer aborted TLS with alert \(code) (\(name)). \(Self.advice(forAlert: code))"
        case .alpnMismatch(let offered):
            "The server supports none of the application protocols offered (ALPN \(offered)). Configure a protocol both ends support."
        case .truncated:
            "The connection ended without a TLS close_notify: the data may have been truncated. Treat what was received as incomplete."
        case .protocolVersionMismatch:
            "Client and server allow no common TLS version. Widen minimumVersion/maximumVersion on one end."
        case .handshakeFailed(let why):
            "The TLS handshake failed: \(why)."
        case .protocolError(let why):
            "The peer violated the TLS protocol: \(why)."
        case .messageTooLarge(let size, let maximum):
            "A \(size)-byte DTLS message exceeds the \(maximum) bytes one datagram carries at this MTU; nothing was sent. Split the message, or raise the MTU if the path allows it."
        case .configuration(let what):
            "Invalid TLS configuration: \(what)."
        case .invalidState(let what):
            "Invalid TLS connection state: \(what)."
        case .internalError(let function, let code):
            "GnuTLS error in \(function): \(gnutlsErrorString(code)) (\(code))."
        }
    }

    private static func advice(forAlert code: UInt8) -> String {
        switch code {
        case 42, 43, 44, 45, 46, 48:
            "It did not accept our certificate: give this end a certificate the peer trusts, or configure the peer to trust our CA."
        case 116: "The server requires a client certificate: configure a client identity."
        case 70: "The peer supports none of the TLS versions we allow."
        case 120: "The peer supports none of the application protocols (ALPN) we offered."
        case 40: "The peer found no acceptable parameters (cipher suites, groups, signature algorithms)."
        case 112: "The server does not serve the name we asked for (SNI)."
        default: "See the peer's logs for why."
        }
    }
}
