import BraidCore
import BraidIO

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

    init(metrics: ConnectionMetrics? = nil) {
        self.metrics = metrics
        (connections, continuation) = AsyncStream<Connection>.makeStream()
    }

    /// Makes a connection with `make` (on the caller's loop) and hands it to `run`; nil, without
    /// calling `make`, once the intake is closed (or when `make` returns nil). `make` runs under
    /// the intake's lock: the stream ends only after the intake closes (`closeWhenCancelled`),
    /// so a connection made while open is always delivered, never dropped by an ended stream.
    func admit(_ make: () -> Connection?) -> Connection? {
        isOpen.withLock { isOpen in
            guard isOpen, let connection = make() else { return nil }
            if let metrics { connection.core.value.metrics = metrics }
            continuation.yield(connection)
            return connection
        }
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
