import BraidCore
import BraidIO
import Logging

/// One loop's accepted TCP connections: makes a public connection, with its own byte-stream
/// channel, for each accepted socket (with the stack's layer over it, TLS's server engine) and
/// hands it to the listener. Lives on the loop.
final class InboundByteStreams<ApplicationProtocol: NetworkProtocol> {
    private let stack: ApplicationProtocol
    private let tcp: TCP
    /// Makes each accepted socket's layer (nil: plain TCP).
    private let layers: (@Sendable () throws -> any ByteStreamLayer)?
    private let handshakeTimeout: Duration
    /// A framer's largest message, when the connections carry `TLV` or `Coder` messages.
    private let maximumMessageSize: Int?
    private let admission: ConnectionAdmission
    private let intake: InboundIntake<ApplicationProtocol>
    /// The listener's buffer budget, and this loop's share of it.
    private var account: ListenerBufferAccount<ObjectIdentifier>
    /// This loop's live connections, for the budget's sweeps.
    private var live: [ObjectIdentifier: ConnectionCore] = [:] {
        didSet { heapTrim.connectionsChanged(to: live.count) }
    }
    /// Gives freed heap back once the connections fall far below their peak (after a flood).
    private var heapTrim = HeapTrimPolicy()
    private static var logger: Logger { BraidLog.logger(label: "braid.listener") }

    init(
        stack: ApplicationProtocol, tcp: TCP, layers: (@Sendable () throws -> any ByteStreamLayer)?, handshakeTimeout: Duration,
        maximumMessageSize: Int?, admission: ConnectionAdmission, budget: ListenerBufferBudget, intake: InboundIntake<ApplicationProtocol>
    ) {
        account = ListenerBufferAccount(budget: budget)
        self.maximumMessageSize = maximumMessageSize
        self.stack = stack
        self.tcp = tcp
        self.layers = layers
        self.handshakeTimeout = handshakeTimeout
        self.admission = admission
        self.intake = intake
    }

    /// An accepted socket becomes a connection, unless the listener is full or `run` was
    /// cancelled (then it is reset at once, so the client learns it was refused instead of
    /// waiting).
    func accept(_ socket: any ByteStreamSocket, context: LoopContext) {
        if account.budget.isExhausted {
            account.budget.noteRefused()
            socket.abort()
            return
        }
        // Refusals at the connection limits count with the buffer limit's (the listener's
        // refusals in its metrics).
        guard admission.admit() else {
            account.budget.noteRefused()
            socket.abort()
            return
        }
        // Unix-domain clients have no address to count by.
        let address = socket.unixPath == nil ? socket.remoteAddress.clientKey : nil
        if let address, !admission.admit(address: address) {
            // A reset, as for a full listener: one address must not take every place.
            admission.release()
            account.budget.noteRefused()
            socket.abort()
            return
        }
        let admission = admission
        let release = {
            admission.release()
            if let address { admission.release(address: address) }
        }
        // A Unix-domain client has no name of its own: its connection is known by the socket file.
        let peer = socket.unixPath.map { NWEndpoint.unix(path: $0) } ?? NWEndpoint(socket.remoteAddress)
        let layer: (any ByteStreamLayer)?
        do {
            layer = try layers?()
        } catch {
            Self.logger.warning("cannot start the connection's layer (TLS session) for \(peer): \(error)")
            socket.abort()
            release()
            return
        }
        let admitted = intake.admit {
            let core = ConnectionCore(
                byteStreamOn: context.loop, endpointDescription: peer.description, tcp: tcp, handshakeTimeout: handshakeTimeout,
                maximumMessageSize: maximumMessageSize)
            let key = ObjectIdentifier(core)
            core.whenEnded = { [weak self] in
                release()
                self?.live[key] = nil
            }
            live[key] = core
            intake.identify(core)
            core.shared.states.update(.preparing)
            core.shared.byteStream?.adopt(layer)
            core.byteStream.attach(socket: socket, layer: layer, context: context)
            return NetworkConnection(inbound: peer, stack: stack, core: LoopBound(core, on: context.loop), shared: core.shared)
        }
        if admitted == nil {
            // Accepted from the backlog before the listening socket closed.
            socket.abort()
            release()
        }
    }

    /// Measures this loop's connections against the listener's buffer budget every
    /// `ListenerBufferBudget.sweepInterval` (drain: bytes the socket wrote, bytes the application read), closing
    /// those the budget picks while the listener is over its limit (`NetworkError.serverBusy`);
    /// ends with the listener's loop object. Call on the loop.
    func watchBufferBudget(_ context: LoopContext) {
        context.schedule(at: context.now + ListenerBufferBudget.sweepInterval) { [weak self] context in
            self?.sweepBufferBudget(context)
        }
    }

    private func sweepBufferBudget(_ context: LoopContext) {
        let holdings = live.map { key, core in
            let channel = core.byteStream
            return ListenerBufferAccount<ObjectIdentifier>.Holding(key: key, bytes: channel.bufferedBytes, drained: channel.drainedBytes)
        }
        heapTrim.heldBytesChanged(to: holdings.reduce(0) { $0 + $1.bytes })
        for key in account.sweep(holdings) {
            guard let core = live[key] else { continue }
            core.byteStream.fail(
                NetworkError.serverBusy(
                    endpoint: core.endpointDescription,
                    reason: "buffer limit reached: closed a connection whose buffered bytes drained too slowly"),
                context: context)
        }
        watchBufferBudget(context)
    }

    deinit {
        account.withdraw()
    }
}
