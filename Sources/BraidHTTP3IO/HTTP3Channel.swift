import BraidCore
import BraidHTTP3
import BraidIO
import BraidQUIC
import BraidQUICIO
import Foundation
import Logging

/// One HTTP/3 connection's owner on its loop, client or server: the `HTTP3Connection` engine
/// over a `QUICChannel`'s streams. The channel hands it every stream event (it is the
/// channel's `streamConsumer`), so the QUIC connection's drivers, timers, close and errors
/// stay the channel's; this owner feeds each stream's bytes to the engine, writes the
/// engine's writes to the QUIC engine while it has room, carries out the engine's transport
/// actions, and turns its events into `HTTP3Exchange`s for the application.
///
/// Flow control: request and response bodies are credited to the peer only as the
/// application consumes them (`HTTP3Exchange.receiveBody`), so a slow reader stops the peer
/// at the QUIC stream window; bodies sent are pulled from each exchange's bounded outbox.
///
/// The application side reaches it through `reference` (weak, loop-only) and `shared`; a
/// server's requests come out through `shared.requests`, or, given `onRequest`, are handed to
/// it on the loop as they arrive.
package final class HTTP3Channel: QUICStreamConsumer {
    package let role: HTTP3Connection.Role
    package let configuration: HTTP3Configuration
    /// The most body bytes each exchange's outbox holds.
    package let bodyBufferLimit: Int
    /// Server: after this many requests the connection shuts down gracefully (nil: never).
    package let requestsPerConnection: Int?
    /// Server: how long a graceful shutdown lets requests already taken finish before the
    /// connection closes anyway.
    package let shutdownGracePeriod: Duration
    /// Server: how many requests the client may cancel while they are handled (nil: any).
    private var cancellationBudget: HTTP3CancellationBudget?
    /// Server: how long a request stream has, from its opening, to bring its whole header
    /// section (nil: no limit); past it the stream is refused (`checkRequestHeaderDeadlines`).
    package let requestHeaderTimeout: Duration?
    package let reference: HTTP3ChannelReference
    package let shared: HTTP3ChannelShared
    // Per-request state below skips the run-time exclusivity check (a runtime call on every
    // access): it is used on the loop's thread only, and no access is held across a call out.
    @exclusivity(unchecked) private var quic: QUICChannel?
    @exclusivity(unchecked) private(set) var engine: HTTP3Connection?
    @exclusivity(unchecked) private var exchanges: [Int64: HTTP3Exchange] = [:]
    /// Streams that became readable before the engine existed (a server's 0-RTT requests).
    @exclusivity(unchecked) private var waitingReadable: Set<Int64> = []
    /// Streams QUIC flow control stopped (the engine skips them until writable).
    @exclusivity(unchecked) private var blocked: Set<Int64> = []
    /// Client: response heads that arrived in this round of events, delivered once the round's
    /// body events are in the exchanges too (a small response's reader then wakes once, with
    /// its head and body, instead of once for each).
    @exclusivity(unchecked) private var heads: [(HTTP3Exchange, [HTTP3Field])] = []
    /// Client requests waiting for the handshake or for the peer's stream limit, in order.
    @exclusivity(unchecked) private var pendingRequests: [PendingRequest] = []
    @exclusivity(unchecked) private var servicePending = false
    private var finalError: (any Error)?
    /// Server: requests taken so far, and how far a graceful shutdown has come.
    @exclusivity(unchecked) private var requestCount = 0
    private var shutdown = GracefulShutdown.notStarted
    private var drainCheckPending = false
    /// When a draining connection's last request stream was found gone.
    private var drainedAt: MonotonicInstant?
    /// Server: requests whose handler has not returned (`handlerFinished(streamID:context:)`).
    /// Each keeps its stream's credit until then, so the QUIC stream limit bounds them.
    @exclusivity(unchecked) private var unfinishedHandlers: Set<Int64> = []
    /// Server: open request streams whose cancellation was counted against the budget.
    @exclusivity(unchecked) private var countedCancellations: Set<Int64> = []
    /// Server: open request streams we stopped or reset first (the client's reset that answers
    /// is not a cancellation).
    @exclusivity(unchecked) private var endedByServer: Set<Int64> = []
    /// Server: request streams the client reset or stopped in this pass, counted once the
    /// pass's events and actions are handled (a stop or reset of the server's own comes first).
    @exclusivity(unchecked) private var pendingCancellations: [Int64] = []
    /// Server: a check of the request header deadlines is scheduled. One timer per connection,
    /// set as a request stream opens when none is, rather than one per stream.
    @exclusivity(unchecked) private var headerCheckScheduled = false
    /// Server: when the last check ran; streams whose deadline had passed by then were checked.
    private var lastHeaderCheck: MonotonicInstant?

    package init(
        role: HTTP3Connection.Role, loop: EventLoop, configuration: HTTP3Configuration = HTTP3Configuration(), bodyBufferLimit: Int = 256 * 1024,
        requestsPerConnection: Int? = nil, shutdownGracePeriod: Duration = .seconds(10), cancellationBudget: HTTP3CancellationBudget? = nil,
        requestHeaderTimeout: Duration? = nil, onRequest: (@Sendable (HTTP3Exchange) -> Void)? = nil
    ) {
        self.role = role
        self.configuration = configuration
        self.bodyBufferLimit = bodyBufferLimit
        self.requestsPerConnection = requestsPerConnection
        self.shutdownGracePeriod = shutdownGracePeriod
        self.cancellationBudget = cancellationBudget
        self.requestHeaderTimeout = role == .server ? requestHeaderTimeout : nil
        reference = HTTP3ChannelReference(loop: loop, bodyLimit: bodyBufferLimit)
        shared = HTTP3ChannelShared(onRequest: onRequest)
        reference.channel = self
    }

    /// Takes over `channel`'s streams. Call on the loop before its handshake completes.
    package func attach(to channel: QUICChannel) {
        quic = channel
        channel.streamConsumer = self
        if let finalError = channel.finalError { end(finalError) }
    }

    // MARK: QUICStreamConsumer

    package func channelAttached(_ channel: QUICChannel, engine quicEngine: QUICConnection, context: LoopContext) {
        // A resuming client starts at once: its SETTINGS and safe requests go as 0-RTT data.
        if role == .client && quicEngine.attemptedEarlyData { start(quicEngine, context: context) }
    }

    package func channelBecameReady(_ channel: QUICChannel, engine quicEngine: QUICConnection, context: LoopContext) {
        if engine == nil {
            start(quicEngine, context: context)
        } else {
            // Requests that could not go as 0-RTT data (not safe, or past the remembered
            // stream limit) go now.
            openPendingRequests(quicEngine, context: context)
        }
    }

    package func channel(_ channel: QUICChannel, streamEvent event: QUICEvent, engine quicEngine: QUICConnection, context: LoopContext) {
        switch event {
        case .streamOpened(let id):
            // A request stream (client-initiated, bidirectional): its header deadline starts.
            if id & 3 == 0, !headerCheckScheduled, let timeout = requestHeaderTimeout { scheduleHeaderCheck(at: context.now + timeout, context) }
        case .streamReadable(let id):
            if engine == nil { waitingReadable.insert(id) } else { read(id, quicEngine, context: context) }
        case .streamWritable(let id):
            if blocked.remove(id) != nil { engine?.unblockStream(streamID: id) }
        case .streamStopSending(let id, let code):
            noteCancellation(of: id)
            engine?.peerStoppedSending(streamID: id, code: code ?? HTTP3ErrorCode.noError.code)
        case .streamClosed(let id):
            // The engine's events for the stream (its message's end) reach the exchange first.
            service(context)
            engine?.streamClosed(streamID: id)
            blocked.remove(id)
            countedCancellations.remove(id)
            endedByServer.remove(id)
            // No handler for it (no request came, or it was refused): its credit goes back now.
            if !unfinishedHandlers.contains(id) { quicEngine.releaseStreamCredit(streamID: id) }
            // Anything not yet ended ends here (the body already finished keeps its end).
            retire(id, quicEngine) { HTTP3Error.invalidStream(streamID: id, reason: "the stream closed before its message ended") }
        case .streamsAvailable:
            openPendingRequests(quicEngine, context: context)
        default:
            break
        }
        scheduleService(context)
    }

    package func channelEnded(_ channel: QUICChannel, error: any Error) {
        end(error)
    }

    /// What the connection holds between the engine and the applications, which a listener's
    /// buffer limit counts: the decoded fields of header sections being received (no handler
    /// has them yet), and each exchange's body bytes, received and not yet read (a handler
    /// that does not read holds up to its stream's window) or queued to send and not yet taken
    /// by the engine (up to the body outbox's limit).
    package var heldBytes: Int {
        var total = engine?.receivingFieldSectionBytes ?? 0
        for exchange in exchanges.values { total += exchange.inbox.available + exchange.outbox.queuedBytes }
        return total
    }

    // MARK: Engine

    private func start(_ quicEngine: QUICConnection, context: LoopContext) {
        guard engine == nil, finalError == nil else { return }
        let early = quic?.isReady != true
        do {
            let streams = HTTP3LocalStreams(
                control: try quicEngine.openStream(bidirectional: false),
                qpackEncoder: try quicEngine.openStream(bidirectional: false),
                qpackDecoder: try quicEngine.openStream(bidirectional: false))
            let engine = try HTTP3Connection(role: role, localStreams: streams, configuration: configuration)
            if role == .server {
                // The QUIC layer enforces the stream limit (and raises it as streams close);
                // nghttp3 only needs a bound no legal stream ID passes.
                engine.setMaxClientBidirectionalStreams(1 << 60)
            }
            self.engine = engine
        } catch {
            // Before the handshake, the remembered limits may not allow the three streams:
            // start once ready instead (a stream opened here stays unused, which is legal).
            if !early { quic?.cancel(context: context, code: HTTP3ErrorCode.internalError.code, reason: "HTTP/3 could not start") }
            return
        }
        for id in waitingReadable.sorted() { read(id, quicEngine, context: context) }
        waitingReadable.removeAll()
        openPendingRequests(quicEngine, context: context)
        scheduleService(context)
    }

    /// Feeds the engine everything QUIC has for the stream; credits back what it consumed at
    /// once (body bytes are credited as the application reads them).
    private func read(_ id: Int64, _ quicEngine: QUICConnection, context: LoopContext) {
        guard let engine else { return }
        // A request stream counts against the client's stream limit until it has closed and
        // its handler has returned, however early the client resets it: a client resetting
        // requests as it opens them cannot have more handlers running than its limit.
        if role == .server && id & 3 == 0 { quicEngine.holdStreamCredit(streamID: id) }
        do {
            var consumed = 0
            let (fin, _) = try quicEngine.read(streamID: id, returnsCredit: false) { bytes in
                consumed += engine.receive(streamID: id, bytes: bytes, fin: false)
            }
            if fin { consumed += engine.receive(streamID: id, bytes: UnsafeRawBufferPointer(start: nil, count: 0), fin: true) }
            if consumed > 0 { quicEngine.returnCredit(streamID: id, bytes: consumed) }
        } catch QUICError.streamReset(let streamID, let code) {
            noteCancellation(of: streamID)
            engine.peerResetStream(streamID: streamID, code: code)
        } catch {
            // The stream is gone (closed): nothing to read.
        }
    }

    /// Server: the client reset a request stream or stopped its response. Counted once per
    /// stream, unless the server ended the stream first; past the budget the connection closes
    /// with H3_EXCESSIVE_LOAD.
    private func noteCancellation(of id: Int64) {
        guard role == .server, id & 3 == 0, cancellationBudget != nil else { return }
        pendingCancellations.append(id)
    }

    /// Counts the pass's cancellations (after its events are handled); returns false if
    /// that closed the connection.
    private func countCancellations(context: LoopContext) -> Bool {
        guard !pendingCancellations.isEmpty else { return true }
        defer { pendingCancellations.removeAll(keepingCapacity: true) }
        guard finalError == nil, var budget = cancellationBudget else { return finalError == nil }
        var allowed = true
        for id in pendingCancellations where allowed {
            guard !endedByServer.contains(id), countedCancellations.insert(id).inserted else { continue }
            allowed = budget.take(at: context.now)
        }
        cancellationBudget = budget
        guard !allowed else { return true }
        let reason = "the client cancelled more than \(budget.requests) requests within \(budget.interval)"
        Self.logger.debug("HTTP/3 connection closed: \(reason)")
        let channel = quic
        end(HTTP3Error.connectionError(.excessiveLoad, reason: reason, byPeer: false))
        channel?.cancel(context: context, code: HTTP3ErrorCode.excessiveLoad.code, reason: reason)
        return false
    }

    /// Server: the handler of the request on `streamID` has returned: the stream's credit goes
    /// back to the client once the stream has closed (at once if it has).
    func handlerFinished(streamID: Int64, context: LoopContext) {
        guard unfinishedHandlers.remove(streamID) != nil, let quicEngine = quic?.engine else { return }
        quicEngine.releaseStreamCredit(streamID: streamID)
        quic?.transmit(context)
    }

    /// Has the engine's actions, events and writes handled once, at the end of this pass.
    private func scheduleService(_ context: LoopContext) {
        guard !servicePending, engine != nil else { return }
        servicePending = true
        context.atEndOfPass { [self] context in
            servicePending = false
            service(context)
        }
    }

    private func service(_ context: LoopContext) {
        guard let engine, let quicEngine = quic?.engine else { return }
        var rounds = 0
        while true {
            rounds += 1
            for action in engine.takeTransportActions() {
                switch action {
                case .returnCredit(let id, let bytes):
                    quicEngine.returnCredit(streamID: id, bytes: bytes)
                case .stopSending(let id, let code):
                    if role == .server { endedByServer.insert(id) }
                    try? quicEngine.stopSending(streamID: id, applicationErrorCode: code.code)
                case .resetStream(let id, let code):
                    if role == .server { endedByServer.insert(id) }
                    try? quicEngine.resetStream(streamID: id, applicationErrorCode: code.code)
                case .closeConnection(let code, let reason):
                    // The peer broke the protocol: what waits fails with that, not with the
                    // cancellation the close below would report.
                    let channel = quic
                    end(engine.failure ?? HTTP3Error.connectionError(code, reason: reason, byPeer: false))
                    channel?.cancel(context: context, code: code.code, reason: reason)
                    return
                }
            }
            let events = engine.takeEvents()
            for event in events { handle(event, engine: engine, quicEngine: quicEngine) }
            deliverHeads()
            guard countCancellations(context: context) else { return }
            let wrote = write(engine, quicEngine)
            if (events.isEmpty && !wrote) || finalError != nil || rounds > 64 { break }
        }
        quic?.transmit(context)
        if rounds > 64 { scheduleService(context) }
        if let limit = requestsPerConnection, requestCount >= limit, case .notStarted = shutdown {
            shutDownGracefully(context: context)
        }
        closeIfDrained(context)
    }

    private func write(_ engine: HTTP3Connection, _ quicEngine: QUICConnection) -> Bool {
        guard !quicEngine.isClosed else { return false }
        var wrote = false
        while let write = engine.nextWrite(maxBytes: 64 * 1024) {
            wrote = true
            do {
                if write.pieces.isEmpty {
                    try quicEngine.send(streamID: write.streamID, bytes: [UInt8](), fin: write.fin)
                }
                let last = write.pieces.count - 1
                for index in write.pieces.indices {
                    let piece = write.pieces[index]
                    try quicEngine.send(streamID: write.streamID, bytes: piece.bytes, range: piece.range, fin: write.fin && index == last)
                }
            } catch {
                // The peer stopped the stream, or it was reset: nghttp3 writes no more there.
                engine.peerStoppedSending(streamID: write.streamID, code: HTTP3ErrorCode.requestCancelled.code)
                continue
            }
            if !quicEngine.canSend(streamID: write.streamID) {
                blocked.insert(write.streamID)
                engine.blockStream(streamID: write.streamID)
            }
        }
        return wrote
    }

    private func handle(_ event: HTTP3Event, engine: HTTP3Connection, quicEngine: QUICConnection) {
        switch event {
        case .headers, .body:
            break
        default:
            // A head held back must reach its exchange before anything that could end it.
            deliverHeads()
        }
        switch event {
        case .headers(let id, let fields):
            if role == .server {
                guard exchanges[id] == nil else { return }
                let exchange = HTTP3Exchange(streamID: id, requestFields: fields, channel: reference, bodyLimit: bodyBufferLimit)
                exchanges[id] = exchange
                // The stream's credit (held since its first bytes) waits for the handler.
                unfinishedHandlers.insert(id)
                requestCount += 1
                shared.deliver(exchange)
            } else if let exchange = exchanges[id] {
                // Interim (1xx) responses come before the final one; only that one is kept.
                if let status = fields.value(of: ":status"), status.hasPrefix("1") { return }
                heads.append((exchange, fields))
            }
        case .body(let id, let bytes):
            if let exchange = exchanges[id] {
                exchange.inbox.fill { sink in
                    bytes.withUnsafeBytes { sink($0) }
                    return nil
                }
            } else {
                quicEngine.returnCredit(streamID: id, bytes: bytes.count)
            }
        case .trailers:
            // Trailers are not passed to the application yet.
            break
        case .endOfMessage(let id):
            guard let exchange = exchanges[id] else { return }
            // Made only for a response that had no head (an error costs an allocation and a
            // description; most messages end after their head).
            exchange.deliverHeadIfMissing { describe(HTTP3Error.invalidStream(streamID: id, reason: "the response ended without a header section")) }
            exchange.inbox.fill { _ in .finished }
        case .streamReset(let id, let code):
            exchanges[id]?.fail(describe(HTTP3StreamFailure(streamID: id, code: code)))
        case .streamError(let id, let code):
            exchanges[id]?.fail(describe(HTTP3StreamFailure(streamID: id, code: code, byPeer: false)))
        case .stopSending(let id, let code):
            exchanges[id]?.outbox.fail(describe(HTTP3StreamFailure(streamID: id, code: code)))
        case .requestRejected(let id):
            exchanges[id]?.fail(describe(HTTP3Error.requestRejected(streamID: id)))
        case .goaway(let lastStreamID):
            shared.markGoingAway()
            // Requests still waiting for a stream will not be sent here: they go to a new
            // connection (the client retries them) rather than wait for this one to close.
            let waiting = pendingRequests
            pendingRequests.removeAll()
            for request in waiting { request.exchange.fail(describe(HTTP3Error.goingAway(lastStreamID: lastStreamID))) }
        case .connectionError(let error):
            end(error)
        }
    }

    private func deliverHeads() {
        guard !heads.isEmpty else { return }
        for (exchange, fields) in heads { exchange.deliverHead(.success(fields)) }
        heads.removeAll(keepingCapacity: true)
    }

    /// Forgets an exchange (its stream closed, or the application cancelled it) after failing
    /// what of it had not ended. The connection-level credit of body bytes nobody will read
    /// (or whose credit is still held) goes back now, so abandoned bodies cannot stall the
    /// connection's other streams; bytes read later are not credited again.
    private func retire(_ id: Int64, _ quicEngine: QUICConnection?, error: () -> any Error) {
        guard let exchange = exchanges.removeValue(forKey: id) else { return }
        // Most exchanges end complete: no error to make or describe (that costs an allocation,
        // a cast chain and text).
        if !exchange.retireIfComplete() { exchange.fail(describe(error())) }
        var credit = exchange.inbox.takeCredit()
        if exchange.inbox.waitingReceives == 0 { credit += exchange.inbox.available }
        if credit > 0 { quicEngine?.returnCredit(streamID: id, bytes: credit) }
    }

    private func describe(_ error: any Error) -> any Error {
        quic?.describe(error) ?? error
    }

    /// Every exchange and waiting call fails with `error`; no new request is taken.
    private func end(_ error: any Error) {
        guard finalError == nil else { return }
        let described = describe(error)
        finalError = described
        shared.end(described)
        for (_, exchange) in exchanges { exchange.fail(described) }
        exchanges.removeAll()
        for request in pendingRequests { request.exchange.fail(described) }
        pendingRequests.removeAll()
        unfinishedHandlers.removeAll()
        countedCancellations.removeAll()
        endedByServer.removeAll()
        pendingCancellations.removeAll()
        quic = nil
    }

    // MARK: Calls from the application (on the loop)

    /// Client: sends `exchange`'s request on a new stream (once the handshake completes and
    /// the peer's stream limit allows); its body, if `hasBody`, follows through the exchange's
    /// outbox. A request that cannot be sent fails its exchange.
    func sendRequest(_ exchange: HTTP3Exchange, fields: [HTTP3Field], hasBody: Bool, context: LoopContext) {
        if let finalError {
            exchange.fail(finalError)
            return
        }
        pendingRequests.append(PendingRequest(fields: fields, hasBody: hasBody, exchange: exchange))
        if let quicEngine = quic?.engine, engine != nil { openPendingRequests(quicEngine, context: context) }
    }

    private func openPendingRequests(_ quicEngine: QUICConnection, context: LoopContext) {
        guard let engine else { return }
        let ready = quic?.isReady == true
        while let request = pendingRequests.first {
            guard !request.exchange.hasEnded else {
                // Cancelled while it waited.
                pendingRequests.removeFirst()
                continue
            }
            // Before the handshake completes only safe requests may go (0-RTT data can be
            // replayed); later ones keep their order behind one that waits.
            if !ready && !request.mayTravelEarly { return }
            // At the peer's stream limit: wait for `.streamsAvailable` (asked first, as a
            // throw costs more than the question).
            guard quicEngine.streamsLeft(bidirectional: true) > 0 else { return }
            let id: Int64
            do {
                id = try quicEngine.openStream(bidirectional: true)
            } catch QUICError.streamLimitReached {
                return
            } catch {
                pendingRequests.removeFirst()
                request.exchange.fail(describe(error))
                continue
            }
            pendingRequests.removeFirst()
            let exchange = request.exchange
            let outbox = exchange.outbox
            do {
                try engine.sendRequest(streamID: id, fields: request.fields, body: request.hasBody ? { outbox.next() } : nil)
            } catch {
                try? quicEngine.resetStream(streamID: id, applicationErrorCode: HTTP3ErrorCode.requestCancelled.code)
                exchange.fail(describe(error))
                continue
            }
            exchange.assign(streamID: id)
            exchanges[id] = exchange
            if !ready { shared.countEarlyRequest() }
        }
        scheduleService(context)
    }

    /// Server: answers `exchange`'s request; if that fails, the exchange's outbox fails (its
    /// body sends throw) and the stream is cancelled.
    func sendResponse(_ exchange: HTTP3Exchange, fields: [HTTP3Field], hasBody: Bool, context: LoopContext) {
        let streamID = exchange.streamID
        guard let engine, exchanges[streamID] === exchange else {
            // Retired (reset, closed, or the connection ended): the outbox has failed already.
            exchange.outbox.fail(finalError ?? describe(HTTP3Error.invalidStream(streamID: streamID, reason: "the request's stream has ended")))
            return
        }
        let outbox = exchange.outbox
        do {
            try engine.sendResponse(streamID: streamID, fields: fields, body: hasBody ? { outbox.next() } : nil)
        } catch {
            outbox.fail(describe(error))
            cancel(streamID: streamID, context: context)
        }
        scheduleService(context)
    }

    func resumeBody(streamID: Int64, context: LoopContext) {
        // A client's body may be queued before its stream opens; opening it pulls the body.
        guard streamID >= 0 else { return }
        engine?.resumeBody(streamID: streamID)
        scheduleService(context)
    }

    func returnCredit(streamID: Int64, context: LoopContext) {
        guard let exchange = exchanges[streamID] else { return }
        let credit = exchange.inbox.takeCredit()
        guard credit > 0, let quicEngine = quic?.engine else { return }
        quicEngine.returnCredit(streamID: streamID, bytes: credit)
        quic?.transmit(context)
    }

    // MARK: Request header deadline (server)

    private func scheduleHeaderCheck(at deadline: MonotonicInstant, _ context: LoopContext) {
        headerCheckScheduled = true
        context.schedule(at: deadline) { [weak self] context in self?.checkRequestHeaderDeadlines(context) }
    }

    /// Refuses every open request stream whose header section has not come whole within
    /// `requestHeaderTimeout` of its opening, then sets the next check at the earliest deadline
    /// still ahead (none while no request stream is open: the next one's opening sets it).
    /// Each stream is looked at once, when its deadline passes; a stream that closed before
    /// then costs nothing here.
    private func checkRequestHeaderDeadlines(_ context: LoopContext) {
        headerCheckScheduled = false
        guard let timeout = requestHeaderTimeout, finalError == nil, let quicEngine = quic?.engine, !quicEngine.isClosed else { return }
        let now = context.now
        guard let engine else {
            // 0-RTT requests before the handshake completed: looked at once the engine runs.
            scheduleHeaderCheck(at: now + timeout, context)
            return
        }
        // Requests that came whole in this pass reach their exchanges first.
        service(context)
        guard finalError == nil else { return }
        let lastCheck = lastHeaderCheck
        lastHeaderCheck = now
        var late: [Int64] = []
        var next: MonotonicInstant?
        quicEngine.forEachOpenPeerBidirectionalStream { id, openedAt in
            let deadline = openedAt + timeout
            if deadline > now {
                next = min(next ?? deadline, deadline)
            } else if lastCheck.map({ deadline > $0 }) ?? true, exchanges[id] == nil, !endedByServer.contains(id) {
                late.append(id)
            }
        }
        if !late.isEmpty {
            Self.logger.debug("HTTP/3 request streams refused: no complete header section within \(timeout)", metadata: ["streams": "\(late)"])
            // H3_REQUEST_REJECTED (RFC 9114 section 8.1) tells the client that no part of the
            // request was processed, so it may retry it: true here, as no handler ran and
            // nothing of the header section was acted on.
            for id in late { engine.abandonRequest(streamID: id, code: .requestRejected) }
            service(context)
        }
        // At least a millisecond ahead: a timer that fires a little early must not spin.
        if let next { scheduleHeaderCheck(at: max(next, now + .milliseconds(1)), context) }
    }

    // MARK: Graceful shutdown (server)

    private static var logger: Logger { BraidLog.logger(label: "braid.http3") }

    /// Server: GOAWAY now (a notice: no request in flight is refused, and clients send new ones
    /// elsewhere); the final GOAWAY two round trips later (RFC 9114 section 5.2 asks for at
    /// least one, so requests already on their way are processed); the connection closes with
    /// H3_NO_ERROR once every request taken has finished, or after `shutdownGracePeriod`.
    package func shutDownGracefully(context: LoopContext) {
        guard role == .server, case .notStarted = shutdown, finalError == nil else { return }
        guard let engine, let quicEngine = quic?.engine else {
            // The handshake has not completed: no request to wait for.
            quic?.cancel(context: context, code: HTTP3ErrorCode.noError.code)
            return
        }
        do {
            try engine.sendShutdownNotice()
        } catch {
            quic?.cancel(context: context, code: HTTP3ErrorCode.noError.code)
            return
        }
        shutdown = .noticeSent
        scheduleService(context)
        let roundTrip = max(quicEngine.statistics.smoothedRTT, .milliseconds(5))
        context.schedule(at: context.now + roundTrip * 2) { [weak self] context in self?.sendFinalGoaway(context) }
        context.schedule(at: context.now + shutdownGracePeriod) { [weak self] context in
            guard let self, finalError == nil else { return }
            Self.logger.debug(
                "HTTP/3 graceful shutdown cut short after its grace period",
                metadata: [
                    "requests": "\(exchanges.keys.sorted())", "streams": "\(self.engine?.activeStreamCount ?? 0)",
                    "unacknowledged": "\(quic?.engine?.unacknowledgedBytes ?? 0)",
                ])
            quic?.cancel(context: context, code: HTTP3ErrorCode.noError.code, reason: "shut down")
        }
    }

    private func sendFinalGoaway(_ context: LoopContext) {
        guard let engine, finalError == nil, case .noticeSent = shutdown else { return }
        do {
            // nghttp3 rejects the requests that arrive from now on (H3_REQUEST_REJECTED).
            try engine.shutdown()
        } catch {
            quic?.cancel(context: context, code: HTTP3ErrorCode.noError.code)
            return
        }
        shutdown = .draining
        scheduleService(context)
    }

    /// Closes a draining connection once no request stream is left and the peer has
    /// acknowledged everything sent: the final GOAWAY must arrive before the close, or the
    /// client could not tell which of its requests were refused (and may go elsewhere). The
    /// acknowledgements are awaited for 8 smoothed RTTs, at least 1 s, at most: a client that
    /// left without them does not hold the connection open for the whole grace period.
    private func closeIfDrained(_ context: LoopContext) {
        guard case .draining = shutdown, finalError == nil, !drainCheckPending, let engine, engine.activeStreamCount == 0, exchanges.isEmpty,
            let quicEngine = quic?.engine
        else { return }
        let roundTrip = quicEngine.statistics.smoothedRTT
        let drained = drainedAt ?? context.now
        drainedAt = drained
        let waitedEnough = context.now >= drained + max(roundTrip * 8, .seconds(1))
        guard quicEngine.unacknowledgedBytes == 0 || waitedEnough else {
            // Acknowledgements are not stream events: look again in half a round trip (10 ms
            // at least, so a loopback peer is not polled a thousand times a second).
            drainCheckPending = true
            let wait = max(roundTrip / 2, .milliseconds(10))
            context.schedule(at: context.now + wait) { [weak self] context in
                self?.drainCheckPending = false
                self?.closeIfDrained(context)
            }
            return
        }
        quic?.cancel(context: context, code: HTTP3ErrorCode.noError.code)
    }

    /// Ends `exchange` from the application's side: its stream is reset, or, still waiting
    /// for one, it is dropped from the queue.
    func cancel(_ exchange: HTTP3Exchange, context: LoopContext) {
        let streamID = exchange.streamID
        guard streamID >= 0 else {
            exchange.fail(CancellationError())
            return
        }
        cancel(streamID: streamID, context: context)
    }

    func cancel(streamID: Int64, context: LoopContext) {
        guard let engine, exchanges[streamID] != nil else { return }
        try? engine.cancelStream(streamID: streamID)
        retire(streamID, quic?.engine) { CancellationError() }
        scheduleService(context)
    }
}

/// A client request waiting for its stream.
private struct PendingRequest {
    let fields: [HTTP3Field]
    let hasBody: Bool
    let exchange: HTTP3Exchange

    /// Whether it may be sent as 0-RTT data: a safe method (RFC 9110 section 9.2.1) without a
    /// body, as RFC 9114 section 4.1 and RFC 8470 advise, since early data can be replayed.
    var mayTravelEarly: Bool {
        guard !hasBody, let method = fields.value(of: ":method") else { return false }
        return method == "GET" || method == "HEAD" || method == "OPTIONS"
    }
}

/// How far a server's graceful shutdown has come.
private enum GracefulShutdown {
    case notStarted
    /// The first GOAWAY (the largest ID) is out.
    case noticeSent
    /// The final GOAWAY is out: the connection closes once its requests have finished.
    case draining
}
