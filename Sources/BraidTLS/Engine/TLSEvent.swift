/// What `TLSConnection.process(deliver:)` reports besides plaintext, in the order it happened.
public enum TLSEvent: Sendable, Hashable {
    /// The handshake finished: `negotiatedALPN`, `negotiatedVersion`, `isResumed` and
    /// `earlyDataAccepted` are final, and `send` may be called.
    case handshakeCompleted
    /// `callerVerifiesPeer` (in a client's or a server's configuration): the handshake is done
    /// but for the caller's verdict on `peerCertificateChain`; `process` moves nothing until
    /// `acceptPeer()` (then `.handshakeCompleted` follows) or `rejectPeer()`.
    case peerAwaitingVerdict
    /// Client: the server rejected our 0-RTT data (`byteCount` bytes). None of it reached the
    /// application; send it again with `send`, or call `resendRejectedEarlyData()`.
    case earlyDataRejected(byteCount: Int)
    /// Client: a session ticket to resume with later (store it, e.g. `serialized()` into a file).
    case sessionTicket(TLSSessionTicket)
    /// The peer sent close_notify: it sends nothing more. We may still send until `close()`.
    case peerClosed
}
