import BraidIO
import BraidWebSocket

/// WebSocket as a byte-stream layer, over another layer (TLS's, or `PlainByteStreamLayer`
/// over plain TCP): the engine runs the upgrade once the layer below is ready, and the channel
/// is ready when the upgrade completes.
///
/// Above the layer, the channel's byte stream carries each message as one TLV record (type:
/// the opcode, value: the payload; a close's value is its code and reason), so the framed
/// receive path TLV uses delivers whole WebSocket messages with their opcode, and a send is a
/// TLV record this layer turns into one frame as its bytes pass (a frame's header needs only
/// the length, which the record's header gives). Received messages arrive whole: the engine
/// reassembles fragments, bounded by the maximum message size.
package final class WebSocketLayer: ByteStreamLayer {
    /// The size of a record's header above the layer: type then length, both UInt32 big-endian.
    package static let recordHeaderSize = 8
    /// The most frame bytes the engine may hold before the layer takes no more from above.
    private static let outputLimit = 64 * 1024

    package let engine: WebSocketConnection
    private let inner: any ByteStreamLayer
    private var innerReady = false
    private var reportedReady = false
    /// The peer's close was delivered: the stream above ends.
    private var peerClosed = false
    /// A failure met where it could not be thrown (lending output): thrown next.
    private var deferredFailure: (any Error)?

    // The record being turned into a frame.
    private var recordHeader: [UInt8] = []
    private var recordRemaining = 0

    /// A server's application answering upgrade requests (an engine configured with
    /// `applicationAnswersRequests`): called on the loop with each request; its answer may come
    /// from any thread, later, and only the first counts. Until then the channel reads nothing.
    package var requestAnswerer: (@Sendable (WebSocketClientRequest, @escaping @Sendable (WebSocketRequestAnswer) -> Void) -> Void)?
    /// The answer, from whichever thread gave it, until the loop hands it to the engine.
    private let answer = WebSocketPendingAnswer()
    private var wake: (@Sendable () -> Void)?

    package init(engine: WebSocketConnection, over inner: any ByteStreamLayer) {
        self.engine = engine
        self.inner = inner
        engine.start()
    }

    /// Also handed to the layer below: what it waits on (a TLS verify block's verdict) is
    /// what this layer waits on too.
    package var requestProcessing: (@Sendable () -> Void)? {
        get { wake }
        set {
            wake = newValue
            inner.requestProcessing = newValue
        }
    }

    /// Shows the application the request; its answer wakes the channel.
    private func ask(about request: WebSocketClientRequest) {
        let answer = answer, wake = wake
        guard let requestAnswerer else {
            // An engine that waits for an answer nobody gives refuses rather than hangs.
            answer.give(WebSocketRequestAnswer(accepted: false, subprotocol: nil, additionalHeaders: []))
            wake?()
            return
        }
        requestAnswerer(request) { given in
            if answer.give(given) { wake?() }
        }
    }

    // MARK: From below

    package var bufferedInputCount: Int { inner.bufferedInputCount }

    package func withInputSpace(minimum: Int, _ body: (UnsafeMutableRawBufferPointer) throws -> Int) rethrows -> Int {
        try inner.withInputSpace(minimum: minimum, body)
    }

    package func process(deliver: (UnsafeRawBufferPointer) -> Void) throws -> ByteStreamLayerEvents {
        if let deferredFailure { throw deferredFailure }
        if engine.awaitsAnswer {
            guard let given = answer.given else { return .awaitingDecision }
            do {
                try engine.respond(with: given)
            } catch {
                // The refusal's response goes out before the connection ends.
                try? pushToInner()
                throw error
            }
        }
        var failure: WebSocketError?
        let below = try inner.process { bytes in
            guard failure == nil else { return }
            do throws(WebSocketError) { try engine.receive(bytes) } catch { failure = error }
        }
        if below.contains(.becameReady) { innerReady = true }
        var events: ByteStreamLayerEvents = []
        while let event = engine.pollEvent() {
            switch event {
            case .opened:
                break
            case .requestReceived(let request):
                ask(about: request)
            case .message(let opcode, let payload):
                guard !peerClosed else { continue }
                Self.deliverRecord(type: opcode.rawValue, payload, to: deliver)
                if opcode == .close {
                    peerClosed = true
                    events.insert(.peerFinished)
                }
            }
        }
        if innerReady && engine.isOpen && !reportedReady {
            reportedReady = true
            events.insert(.becameReady)
        }
        if below.contains(.peerFinished) { events.insert(.peerFinished) }
        if below.contains(.awaitingDecision) || engine.awaitsAnswer { events.insert(.awaitingDecision) }
        try pushToInner()
        if let failure { throw failure }
        return events
    }

    private static func deliverRecord(type: UInt8, _ payload: [UInt8], to deliver: (UnsafeRawBufferPointer) -> Void) {
        let length = UInt32(payload.count)
        let header: [UInt8] = [0, 0, 0, type, UInt8(length >> 24), UInt8((length >> 16) & 0xFF), UInt8((length >> 8) & 0xFF), UInt8(length & 0xFF)]
        header.withUnsafeBytes { deliver($0) }
        if !payload.isEmpty { payload.withUnsafeBytes { deliver($0) } }
    }

    /// Held as long as the layer below holds it: its later `.peerFinished` passes up.
    package func endOfInput() throws -> Bool {
        try inner.endOfInput()
    }

    // MARK: From above

    package var sendsEarlyData: Bool { false }

    package func sendEarly(_ bytes: UnsafeRawBufferPointer) throws -> Int { 0 }

    /// Takes records from above, turning each into a frame as its bytes pass; takes none
    /// while the engine holds `outputLimit` bytes the layer below has not taken.
    package func send(_ bytes: UnsafeRawBufferPointer) throws -> Int {
        if let deferredFailure { throw deferredFailure }
        try pushToInner()
        var taken = 0
        while taken < bytes.count, engine.pendingOutputCount < Self.outputLimit {
            if recordRemaining == 0 && recordHeader.count < Self.recordHeaderSize {
                recordHeader.append(bytes[taken])
                taken += 1
                if recordHeader.count == Self.recordHeaderSize { try beginRecord() }
                continue
            }
            let count = min(bytes.count - taken, recordRemaining, Self.outputLimit - engine.pendingOutputCount)
            engine.appendPayload(UnsafeRawBufferPointer(rebasing: bytes[taken ..< taken + count]))
            taken += count
            recordRemaining -= count
            if recordRemaining == 0 { recordHeader.removeAll(keepingCapacity: true) }
        }
        try pushToInner()
        return taken
    }

    private func beginRecord() throws {
        let type = recordHeader[0 ..< 4].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        let length = recordHeader[4 ..< 8].reduce(0) { $0 << 8 | Int($1) }
        guard let wide = UInt8(exactly: type), let opcode = WebSocketOpcode(rawValue: wide), opcode != .continuation else {
            throw WebSocketError.protocolViolation("a message of type \(type) from above is not a WebSocket opcode")
        }
        try engine.beginFrame(opcode, length: length)
        recordRemaining = length
        if length == 0 { recordHeader.removeAll(keepingCapacity: true) }
    }

    package func seal() throws {
        if let deferredFailure { throw deferredFailure }
        try pushToInner()
    }

    package var heldByteCount: Int { engine.pendingOutputCount + inner.heldByteCount }

    /// Ends the layer's stream: a close frame (1000) unless one was sent, then the layer
    /// below's end.
    package func close() {
        if engine.isOpen && !engine.closeSent { engine.close(code: 1000, reason: []) }
        do { try pushToInner() } catch { deferredFailure = error }
        inner.close()
    }

    package var isClosed: Bool { inner.isClosed }

    // MARK: To below

    package var pendingOutputCount: Int {
        if inner.pendingOutputCount == 0 && engine.pendingOutputCount > 0 {
            do { try pushToInner() } catch { deferredFailure = error }
        }
        return inner.pendingOutputCount
    }

    package func withPendingOutput(_ body: (UnsafeRawBufferPointer) throws -> Int) rethrows -> Int {
        let written = try inner.withPendingOutput(body)
        do { try pushToInner() } catch { deferredFailure = error }
        return written
    }

    /// Hands the engine's frames to the layer below, as much as it takes, once it is ready.
    private func pushToInner() throws {
        guard innerReady, engine.pendingOutputCount > 0, !inner.isClosed else { return }
        var moved = false
        while engine.pendingOutputCount > 0 {
            let taken = try engine.withPendingOutput { try inner.send($0) }
            if taken == 0 { break }
            moved = true
        }
        if moved { try inner.seal() }
    }

    // MARK: Facts

    package var negotiatedALPN: String? { inner.negotiatedALPN }
    package var isResumed: Bool { inner.isResumed }
    package var earlyDataAccepted: Bool { inner.earlyDataAccepted }
    package var securityFacts: SecurityFacts? { inner.securityFacts }
    package var upgradeFacts: UpgradeFacts? {
        UpgradeFacts(subprotocol: engine.subprotocol, extensions: engine.extensionsHeader)
    }
}
