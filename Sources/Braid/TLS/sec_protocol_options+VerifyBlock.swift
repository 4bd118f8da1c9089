import BraidSecurity
import BraidTLSIO
import Dispatch

/// A verify block's answer: true accepts the peer, false refuses it.
public typealias sec_protocol_verify_complete_t = @Sendable (_ result: Bool) -> Void

/// A verify block: it gets what the handshake agreed, the peer's chain as a trust under the TLS
/// policy for the server's name, and a completion to call exactly once with its verdict.
public typealias sec_protocol_verify_t = @Sendable (
    _ metadata: sec_protocol_metadata_t, _ trust_ref: sec_trust_t, _ complete: @escaping sec_protocol_verify_complete_t
) -> Void

/// Replaces Braid's check of the peer's certificate with `verify_block`, called on
/// `verify_block_queue` once the handshake is done; the connection becomes ready only when it
/// accepts, and fails with `.tls(-9808)` (errSSLBadCert, the peer gets a bad_certificate
/// alert) when it refuses. A block that never answers meets the handshake timeout.
/// Connections with a block do not resume sessions (so every connection is judged, and
/// `.idempotent` content waits for the handshake). On a TLS or DTLS listener the block judges
/// each client's certificate (under the client policy, without a name), and the listener
/// requires one of every client; a client refused there completes its handshake first and
/// then hears the alert. QUIC fails with
/// `.posix(.EOPNOTSUPP)`. A DTLS block answers within the DTLS handshake's 60 s.
///
/// ```swift
/// let tls = NWProtocolTLS.Options()
/// sec_protocol_options_set_verify_block(tls.securityProtocolOptions, { metadata, trust, complete in
///     let trust = sec_trust_copy_ref(trust).takeRetainedValue()
///     var error: CFError?
///     complete(SecTrustEvaluateWithError(trust, &error))
/// }, DispatchQueue(label: "verify"))
/// ```
public func sec_protocol_options_set_verify_block(
    _ options: sec_protocol_options_t, _ verify_block: @escaping sec_protocol_verify_t, _ verify_block_queue: DispatchQueue
) {
    options.update { $0.verifyBlock = (verify_block, verify_block_queue) }
}

extension TLSPeerVerifier {
    /// A verifier that runs a classic verify block on its queue, with the peer as a
    /// `SecTrust` under the TLS server policy for the name connected to (a listener's: the
    /// client policy, without a name).
    static func calling(_ block: @escaping sec_protocol_verify_t, on queue: DispatchQueue) -> TLSPeerVerifier {
        TLSPeerVerifier { peer, decide in
            let metadata = sec_protocol_metadata_t(peer: peer)
            let certificates = peer.certificateChain.compactMap(SecCertificate.init(der:))
            var trust: SecTrust?
            _ = SecTrustCreateWithCertificates(
                certificates as CFArray,
                peer.peerIsClient ? SecPolicyCreateSSL(false, nil) : SecPolicyCreateSSL(true, peer.serverName as CFString), &trust)
            guard let trust, let wrapped = sec_trust_create(trust), certificates.count == peer.certificateChain.count else {
                decide(false)
                return
            }
            queue.async { block(metadata, wrapped, decide) }
        }
    }
}
