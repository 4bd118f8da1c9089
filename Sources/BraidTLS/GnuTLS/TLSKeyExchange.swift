import CBraid

/// How Braid's handshakes (TLS over TCP and QUIC) agree on a key: X25519 first, then the NIST
/// curves (TLS over TCP also keeps X448 and the finite-field groups, in GnuTLS's NORMAL order,
/// for TLS 1.2 peers), and a client sends a key share for the first group only.
///
/// GnuTLS's NORMAL prefers P-256, and its clients send two shares (P-256 and X25519): a P-256
/// key generated on every handshake, and a P-256 exchange on both ends when the server takes
/// the client's first choice. With X25519 first and one share, a loopback TLS handshake
/// between Braid's ends was ready in 0.86x the time (interleaved A/B in the commit that made
/// this). A server without X25519 asks for its own group with a HelloRetryRequest, one more
/// round trip, as it would of OpenSSL 3's clients, which also send a single X25519 share.
package enum TLSKeyExchange {
    /// The elliptic-curve groups in order, as a priority-string fragment: QUIC's whole list.
    package static let ellipticCurveGroups = "-GROUP-ALL:+GROUP-X25519:+GROUP-SECP256R1:+GROUP-SECP384R1:+GROUP-SECP521R1"

    /// TLS over TCP: the elliptic curves, then the rest of NORMAL's groups in its order.
    package static let tlsGroups =
        ellipticCurveGroups + ":+GROUP-X448:+GROUP-FFDHE2048:+GROUP-FFDHE3072:+GROUP-FFDHE4096:+GROUP-FFDHE6144:+GROUP-FFDHE8192"

    /// `gnutls_init` flags for a client session: a key share for the first group only.
    package static let clientSessionFlags = GNUTLS_KEY_SHARE_TOP.rawValue
}
