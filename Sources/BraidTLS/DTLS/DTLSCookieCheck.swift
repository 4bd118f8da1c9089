import CBraid

/// What `DTLSServerContext.checkCookie(in:from:)` decided about a datagram from an unknown
/// client.
public enum DTLSCookieCheck: Sendable, Hashable {
    /// A ClientHello with a valid cookie: the client owns its address. Create the connection.
    case verified(Verified)
    /// A ClientHello without a valid cookie: send these bytes (a HelloVerifyRequest) back to
    /// the client's address and keep nothing.
    case reply([UInt8])
    /// Not a ClientHello: ignore the datagram.
    case drop

    /// The sequence numbers the cookie exchange used, which the connection continues from.
    public struct Verified: Sendable, Hashable {
        let recordSequence: UInt32
        let handshakeReadSequence: UInt32
        let handshakeWriteSequence: UInt32

        init(_ prestate: gnutls_dtls_prestate_st) {
            recordSequence = prestate.record_seq
            handshakeReadSequence = prestate.hsk_read_seq
            handshakeWriteSequence = prestate.hsk_write_seq
        }

        var prestate: gnutls_dtls_prestate_st {
            gnutls_dtls_prestate_st(
                record_seq: recordSequence, hsk_read_seq: handshakeReadSequence, hsk_write_seq: handshakeWriteSequence)
        }
    }
}
