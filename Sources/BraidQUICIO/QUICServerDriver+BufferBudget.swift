import BraidIO
import BraidQUIC

extension QUICServerDriver {
    /// Counts this loop's connections against the listener's `budget`: every
    /// `ListenerBufferBudget.sweepInterval` the connections' held bytes are measured
    /// (`QUICConnection.heldBytes`: the engines' and their channels' queues, and what ngtcp2
    /// may hold of the receive windows granted; drain:
    /// stream bytes the peer acknowledged and the application read,
    /// `QUICConnection.drainedStreamBytes`); while the listener is at its limit, new clients are
    /// refused, credit the applications read back is held (`withholdReceiveCredit`), and the
    /// connections the budget picks (those draining too slowly, and after a
    /// few sweeps at the limit the largest holders) are closed with NO_ERROR and
    /// `QUICServerEndpoint.stalledAtBufferLimitReason`. The sweeps end once the driver stops
    /// serving. Call on the driver's loop.
    package func watchBufferBudget(_ budget: ListenerBufferBudget, context: LoopContext) {
        ListenerBufferSweep<QUICConnection>(
            budget: budget,
            holders: { [weak self] in
                guard let self, self.isServing else { return nil }
                return self.connections.filter { !$0.isClosed }
            },
            measure: { ($0.heldBytes, $0.drainedStreamBytes, $0.engineReceiveBound) },
            settle: { [weak self] heldBytes, closing, context in
                guard let self else { return }
                self.noteHeldBytes(heldBytes)
                let exhausted = budget.isExhausted
                self.endpoint.isOverBufferLimit = exhausted
                // Backpressure first: at the limit, credit read back waits (what the peers may
                // send shrinks as the applications read); once under it, it goes out.
                for connection in self.connections where connection.withholdReceiveCredit(exhausted) {
                    self.service(connection, context)
                }
                guard !closing.isEmpty else { return }
                for connection in closing { self.endpoint.closeOverBufferLimit(connection, now: context.now) }
                self.serviceEvictedConnections(context)
            }
        ).schedule(context)
    }
}
