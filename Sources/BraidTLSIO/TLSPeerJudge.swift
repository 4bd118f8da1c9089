import BraidTLS

/// An application's own check of the peer, run once a full handshake is done but for it: it
/// gets what the handshake showed of the peer and answers through `decide`, exactly once,
/// from any thread and as late as it likes (the connection's handshake timeout still runs).
package typealias TLSPeerJudge = @Sendable (_ peer: TLSPeerFacts, _ decide: @escaping @Sendable (_ accepted: Bool) -> Void) -> Void

/// What a TLS handshake showed of the peer, for a `TLSPeerJudge`.
package struct TLSPeerFacts: Sendable {
    /// The peer's certificates, leaf first, DER.
    package var certificateChain: [[UInt8]]
    /// The name this client asked for (SNI, and the name the certificate should carry); empty
    /// when a server judges its client.
    package var serverName: String
    package var negotiatedALPN: String?
    package var negotiatedVersion: TLSVersion?
    /// A server judges its client (whose certificate carries no name to check).
    package var peerIsClient = false
}
