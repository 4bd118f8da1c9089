import BraidIO
import BraidTLS

/// TLS as a byte-stream layer: a `TLSConnection` engine between a `ByteStreamChannel`'s socket
/// and its byte stream. The channel reads ciphertext straight into the engine's input buffer,
/// the engine decrypts each record into the channel's inbox memory, and the channel writes
/// ciphertext straight from the engine's output buffer: the layer forwards, and copies nothing.
///
/// What only TLS has stays here: small sends share records (`sendCoalescing`, sealed by
/// `seal`), early data the server rejected goes again ahead of everything else, and session
/// tickets go to `ticketReceived`.
package final class TLSLayer: ByteStreamLayer {
    /// The engine, owned by the channel's loop like the layer.
    package let connection: TLSConnection
    package let sendsEarlyData: Bool
    /// Resumption: called on the loop with each ticket the server sends.
    package var ticketReceived: ((TLSSessionTicket) -> Void)?
    /// The application's judge of the server (an engine made with `callerVerifiesPeer`):
    /// called on the loop once the handshake is done but for it; its verdict may come from any
    /// thread, later. Nothing of the peer's reaches above before an acceptance.
    package var peerJudge: TLSPeerJudge? {
        get { judgement.judge }
        set { judgement.judge = newValue }
    }
    package var requestProcessing: (@Sendable () -> Void)? {
        get { judgement.requestProcessing }
        set { judgement.requestProcessing = newValue }
    }
    private let judgement = TLSPeerJudgement()

    /// The layer over `connection`. With `earlyData` (a client resuming with a ticket that
    /// allows it), the sends its channel queued as idempotent before the handshake travel as
    /// TLS 1.3 early data, in the first flight.
    package init(_ connection: TLSConnection, earlyData: Bool = false) {
        self.connection = connection
        sendsEarlyData = earlyData
    }

    // MARK: From below

    package var bufferedInputCount: Int { connection.bufferedCiphertextCount }

    package func withInputSpace(minimum: Int, _ body: (UnsafeMutableRawBufferPointer) throws -> Int) rethrows -> Int {
        try connection.withInputSpace(minimum: minimum, body)
    }

    package func process(deliver: (UnsafeRawBufferPointer) -> Void) throws -> ByteStreamLayerEvents {
        if judgement.stillWaiting(applyingTo: connection) { return .awaitingDecision }
        let happened = try connection.process(deliver: deliver)
        guard !happened.isEmpty else { return [] }
        var events: ByteStreamLayerEvents = []
        var failure: (any Error)?
        // Rejected early data goes again first, ahead of every send that waited for the
        // handshake (it is at most the ticket's early data limit, 16 KiB by default, less than
        // the engine's output bound, so one call takes it all).
        if happened.contains(where: { if case .earlyDataRejected = $0 { true } else { false } }) {
            do { _ = try connection.resendRejectedEarlyData() } catch { failure = error }
        }
        for event in happened {
            switch event {
            case .handshakeCompleted: events.insert(.becameReady)
            case .peerAwaitingVerdict:
                events.insert(.awaitingDecision)
                judgement.ask(
                    about: TLSPeerFacts(
                        certificateChain: connection.peerCertificateChain, serverName: connection.serverName,
                        negotiatedALPN: connection.negotiatedALPN, negotiatedVersion: connection.negotiatedVersion, peerIsClient: connection.role == .server))
            case .peerClosed: events.insert(.peerFinished)
            case .sessionTicket(let ticket): ticketReceived?(ticket)
            case .earlyDataRejected: break
            }
        }
        if let failure { throw failure }
        return events
    }

    package func endOfInput() throws -> Bool {
        try connection.endOfInput()
        return false
    }

    // MARK: From above

    package func sendEarly(_ bytes: UnsafeRawBufferPointer) throws -> Int {
        try connection.sendEarlyData(bytes)
    }

    package func send(_ bytes: UnsafeRawBufferPointer) throws -> Int {
        try connection.sendCoalescing(bytes)
    }

    package func seal() throws {
        try connection.sealCoalesced()
    }

    package var heldByteCount: Int { connection.pendingCiphertextCount + connection.coalescedPlaintextCount }

    package func close() {
        connection.close()
    }

    package var isClosed: Bool { connection.closeSent }

    // MARK: To below

    package var pendingOutputCount: Int { connection.pendingCiphertextCount }

    package func withPendingOutput(_ body: (UnsafeRawBufferPointer) throws -> Int) rethrows -> Int {
        try connection.withPendingCiphertext(body)
    }

    // MARK: Facts

    package var negotiatedALPN: String? { connection.negotiatedALPN }
    package var isResumed: Bool { connection.isResumed }
    package var earlyDataAccepted: Bool { connection.earlyDataAccepted }
    package var securityFacts: SecurityFacts? {
        SecurityFacts(
            version: connection.negotiatedVersion?.rawValue, serverName: connection.serverName.isEmpty ? nil : connection.serverName,
            peerCertificates: connection.peerCertificateChain)
    }
}
