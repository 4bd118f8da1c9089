import BraidCore
import BraidIO
import Logging

/// Where a running listener's loops hand `run` their new connections: open until the task
/// running the listener is cancelled. A connection is made only while the intake is open, and
/// `run` then receives it and runs its handler, so after cancellation no connection is made
/// that nobody would serve.
final class InboundIntake<ApplicationProtocol: NetworkProtocol>: Sendable {
    typealias Connection = NetworkConnection<ApplicationProtocol>

    /// The connections admitted; ends when its consumer's task is cancelled.
    let connections: AsyncStream<Connection>
    private let continuation: AsyncStream<Connection>.Continuation
    private let isOpen = Locked(true)
    /// Where each admitted connection reports (nil: no metrics backend).
    let metrics: ConnectionMetrics?
    /// The listener's stack, and the logger its connections log through (made when the
    /// listener started, so its lines go where the starting task's go), each tagged with the
    /// connection's identity.
    let stackName: String
    let logger: Logger

    init(metrics: ConnectionMetrics? = nil, stackName: String = "", logger: Logger = BraidLog.logger(label: "braid.connection")) {
        self.metrics = metrics
        self.stackName = stackName
        self.logger = logger
        (connections, continuation) = AsyncStream<Connection>.makeStream()
    }

    /// Makes a connection with `make` (on the caller's loop) and hands it to `run`; nil, without
    /// calling `make`, once the intake is closed (or when `make` returns nil). `make` runs under
    /// the intake's lock, so no connection is made once it closed; the hand-over does not: the
    /// stream's cancellation holds the consumer task's own lock while it closes the intake
    /// (`closeWhenCancelled`), and a yield resuming that task under ours would wait for it the
    /// other way round. A connection made just before the close finds the stream ended: nobody
    /// would serve it, so it is cancelled, and ends (its place released) as any cancelled one.
    func admit(_ make: () -> Connection?) -> Connection? {
        let made = isOpen.withLock { isOpen -> Connection? in
            guard isOpen, let connection = make() else { return nil }
            let core = connection.core.value
            if core.identity == nil { identify(core) }
            if let metrics { core.metrics = metrics }
            return connection
        }
        guard let connection = made else { return nil }
        if case .terminated = continuation.yield(connection) { connection.cancel() }
        return connection
    }

    /// Names a new connection in the logs: called by `admit`, or earlier by a stack whose
    /// channel logs as it is made.
    func identify(_ core: ConnectionCore) {
        core.identify(ConnectionLogIdentity.next(stack: stackName, role: "server"), logger: logger)
    }

    /// Ends `connections` (as cancellation does): a listener that fails while running (its
    /// advertised name taken, say) stops this way.
    func finish() {
        continuation.finish()
    }

    /// Closes the intake when the consumer of `connections` is cancelled, before the stream
    /// ends, then calls `closed`. Set once `run` has started: the stream then holds the intake
    /// until `run`'s cancellation calls the closure, which drops it again.
    func closeWhenCancelled(then closed: @escaping @Sendable () -> Void) {
        continuation.onTermination = { _ in
            self.isOpen.withLock { $0 = false }
            closed()
        }
    }
}
