import BraidCore
import BraidHTTP3
import BraidQUIC

/// Test glue between one `QUICConnection` and one `HTTP3Connection`, as the datapath's owner
/// will do it: the three unidirectional streams opened at the handshake, every stream's bytes
/// fed in with flow-control credit returned only as consumed (body bytes once the test
/// application took them), writes taken only while the QUIC engine has room, streams blocked
/// until `streamWritable`, and the engine's resets, STOP_SENDINGs and close carried out.
final class HTTP3OverQUIC {
    let quic: QUICConnection
    let app = HTTP3TestApp()
    private(set) var engine: HTTP3Connection?
    let configuration: HTTP3Configuration
    /// Streams that became readable before the engine existed.
    private var waitingReadable: Set<Int64> = []
    private var blocked: Set<Int64> = []
    /// The time source for closes (the simulated network's clock).
    let now: () -> QUICInstant
    /// Called once the engine exists (the test sends its requests from here).
    var onReady: (HTTP3Connection) -> Void = { _ in }

    init(_ quic: QUICConnection, configuration: HTTP3Configuration = HTTP3Configuration(), now: @escaping () -> QUICInstant) {
        self.quic = quic
        self.configuration = configuration
        self.now = now
    }

    func handle(_ event: QUICEvent) {
        switch event {
        case .handshakeCompleted:
            start()
        case .streamReadable(let id):
            if engine == nil { waitingReadable.insert(id) } else { read(id) }
        case .streamWritable(let id):
            if blocked.remove(id) != nil { engine?.unblockStream(streamID: id) }
        case .streamStopSending(let id, let code):
            engine?.peerStoppedSending(streamID: id, code: code ?? HTTP3ErrorCode.noError.code)
        case .streamClosed(let id):
            engine?.streamClosed(streamID: id)
        case .connectionClosed(let error):
            if case .applicationClosed(let code, let reason) = error {
                engine?.peerClosedConnection(code: code, reason: reason)
            }
        default:
            break
        }
        service()
    }

    /// Opens the QUIC stream for the client's next request (-1 if the QUIC engine refuses).
    func openRequestStream() -> Int64 {
        (try? quic.openStream(bidirectional: true)) ?? -1
    }

    private func start() {
        guard engine == nil else { return }
        do {
            let streams = HTTP3LocalStreams(
                control: try quic.openStream(bidirectional: false),
                qpackEncoder: try quic.openStream(bidirectional: false),
                qpackDecoder: try quic.openStream(bidirectional: false))
            let engine = try HTTP3Connection(role: quic.role == .client ? .client : .server, localStreams: streams, configuration: configuration)
            self.engine = engine
            onReady(engine)
            // Called once: dropping it breaks the cycle through a test's closure.
            onReady = { _ in }
        } catch {
            Issue.record("starting HTTP/3: \(error)")
        }
        for id in waitingReadable.sorted() { read(id) }
        waitingReadable.removeAll()
    }

    private func read(_ id: Int64) {
        guard let engine else { return }
        do {
            var consumed = 0
            let (fin, _) = try quic.read(streamID: id, returnsCredit: false) { bytes in
                consumed += engine.receive(streamID: id, bytes: bytes, fin: false)
            }
            if fin { consumed += engine.receive(streamID: id, bytes: UnsafeRawBufferPointer(start: nil, count: 0), fin: true) }
            quic.returnCredit(streamID: id, bytes: consumed)
        } catch QUICError.streamReset(let streamID, let code) {
            engine.peerResetStream(streamID: streamID, code: code)
        } catch {
            // The stream is gone (closed): nothing to read.
        }
    }

    /// Carries out actions, hands events to the application (returning body credit), and
    /// writes while the QUIC engine has room.
    func service() {
        guard let engine else { return }
        for _ in 0..<1000 {
            for action in engine.takeTransportActions() {
                switch action {
                case .returnCredit(let id, let bytes):
                    quic.returnCredit(streamID: id, bytes: bytes)
                case .stopSending(let id, let code):
                    try? quic.stopSending(streamID: id, applicationErrorCode: code.code)
                case .resetStream(let id, let code):
                    try? quic.resetStream(streamID: id, applicationErrorCode: code.code)
                case .closeConnection(let code, let reason):
                    quic.close(applicationErrorCode: code.code, reason: reason, now: now())
                }
            }
            let events = engine.takeEvents()
            for event in events {
                app.handle(event, engine: engine)
                if case .body(let id, let bytes) = event { quic.returnCredit(streamID: id, bytes: bytes.count) }
            }
            let wrote = write()
            if events.isEmpty && !wrote { return }
        }
    }

    private func write() -> Bool {
        guard let engine, !quic.isClosed else { return false }
        var wrote = false
        while let write = engine.nextWrite(maxBytes: 64 * 1024) {
            wrote = true
            do {
                if write.pieces.isEmpty {
                    try quic.send(streamID: write.streamID, bytes: [UInt8](), fin: write.fin)
                }
                for (index, piece) in write.pieces.enumerated() {
                    try quic.send(streamID: write.streamID, bytes: piece.bytes, range: piece.range, fin: write.fin && index == write.pieces.count - 1)
                }
            } catch {
                // The peer stopped the stream, or it was reset: nghttp3 writes no more there.
                engine.peerStoppedSending(streamID: write.streamID, code: HTTP3ErrorCode.requestCancelled.code)
                continue
            }
            if !quic.canSend(streamID: write.streamID) {
                blocked.insert(write.streamID)
                engine.blockStream(streamID: write.streamID)
            }
        }
        return wrote
    }
}

import Testing
