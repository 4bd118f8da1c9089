import BraidCore
import BraidIO
import BraidQUIC
import DequeModule
import Foundation
import Logging

/// What a QUIC channel's owner in the public layer hears besides ready and the end, on the
/// channel's loop (ready comes once the handshake completed: `negotiatedALPN`, paths and the
/// datagram limit are set by then).
package protocol QUICChannelDelegate: ConnectionChannelDelegate {
    /// The peer opened a stream.
    func channel(_ channel: QUICChannel, opened stream: QUICStreamHandle)
    /// The largest datagram the engine takes now changed (nil: none, or datagrams are off).
    func channel(_ channel: QUICChannel, usableDatagramSizeChanged size: Int?)
}

/// A protocol that runs over the connection's streams itself (HTTP/3), in place of the
/// channel's per-stream owners: it takes every stream event with the engine, reads and writes
/// the engine's streams directly, and asks the channel to write (`transmit`). Set as the
/// channel's `streamConsumer` on the loop before the handshake completes.
package protocol QUICStreamConsumer: AnyObject {
    /// A stream event (opened, readable, writable, stop-sending, closed, streams available).
    func channel(_ channel: QUICChannel, streamEvent event: QUICEvent, engine: QUICConnection, context: LoopContext)
    /// The channel took over its engine connection (a client resuming with 0-RTT can open
    /// streams from now on; see `QUICConnection.attemptedEarlyData`).
    func channelAttached(_ channel: QUICChannel, engine: QUICConnection, context: LoopContext)
    /// The handshake completed (after the delegate heard it).
    func channelBecameReady(_ channel: QUICChannel, engine: QUICConnection, context: LoopContext)
    /// The channel ended with `error` (described); the channel has dropped the consumer.
    func channelEnded(_ channel: QUICChannel, error: any Error)
    /// Bytes the consumer holds for the connection that no engine counts (HTTP/3: header
    /// sections being received, request and response bodies between the engine and the
    /// handlers), counted in the channel's `heldBytes`. Asked once per sweep
    /// of a listener's buffer limit, on the loop.
    var heldBytes: Int { get }
}

/// How a channel reaches its datapath: the client driver (its own socket) or a server
/// connection's slot in the server driver (a shared socket).
package protocol QUICChannelTransport: AnyObject {
    /// Writes what the engine has to send now and re-arms its timer.
    func service(_ context: LoopContext)
    /// The connection is gone (or never got an engine): release what serves it.
    func release(_ context: LoopContext)
    /// The system calls of the connection's own socket (nil: it shares one).
    var socketCounters: SocketCounters? { get }
    /// Moves the connection to a new local port, on the interface `device` (its socket bound
    /// there) when given, else on the same address; returns the new local address.
    func moveToNewPath(_ context: LoopContext, device: String?) throws -> SocketAddress
}

