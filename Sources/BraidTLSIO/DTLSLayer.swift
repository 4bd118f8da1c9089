import BraidIO
import BraidTLS

/// The DTLS engine as a `DatagramLayer`: a `DatagramChannel` runs it between its socket and
/// its messages, each message one record in one datagram. An engine made with
/// `callerVerifiesPeer` stops after its handshake for `peerJudge`, as `TLSLayer`'s does
/// (`TLSPeerJudgement`): nothing of the peer's reaches above before an acceptance.
package final class DTLSLayer: DatagramLayer {
    package let engine: DTLSConnection
    package let handshakeTimeout: Duration
    private let judgement = TLSPeerJudgement()

    /// The layer over `engine`, which must become ready within `handshakeTimeout` (the wait for
    /// a judge's verdict included); the engine retransmits for as long.
    package init(_ engine: DTLSConnection, handshakeTimeout: Duration = .seconds(60)) {
        self.engine = engine
        self.handshakeTimeout = handshakeTimeout
        engine.handshakeTimeLimit = handshakeTimeout
    }

    /// The application's judge of the server (an engine made with `callerVerifiesPeer`),
    /// called on the loop once the handshake is done but for it; its verdict may come from any
    /// thread, later.
    package var peerJudge: TLSPeerJudge? {
        get { judgement.judge }
        set { judgement.judge = newValue }
    }

    package var requestProcessing: (@Sendable () -> Void)? {
        get { judgement.requestProcessing }
        set { judgement.requestProcessing = newValue }
    }

    package func start() throws {
        // A client's first pass queues its ClientHello; a server's waits for one.
        _ = try process { _ in }
    }

    package func receive(_ datagram: UnsafeRawBufferPointer) -> Bool {
        engine.receiveDatagram(datagram)
    }

    package func process(deliver: (UnsafeRawBufferPointer) -> Void) throws -> Bool {
        // Until the verdict, the peer's datagrams wait in the engine (which drops beyond its
        // bound, as a full socket would).
        if judgement.stillWaiting(applyingTo: engine) { return false }
        let events = try engine.process(deliver: deliver)
        if events.contains(where: { if case .peerAwaitingVerdict = $0 { true } else { false } }) {
            judgement.ask(
                about: TLSPeerFacts(
                    certificateChain: engine.peerCertificateChain, serverName: engine.serverName,
                    negotiatedALPN: engine.negotiatedALPN, negotiatedVersion: nil, peerIsClient: engine.role == .server))
        }
        return engine.isHandshakeComplete
    }

    package func seal(_ message: UnsafeRawBufferPointer) throws {
        // The channel drains the engine's datagrams after each seal, so its queue has room.
        _ = try engine.send(message)
    }

    package var maximumMessageSize: Int { engine.maximumMessageSize }

    package func popOutput() -> [UInt8]? { engine.popDatagram() }

    package var timeout: Duration? { engine.retransmissionTimeout }

    package var bufferedBytes: Int { engine.queuedBytes }

    package func close() { engine.close() }

    package var peerClosed: Bool { engine.peerClosed }

    package var negotiatedALPN: String? { engine.negotiatedALPN }

    /// DTLS 1.2's version is not TLS's minor number: left out.
    package var securityFacts: SecurityFacts? {
        SecurityFacts(
            version: nil, serverName: engine.serverName.isEmpty ? nil : engine.serverName, peerCertificates: engine.peerCertificateChain)
    }
}
