import BraidTLSIO

/// An application's own check of the server's certificate, replacing Braid's (a classic
/// verify block): a TLS stack with one skips its chain, name and pin checks and asks the
/// verifier after the handshake, before the connection is ready. Equal only to itself.
struct TLSPeerVerifier: Sendable, Hashable {
    private final class Identity: Sendable {}
    private let identity = Identity()
    let judge: TLSPeerJudge

    init(_ judge: @escaping TLSPeerJudge) { self.judge = judge }

    static func == (lhs: TLSPeerVerifier, rhs: TLSPeerVerifier) -> Bool { lhs.identity === rhs.identity }

    func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(identity)) }
}
