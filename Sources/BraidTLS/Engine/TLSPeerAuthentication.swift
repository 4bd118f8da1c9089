/// Whether a server asks clients for a certificate (mutual TLS).
public enum TLSPeerAuthentication: Sendable, Hashable {
    /// Do not ask.
    case none
    /// Ask; a client may decline, but a certificate it presents must pass the checks.
    case optional
    /// Ask and fail the handshake without one (`TLSError.certificateRejected(.missing)`).
    case required
}
