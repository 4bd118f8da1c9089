import BraidIO
import BraidQUIC
import DequeModule
import Foundation
import Synchronization

/// What the public objects read without a trip to the loop: set by the loop at ready.
struct ConnectionSnapshot: Sendable {
    var negotiatedALPN: String?
    var usableDatagramFrameSize: Int?
    var localEndpoint: NWEndpoint?
    var remoteEndpoint: NWEndpoint?
    var earlyDataAccepted = false
}

/// The parts of a connection other threads touch: state, snapshot, and the queues of inbound
/// streams and datagrams that async iterators drain.
final class ConnectionShared: Sendable {
    let states = StateBroadcast()
    let snapshot = Mutex(ConnectionSnapshot())
    let inboundStreams: AsyncStream<QUIC.Stream>
    let inboundStreamsContinuation: AsyncStream<QUIC.Stream>.Continuation
    /// Received datagrams nobody has read yet, up to 4,096: beyond that the oldest are
    /// dropped (they are unreliable anyway, and an idle reader must not grow memory without
    /// bound).
    let datagramInbox = DatagramInbox(backlog: 4096)
    /// Datagrams sent and not yet taken by the loop.
    let datagramOutbox = DatagramOutbox(limit: ConnectionCore.datagramQueueLimit)

    init() {
        (inboundStreams, inboundStreamsContinuation) = AsyncStream.makeStream(bufferingPolicy: .unbounded)
    }
}

/// One connection's loop-side state, client or server: the engine connection, its streams,
/// and the async calls waiting on them. Only its loop touches it.
final class ConnectionCore {
    let loop: EventLoop
    let shared: ConnectionShared
    /// Description of the peer for error messages.
    var endpointDescription: String
    var handshakeTimeout: Duration
    /// Each stream's bound on bytes sent and not yet acknowledged (`StreamOutbox.limit`).
    let streamSendLimit: Int
    private(set) var connection: QUICConnection?
    /// Writes what the connection has to send (the driver's service call).
    private var service: (LoopContext) -> Void = { _ in }
    /// Client: closes the socket once the connection is gone.
    private var release: (LoopContext) -> Void = { _ in }
    /// Client: the counters of the connection's own socket.
    var socketCounters: (() -> SocketCounters)?
    /// Client: moves the connection to a new local port; returns the new local address.
    var migration: ((LoopContext) throws -> QUICAddress)?
    private(set) var isReady = false
    private(set) var finalError: NetworkError?
    private var streams: [Int64: StreamCore] = [:]
    private var readyWaiters: [(NetworkError?) -> Void] = []
    /// Calls made before the client had its socket and engine connection.
    private var attachWaiters: [(NetworkError?) -> Void] = []
    private var streamCreditWaiters: [(Bool, Completion<QUIC.Stream>)] = []
    /// Datagram sends the loop had to decide (made before ready, or larger than the published
    /// limit) waiting for room in the engine's queue, in order. Other sends wait in the
    /// shared `datagramOutbox`.
    private var datagramSendWaiters = Deque<(Data, Completion<Void>)>()
    /// The datagram size limit last given to the outbox and the snapshot (nil: none yet).
    private var publishedDatagramLimit: Int?
    /// Outbox datagrams the engine refused (sized against a limit the path has since lowered):
    /// counted with the engine's lost datagrams in the statistics.
    private(set) var datagramsDroppedBeforeEngine: UInt64 = 0
    /// How many datagrams may wait in the engine for congestion-window room before `send`
    /// suspends: enough to fill a window, bounded so a flood cannot grow memory.
    static let datagramQueueLimit = 256
    /// Resumption: where to store tickets the server sends, and under which key.
    var sessionCache: QUIC.SessionCache?
    var sessionKey = ""

    init(loop: EventLoop, shared: ConnectionShared, endpointDescription: String, handshakeTimeout: Duration, streamSendLimit: Int) {
        self.loop = loop
        self.shared = shared
        self.endpointDescription = endpointDescription
        self.handshakeTimeout = handshakeTimeout
        self.streamSendLimit = streamSendLimit
    }

    /// Takes over an engine connection and the driver calls that serve it.
    func attach(
        _ connection: QUICConnection, service: @escaping (LoopContext) -> Void, release: @escaping (LoopContext) -> Void = { _ in }
    ) {
        self.connection = connection
        self.service = service
        self.release = release
    }