/// One QUIC connection's owner on its loop: the engine, its streams, the calls waiting on them,
/// and the datagram queues, for a client or a server connection alike. Only its loop touches
/// it; the public layer holds `Sendable` facades (stream handles, the queues) and hears what
/// it must through `QUICChannelDelegate`.
///
/// Every error it hands out has gone through `describe` (the public layer's mapping), so
/// callers see one error type.
package final class QUICChannel: ConnectionChannel {
    package let loop: EventLoop
    package weak var delegate: QUICChannelDelegate?
    /// Received datagrams nobody has read yet, up to 4,096: beyond that the oldest are
    /// dropped (they are unreliable anyway, and an idle reader must not grow memory without
    /// bound).
    /// Measured: a listener's buffer limit counts each unread datagram's payload and entry.
    package let datagramInbox = DatagramInbox(backlog: 4096) { $0.count + MemoryLayout<Data>.stride }
    /// Where the engine puts received datagrams until `datagramsReceived` hands them over.
    private let datagramSink: QUICDatagramInboxSink
    /// Datagrams sent and not yet taken by the loop.
    package let datagramOutbox = DatagramOutbox(limit: QUICChannel.datagramQueueLimit)
    /// How many datagrams may wait in the engine for congestion-window room before `send`
    /// suspends: enough to fill a window, bounded so a flood cannot grow memory.
    package static let datagramQueueLimit = 256
    /// Each stream's bound on bytes sent and not yet acknowledged (`StreamOutbox.limit`).
    let streamSendLimit: Int
    /// The bound on bytes all streams hold for sending together (the engine's
    /// `connectionSendBufferLimit`, extended to the streams' outboxes).
    package let sendBudget: SharedSendBudget
    /// Turns engine, datapath and internal errors into the caller's error type.
    package let describe: (any Error) -> any Error

    // The loop-only state every datagram and packet event reads skips the run-time
    // exclusivity check (a runtime call per access): only the loop touches it, and no access
    // is held across a call that could reach it again.
    @exclusivity(unchecked) package private(set) var engine: QUICConnection?
    /// The connection's logger; its identity is copied to the engine's lines too (which
    /// carry `quic.cid` besides).
    package var logger = BraidLog.logger(label: "braid.quic") {
        didSet { tagEngineLogger() }
    }
    package var trafficObserver: ((ConnectionTraffic) -> Void)? {
        didSet { engine?.countsProbeTimeouts = trafficObserver != nil }
    }
    private var transport: QUICChannelTransport?
    @exclusivity(unchecked) package private(set) var isReady = false
    @exclusivity(unchecked) package private(set) var finalError: (any Error)?
    private var streams: [Int64: QUICStreamChannel] = [:]
    private var readyWaiters: [((any Error)?) -> Void] = []
    /// Calls made before the client had its socket and engine connection.
    private var attachWaiters: [((any Error)?) -> Void] = []
    private var streamCreditWaiters: [(Bool, Completion<QUICStreamHandle>)] = []
    /// Datagram sends the loop had to decide (made before ready, or larger than the published
    /// limit) waiting for room in the engine's queue, in order. Other sends wait in
    /// `datagramOutbox`.
    @exclusivity(unchecked) private var datagramSendWaiters = Deque<(Data, Completion<Void>)>()
    /// The datagram size limit last given to the outbox and the delegate (nil: none yet).
    @exclusivity(unchecked) private var publishedDatagramLimit: Int?
    /// A drain of the outbox is due once the running handler returns (acknowledgements came).
    @exclusivity(unchecked) private var datagramsSettling = false
    /// The outbox's datagrams on their way into the engine: the outbox hands over its queue's
    /// storage whole when the engine can take everything queued, and gets this (emptied, its
    /// room kept) back, so no datagram is copied and no array is grown per drain.
    @exclusivity(unchecked) private var takenDatagrams = Deque<Data>()
    /// Outbox datagrams the engine refused (sized against a limit the path has since lowered):
    /// counted with the engine's lost datagrams in the statistics.
    package private(set) var datagramsDroppedBeforeEngine: UInt64 = 0
    /// Resumption: called with each ticket the server sends.
    package var ticketReceived: ((QUICResumptionTicket) -> Void)?
    /// Takes every stream event in place of the channel's stream owners (HTTP/3 reads and
    /// writes the streams itself); nil for the public stream API. Held until the channel ends.
    @exclusivity(unchecked) package var streamConsumer: QUICStreamConsumer?

    package init(loop: EventLoop, streamSendLimit: Int, connectionSendLimit: Int, describe: @escaping (any Error) -> any Error) {
        self.loop = loop
        self.streamSendLimit = streamSendLimit
        sendBudget = SharedSendBudget(limit: connectionSendLimit)
        self.describe = describe
        datagramSink = QUICDatagramInboxSink(inbox: datagramInbox)
    }

    /// Takes over an engine connection and the transport that serves it. Calls made before
    /// (a client still resolving or racing) run now.
    package func attach(_ engine: QUICConnection, transport: QUICChannelTransport, context: LoopContext) {
        self.engine = engine
        self.transport = transport
        engine.countsProbeTimeouts = trafficObserver != nil
        tagEngineLogger()
        engine.makeStreamSink = { [weak self] id in self?.makePeerStreamSink(id) }
        engine.ownerHeldBytes = { [weak self] in self?.heldBytes ?? 0 }
        engine.datagramSink = datagramSink
        // Outcomes only tell the channel that the engine's queue moved: one event per batch.
        engine.reportsEachDatagramOutcome = false
        streamConsumer?.channelAttached(self, engine: engine, context: context)
        Self.run(&attachWaiters, nil)
    }

    /// A server connection's handshake, from the client's first Initial to its completion.
    package var handshakeDuration: Duration? {
        guard let engine, let start = engine.firstPacketTime, let end = engine.handshakeCompletedTime, end >= start else { return nil }
        return end - start
    }

    private func tagEngineLogger() {
        guard let engine, let identity = ConnectionLogIdentity(of: logger) else { return }
        identity.tag(&engine.logger)
    }

    /// What serves the connection before an engine is attached (a client still resolving or
    /// racing its handshakes): released if the channel ends first.
    package func setTransport(_ transport: QUICChannelTransport) {
        self.transport = transport
    }

    /// Empties `waiters` before calling them, since a waiter may queue itself again.
    private static func run(_ waiters: inout [((any Error)?) -> Void], _ error: (any Error)?) {
        let taken = waiters
        waiters.removeAll()
        for waiter in taken { waiter(error) }
    }

    /// Has what the engine has to send written once, at the end of this loop pass: stream
    /// pumps, credit returns and datagram drains of one pass share one write (and one system
    /// call where the socket takes it all).
    package func transmit(_ context: LoopContext) {
        guard engine != nil, !transmitPending else { return }
        transmitPending = true
        context.atEndOfPass { [self] context in
            transmitPending = false
            transmitNow(context)
        }
    }

    /// Writes what the engine has to send right away (a close that must be on the socket
    /// before the call that asked for it returns).
    func transmitNow(_ context: LoopContext) {
        if engine != nil { transport?.service(context) }
    }

    @exclusivity(unchecked) private var transmitPending = false

    // MARK: Engine events

    /// One engine event, in order, on the loop (the driver delivers them).
    package func handle(_ event: QUICEvent, context: LoopContext) {
        guard let engine else { return }
        if let streamConsumer {
            switch event {
            case .streamOpened, .streamReadable, .streamWritable, .streamStopSending, .streamClosed, .streamsAvailable:
                streamConsumer.channel(self, streamEvent: event, engine: engine, context: context)
                return
            default:
                break
            }
        }
        switch event {
        case .handshakeCompleted:
            isReady = true
            publishDatagramLimit(engine)
            delegate?.channelBecameReady(self)
            // Sends that waited for ready queue before any the outbox takes from now on.
            Self.run(&readyWaiters, nil)
            for stream in streams.values { stream.connectionReady(context) }
            streamConsumer?.channelBecameReady(self, engine: engine, context: context)
        case .streamOpened(let id):
            let sink: QUICStreamInboxSink
            if let made = peerStreamSinks.removeValue(forKey: id) {
                sink = made
            } else {
                // Opened before the channel had the engine: its first bytes wait in the engine.
                sink = QUICStreamInboxSink()
                engine.installSink(sink, streamID: id)
            }
            let stream = makeStream(id, locallyInitiated: false, sink: sink, engine: engine)
            streams[id] = stream
            delegate?.channel(self, opened: stream.handle)
        case .streamReadable(let id):
            // The only stream, or one with a bulk reader's worth, is pulled now (its reader
            // runs beside the loop); with several streams smaller amounts wait until the
            // socket's handler returns, so each reader is woken once for what its receive
            // batches brought, not once per batch.
            if streams.count == 1 || engine.readableBytes(streamID: id) >= QUICConnection.promptReadThreshold {
                streams[id]?.pull(context)
            } else {
                if readableStreams.isEmpty {
                    context.afterCurrentEvent { [self] context in pullReadableStreams(context) }
                }
                readableStreams.append(id)
            }
        case .streamWritable(let id):
            streams[id]?.pump(context)
        case .streamStopSending(let id, let code):
            streams[id]?.peerStopped(code: code)
        case .streamClosed(let id):
            if let stream = streams.removeValue(forKey: id) { stream.engineClosed(context) }
            // Its bytes left the engine's budget; senders waiting for room need a stream
            // the engine still has to hear through.
            publishSendBudget(streamID: nil)
        case .streamsAvailable:
            retryStreamOpens(context)
        case .datagramsReceived:
            datagramSink.deliver()
        case .datagramReceived(let bytes, _):
            // Before the channel had the engine (none once its sink is installed).
            datagramInbox.deliver(Data(bytes))
        case .datagramAcknowledged, .datagramLost, .datagramsSettled:
            // Written datagrams are settling: the queue has room again. Once for all the
            // acknowledgements the handler now running brings, not once each.
            guard !datagramsSettling else { break }
            datagramsSettling = true
            context.afterCurrentEvent { [self] context in
                datagramsSettling = false
                sendQueuedDatagrams(context)
            }
        case .earlyDataRejected:
            break
        case .resumptionTicket(let ticket):
            ticketReceived?(ticket)
        case .connectionClosed(let error):
            pullReadableStreams(context)
            fail(error)
        case .terminated:
            pullReadableStreams(context)
            fail(CancellationError())
            transport?.release(context)
            transport = nil
        }
    }

    /// Bytes the channel holds outside the engine: datagrams sent and not yet in the engine,
    /// received datagrams and stream bytes the application has not read, stream bytes
    /// queued that the engine has not taken, and what its stream consumer holds (a listener's
    /// buffer limit counts them with the engine's, `QUICConnection.heldBytes`).
    package var heldBytes: Int {
        var total = datagramOutbox.heldBytes + datagramInbox.heldBytes + (streamConsumer?.heldBytes ?? 0)
        for (bytes, _) in datagramSendWaiters { total += bytes.count }
        for stream in streams.values { total += stream.outbox.queuedBytes + stream.inbox.available }
        for sink in peerStreamSinks.values { total += sink.inbox.available }
        return total
    }

    /// Sinks the engine gave streams the peer opened (`makePeerStreamSink`), until their
    /// `streamOpened` makes their owners.
    private var peerStreamSinks: [Int64: QUICStreamInboxSink] = [:]

    /// The sink of a stream the peer opens, made inside the engine's receive (so it only
    /// records it) before the stream's first bytes. None when a stream consumer reads the
    /// streams from the engine itself.
    private func makePeerStreamSink(_ id: Int64) -> (any QUICStreamSink)? {
        guard streamConsumer == nil, finalError == nil else { return nil }
        let sink = QUICStreamInboxSink()
        peerStreamSinks[id] = sink
        return sink
    }

    /// Streams left readable with less than `promptReadThreshold` bytes by the handler now
    /// running, pulled once it returns (and before the connection ends, so bytes that came
    /// with the close reach their readers). Posted work, such as a listener's statistics,
    /// runs in a handler of its own, so it never sees them still in the engine.
    private var readableStreams: [Int64] = []

    private func pullReadableStreams(_ context: LoopContext) {
        guard !readableStreams.isEmpty else { return }
        let ids = readableStreams
        readableStreams.removeAll(keepingCapacity: true)
        for id in ids { streams[id]?.pull(context) }
    }

    /// Tells the delegate (once) and ends every pending call with `error` (described). The
    /// delegate hears first, so a caller woken by the failure already sees the final state.
    package func fail(_ error: any Error) {
        if finalError == nil {
            let described = describe(error)
            finalError = described
            delegate?.channel(self, endedWith: described)
            reportTraffic()
        }
        let error = finalError!
        if let consumer = streamConsumer {
            // Dropped first: the consumer holds the channel, and must not hear the end twice.
            streamConsumer = nil
            consumer.channelEnded(self, error: error)
        }
        Self.run(&readyWaiters, error)
        Self.run(&attachWaiters, error)
        for (_, completion) in streamCreditWaiters { completion.resume(.failure(error)) }
        streamCreditWaiters.removeAll()
        for (_, completion) in datagramSendWaiters { completion.resume(.failure(error)) }
        datagramSendWaiters.removeAll()
        datagramOutbox.fail(error)
        sendBudget.fail(error)
        for stream in streams.values { stream.connectionEnded(error) }
        streams.removeAll()
        peerStreamSinks.removeAll()
        datagramInbox.finish()
        // Without an engine nothing is left to serve: drop the stand-in (an establishment that
        // holds this channel's owner), so neither keeps the other alive.
        if engine == nil { transport = nil }
    }

    /// Tells the send budget what the engine holds now, which admits waiting senders that fit.
    /// While senders still wait, the engine is asked to wake a stream (`streamID`, else any it
    /// still has) once its room returns, so acknowledgements that free room are seen even when
    /// no stream of the engine waits itself.
    func publishSendBudget(streamID: Int64?) {
        guard let engine, finalError == nil, sendBudget.publish(engine: engine.unacknowledgedBytes) else { return }
        if let streamID, engine.wakeOnSendRoom(streamID: streamID) { return }
        for id in streams.keys where engine.wakeOnSendRoom(streamID: id) { return }
    }

    // MARK: Calls from the public API (on the loop)

    /// Runs `body` once the handshake completes (now, if it has), or reports why it never will.
    private func whenReady(_ body: @escaping ((any Error)?) -> Void) {
        if let finalError {
            body(finalError)
        } else if isReady {
            body(nil)
        } else {
            readyWaiters.append(body)
        }
    }

    /// Opens a stream once the connection can (ready, or resuming with 0-RTT).
    package func openStream(bidirectional: Bool, context: LoopContext, completion: Completion<QUICStreamHandle>) {
        if let finalError {
            completion.resume(.failure(finalError))
            return
        }
        guard let engine else {
            // Still resolving or binding: try again once the engine connection exists (with a
            // ticket, the stream can then open at once and carry 0-RTT data).
            attachWaiters.append { [self] error in
                if let error {
                    completion.resume(.failure(error))
                    return
                }
                openStream(bidirectional: bidirectional, context: context, completion: completion)
            }
            return
        }
        do {
            let sink = QUICStreamInboxSink()
            let id = try engine.openStream(bidirectional: bidirectional, sink: sink)
            let stream = makeStream(id, locallyInitiated: true, sink: sink, engine: engine)
            streams[id] = stream
            if !completion.resume(.success(stream.handle)) {
                // Cancelled meanwhile: the stream exists, so end it cleanly.
                stream.abandon(context)
            }
        } catch QUICError.streamLimitReached {
            streamCreditWaiters.append((bidirectional, completion))
        } catch {
            if isReady {
                completion.resume(.failure(describe(error)))
            } else {
                // Before the handshake (and without 0-RTT) streams cannot open yet.
                whenReady { [self] error in
                    if let error {
                        completion.resume(.failure(error))
                        return
                    }
                    openStream(bidirectional: bidirectional, context: context, completion: completion)
                }
            }
        }
    }

    /// A stream's loop-side state; its sends reach the engine at once unless this is a client
    /// still in its handshake.
    private func makeStream(_ id: Int64, locallyInitiated: Bool, sink: QUICStreamInboxSink, engine: QUICConnection) -> QUICStreamChannel {
        QUICStreamChannel(
            id: id, channel: self, locallyInitiated: locallyInitiated, sink: sink, sendLimit: streamSendLimit, budget: sendBudget,
            open: isReady || engine.role == .server)
    }

    private func retryStreamOpens(_ context: LoopContext) {
        let waiting = streamCreditWaiters
        streamCreditWaiters.removeAll()
        for (bidirectional, completion) in waiting where completion.isPending {
            openStream(bidirectional: bidirectional, context: context, completion: completion)
        }
    }

    /// Queues a datagram once ready; waits while the engine already holds
    /// `datagramQueueLimit` unsent datagrams (or earlier sends wait), so order is kept.
    package func sendDatagram(_ bytes: Data, context: LoopContext, completion: Completion<Void>) {
        whenReady { [self] error in
            if let error {
                completion.resume(.failure(error))
                return
            }
            datagramSendWaiters.append((bytes, completion))
            sendQueuedDatagrams(context)
        }
    }

    /// Moves datagrams into the engine while its queue has room: first the sends the loop
    /// decided, then the outbox's, and writes them out in one pass.
    package func sendQueuedDatagrams(_ context: LoopContext) {
        guard let engine, finalError == nil else { return }
        var queued = false
        while let (bytes, completion) = datagramSendWaiters.first, engine.pendingDatagramCount < Self.datagramQueueLimit {
            datagramSendWaiters.removeFirst()
            // A send cancelled while it waited is dropped, never sent.
            guard completion.isPending else { continue }
            do {
                try engine.sendDatagram(payload: SentDatagram(bytes: bytes))
                queued = true
                completion.resume(.success(()))
            } catch {
                completion.resume(.failure(describe(error)))
            }
        }
        if datagramSendWaiters.isEmpty && isReady {
            let room = Self.datagramQueueLimit - engine.pendingDatagramCount
            if room > 0 { datagramOutbox.take(upTo: room, into: &takenDatagrams) }
            for bytes in takenDatagrams {
                do {
                    try engine.sendDatagram(payload: SentDatagram(bytes: bytes))
                    queued = true
                } catch {
                    // Sized against a limit the path has since lowered (or datagrams were
                    // turned off): dropped, as the network could drop it, and counted.
                    datagramsDroppedBeforeEngine += 1
                }
            }
            takenDatagrams.removeAll(keepingCapacity: true)
        }
        if queued { transmit(context) }
        publishDatagramLimit(engine)
    }

    /// Tells senders (the outbox) and the delegate the engine's current datagram size limit,
    /// which follows the path's packet size.
    private func publishDatagramLimit(_ engine: QUICConnection) {
        let size = engine.maxDatagramPayloadSize
        let limit = size > 0 ? size : nil
        guard limit != publishedDatagramLimit else { return }
        publishedDatagramLimit = limit
        datagramOutbox.publish(maximumSize: limit)
        delegate?.channel(self, usableDatagramSizeChanged: limit)
    }

    /// Closes the connection with application error code 0 and ends every pending call.
    package func cancel(context: LoopContext) {
        cancel(context: context, code: 0, reason: "")
    }

    /// Closes the connection with application error `code` and `reason`, and ends every
    /// pending call.
    package func cancel(context: LoopContext, code: UInt64, reason: String = "") {
        guard finalError == nil else { return }
        let standIn = engine == nil ? transport : nil
        fail(CancellationError())
        if let engine {
            engine.close(applicationErrorCode: code, reason: reason, now: context.now)
            transmitNow(context)
        } else {
            standIn?.release(context)
        }
    }

    /// The application protocol both ends agreed on: set once ready, and on a server already
    /// when the first (0-RTT) stream arrives.
    package var negotiatedALPN: String? { engine?.negotiatedALPN }
    /// Client: the server accepted our 0-RTT data. Server: this connection received 0-RTT data.
    package var earlyDataAccepted: Bool { engine?.earlyDataAccepted ?? false }
    /// The addresses the connection uses now (nil before it has an engine).
    package var localAddress: SocketAddress? { engine?.path.local }
    package var remoteAddress: SocketAddress? { engine?.path.remote }

    package var facts: ConnectionFacts {
        ConnectionFacts(
            negotiatedALPN: negotiatedALPN, earlyDataAccepted: earlyDataAccepted, localAddress: localAddress,
            remoteAddress: remoteAddress)
    }

    /// The engine's transport counters (nil before it exists).
    package var statistics: QUICConnectionStatistics? { engine?.statistics }

    /// Hands the observer, if any, what the engine counted (nothing without an engine).
    private func reportTraffic() {
        guard let observer = trafficObserver else { return }
        trafficObserver = nil
        guard let statistics else { return }
        var traffic = ConnectionTraffic()
        traffic.bytesSent = statistics.bytesSent
        traffic.bytesReceived = statistics.bytesReceived
        traffic.packetsSent = statistics.packetsSent
        traffic.packetsReceived = statistics.packetsReceived
        traffic.probeTimeouts = statistics.probeTimeouts
        traffic.datagramsLost = statistics.datagramsLost
        observer(traffic)
    }

    /// The system calls of the connection's own socket (nil: none yet, or a shared socket).
    package var socketCounters: SocketCounters? { transport?.socketCounters }

    package func updateKeys(context: LoopContext) throws {
        if let finalError { throw finalError }
        guard isReady, let engine else { throw describe(QUICError.invalidState("update keys once the connection is ready")) }
        do { try engine.initiateKeyUpdate(now: context.now) } catch { throw describe(error) }
        transmit(context)
    }

    /// Moves a client connection to a new local port, on the interface `device` when given;
    /// returns the new local address.
    package func migrate(context: LoopContext, device: String? = nil) throws -> SocketAddress {
        if let finalError { throw finalError }
        guard isReady, let transport else { throw describe(QUICError.invalidState("migrate once the connection is ready")) }
        do { return try transport.moveToNewPath(context, device: device) } catch { throw describe(error) }
    }
}
