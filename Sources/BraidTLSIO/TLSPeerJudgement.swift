import BraidTLS

/// An engine that stops after its handshake for the application's verdict on the peer
/// (`.peerAwaitingVerdict`) and takes it through these calls: TLS's and DTLS's.
package protocol TLSPeerJudgedEngine: AnyObject {
    /// The peer is accepted: the next pass reports the handshake completed.
    func acceptPeer()
    /// The peer is refused: the connection fails, with a bad_certificate alert for the peer.
    func rejectPeer()
}

extension TLSConnection: TLSPeerJudgedEngine {}
extension DTLSConnection: TLSPeerJudgedEngine {}

/// One connection's wait for its `TLSPeerJudge`, the same whether TLS runs over a byte stream
/// (`TLSLayer`) or DTLS over datagrams (`DTLSLayer`): the layer hands the judge what the
/// handshake showed, the judge answers from any thread, and the answer wakes the layer's
/// channel (`requestProcessing`), whose next pass gives the verdict to the engine on its loop.
/// Owned by the layer, on its loop.
package final class TLSPeerJudgement {
    /// The application's judge; nil refuses every peer (an engine that leaves the check to the
    /// caller must not trust a peer nobody looked at).
    package var judge: TLSPeerJudge?
    /// The channel's way back, called once the verdict is in.
    package var requestProcessing: (@Sendable () -> Void)?
    /// The verdict, from whichever thread the judge answers on.
    private let verdict = TLSPeerVerdict()
    /// The judge was asked and its verdict has not reached the engine yet.
    package private(set) var isWaiting = false

    package init() {}

    /// Hands the peer to the judge; its answer wakes the channel for another pass.
    package func ask(about peer: TLSPeerFacts) {
        isWaiting = true
        let verdict = verdict, wake = requestProcessing
        guard let judge else {
            verdict.give(false)
            wake?()
            return
        }
        judge(peer) { accepted in
            guard verdict.give(accepted) else { return }
            wake?()
        }
    }

    /// While waiting: gives `engine` the verdict if it came. Returns true while the verdict is
    /// still awaited (the engine then takes nothing from the peer).
    package func stillWaiting(applyingTo engine: some TLSPeerJudgedEngine) -> Bool {
        guard isWaiting else { return false }
        guard let accepted = verdict.take() else { return true }
        isWaiting = false
        if accepted { engine.acceptPeer() } else { engine.rejectPeer() }
        return false
    }
}