    /// What to do if the connection ends before an engine connection is attached (a client
    /// still resolving or racing its handshakes).
    func setRelease(_ release: @escaping (LoopContext) -> Void) {
        self.release = release
    }

    /// The client's engine connection exists now: run the calls that waited for it.
    func connectionAttached() {
        Self.run(&attachWaiters, nil)
    }

    /// Empties `waiters` before calling them, since a waiter may queue itself again.
    private static func run(_ waiters: inout [(NetworkError?) -> Void], _ error: NetworkError?) {
        let taken = waiters
        waiters.removeAll()
        for waiter in taken { waiter(error) }
    }

    func flush(_ context: LoopContext) {
        if connection != nil { service(context) }
    }

    // MARK: Engine events

    func handle(_ event: QUICEvent, context: LoopContext) {
        guard let connection else { return }
        switch event {
        case .handshakeCompleted:
            isReady = true
            shared.snapshot.withLock {
                $0.negotiatedALPN = connection.negotiatedALPN
                $0.earlyDataAccepted = connection.earlyDataAccepted
                $0.localEndpoint = NWEndpoint(connection.path.local)
                $0.remoteEndpoint = NWEndpoint(connection.path.remote)
            }
            publishDatagramLimit(connection)
            shared.states.update(.ready)
            // Sends that waited for ready queue before any the outbox takes from now on.
            Self.run(&readyWaiters, nil)
            for stream in streams.values { stream.connectionReady(context) }
        case .streamOpened(let id):
            if let alpn = connection.negotiatedALPN {
                // Known before ready on a server taking 0-RTT streams.
                shared.snapshot.withLock { $0.negotiatedALPN = alpn }
            }
            let stream = makeStream(id, locallyInitiated: false, connection: connection)
            streams[id] = stream
            shared.inboundStreamsContinuation.yield(QUIC.Stream(stream))
        case .streamReadable(let id):
            streams[id]?.pull(context)
        case .streamWritable(let id):
            streams[id]?.pump(context)
        case .streamStopSending(let id, let code):
            streams[id]?.peerStopped(code: code)
        case .streamClosed(let id):
            if let stream = streams.removeValue(forKey: id) { stream.engineClosed(context) }
        case .streamsAvailable:
            retryStreamOpens(context)
        case .datagramReceived(let bytes, _):
            shared.datagramInbox.deliver(Data(bytes))
        case .datagramAcknowledged, .datagramLost:
            // Written datagrams are settling: the queue has room again.
            sendQueuedDatagrams(context)
        case .earlyDataRejected:
            break
        case .resumptionTicket(let ticket):
            sessionCache?.store(ticket, for: sessionKey)
        case .connectionClosed(let error):
            fail(NetworkError(quic: error, endpoint: endpointDescription, handshakeTimeout: handshakeTimeout))
        case .terminated:
            fail(.cancelled)
            release(context)
            service = { _ in }
            release = { _ in }
            socketCounters = nil
            migration = nil
        }
    }

    /// Ends every pending call with `error` and moves to a final state.
    func fail(_ error: NetworkError) {
        if finalError == nil {
            finalError = error
            shared.states.update(error == .cancelled ? .cancelled : .failed(error))
        }
        let error = finalError!
        Self.run(&readyWaiters, error)
        Self.run(&attachWaiters, error)
        for (_, completion) in streamCreditWaiters { completion.resume(.failure(error)) }
        streamCreditWaiters.removeAll()
        for (_, completion) in datagramSendWaiters { completion.resume(.failure(error)) }
        datagramSendWaiters.removeAll()
        shared.datagramOutbox.fail(error)
        for stream in streams.values { stream.connectionEnded(error) }
        streams.removeAll()
        shared.inboundStreamsContinuation.finish()
        shared.datagramInbox.finish()
    }

    // MARK: Calls from the public API (on the loop)

    /// Runs `body` once the handshake completes (now, if it has), or reports why it never will.
    func whenReady(_ body: @escaping (NetworkError?) -> Void) {
        if let finalError {
            body(finalError)
        } else if isReady {
            body(nil)
        } else {
            readyWaiters.append(body)
        }
    }

