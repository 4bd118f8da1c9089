import CBraid

/// Connection migration (RFC 9000 §9), client side.
extension QUICConnection {
    /// Client: moves the connection to `path` now (RFC 9000 §9), typically a new local port or
    /// interface. The peer validates the new path while data keeps flowing; the next packets use
    /// a fresh connection ID, so an observer cannot link the two paths. Packets still arriving
    /// on the old path are dropped by the caller, and lost ones are retransmitted.
    package func migrate(to path: QUICPath, now: QUICInstant) throws {
        try ensureOpen()
        guard role == .client else { throw QUICError.invalidState("only a client can migrate a connection") }
        guard handshakeConfirmed else { throw QUICError.invalidState("migration needs a confirmed handshake") }
        let rc = path.withNgtcp2Path { ngtcp2_conn_initiate_immediate_migration(conn, $0, now.nanoseconds) }
        switch rc {
        case 0: currentTime = now
        case NGTCP2_ERR_CONN_ID_BLOCKED:
            throw QUICError.invalidState("the server has not given us a spare connection ID to migrate with")
        case NGTCP2_ERR_INVALID_STATE:
            throw QUICError.invalidState("the server disabled active migration")
        default: throw QUICError.internalError(code: rc, function: "ngtcp2_conn_initiate_immediate_migration")
        }
    }
}