    /// Opens a stream once the connection can (ready, or resuming with 0-RTT).
    func openStream(bidirectional: Bool, context: LoopContext, completion: Completion<QUIC.Stream>) {
        if let finalError {
            completion.resume(.failure(finalError))
            return
        }
        guard let connection else {
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
            let id = try connection.openStream(bidirectional: bidirectional)
            let stream = makeStream(id, locallyInitiated: true, connection: connection)
            streams[id] = stream
            if !completion.resume(.success(QUIC.Stream(stream))) {
                // Cancelled meanwhile: the stream exists, so end it cleanly.
                stream.abandon(context)
            }
        } catch QUICError.streamLimitReached {
            streamCreditWaiters.append((bidirectional, completion))
        } catch {
            if isReady {
                completion.resume(.failure(NetworkError(error)))
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
    private func makeStream(_ id: Int64, locallyInitiated: Bool, connection: QUICConnection) -> StreamCore {
        StreamCore(
            id: id, core: self, locallyInitiated: locallyInitiated, sendLimit: streamSendLimit,
            open: isReady || connection.role == .server)
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
    func sendDatagram(_ bytes: Data, context: LoopContext, completion: Completion<Void>) {
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
    func sendQueuedDatagrams(_ context: LoopContext) {
        guard let connection, finalError == nil else { return }
        var queued = false
        while let (bytes, completion) = datagramSendWaiters.first, connection.pendingDatagramCount < Self.datagramQueueLimit {
            datagramSendWaiters.removeFirst()
            // A send cancelled while it waited is dropped, never sent.
            guard completion.isPending else { continue }
            do {
                try connection.sendDatagram(bytes)
                queued = true
                completion.resume(.success(()))
            } catch {
                completion.resume(.failure(NetworkError(error)))
            }
        }
        if datagramSendWaiters.isEmpty && isReady {
            let room = Self.datagramQueueLimit - connection.pendingDatagramCount
            for bytes in room > 0 ? shared.datagramOutbox.take(upTo: room) : [] {
                do {
                    try connection.sendDatagram(bytes)
                    queued = true
                } catch {
                    // Sized against a limit the path has since lowered (or datagrams were
                    // turned off): dropped, as the network could drop it, and counted.
                    datagramsDroppedBeforeEngine += 1
                }
            }
        }
        if queued { flush(context) }
        publishDatagramLimit(connection)
    }

    /// Tells senders (the outbox) and `usableDatagramFrameSize` the engine's current datagram
    /// size limit, which follows the path's packet size.
    private func publishDatagramLimit(_ connection: QUICConnection) {
        let size = connection.maxDatagramPayloadSize
        let limit = size > 0 ? size : nil
        guard limit != publishedDatagramLimit else { return }
        publishedDatagramLimit = limit
        shared.datagramOutbox.publish(maximumSize: limit)
        shared.snapshot.withLock { $0.usableDatagramFrameSize = limit }
    }

    /// Closes the connection (application code 0 unless given) and ends every pending call.
    func cancel(context: LoopContext, code: UInt64 = 0, reason: String = "") {
        guard finalError == nil else { return }
        fail(.cancelled)
        if let connection {
            connection.close(applicationErrorCode: code, reason: reason, now: context.now)
            flush(context)
        } else {
            release(context)
        }
    }

    var statistics: QUICConnectionStatistics? { connection?.statistics }

    func updateKeys(context: LoopContext) throws {
        if let finalError { throw finalError }
        guard isReady, let connection else { throw NetworkError.invalidState("update keys once the connection is ready") }
        try connection.initiateKeyUpdate(now: context.now)
        flush(context)
    }

    func migrate(context: LoopContext) throws {
        if let finalError { throw finalError }
        guard isReady else { throw NetworkError.invalidState("migrate once the connection is ready") }
        guard let migration else { throw NetworkError.invalidState("only a client connection migrates") }
        let local = try migration(context)
        shared.snapshot.withLock { $0.localEndpoint = NWEndpoint(local) }
    }
}

extension NWEndpoint {
    init(_ address: QUICAddress) {
        self = .hostPort(host: NWEndpoint.Host(address.ipString), port: NWEndpoint.Port(integerLiteral: address.port))
    }
}
