import BraidIO
import BraidQUIC

extension QUICServerDriver {
    /// Counts this loop's connections against the listener's `budget`: every
    /// `ListenerBufferBudget.sweepInterval` the connections' held bytes are measured
    /// (`QUICConnection.heldBytes`: the engines' and their channels' queues; drain:
    /// stream bytes the peer acknowledged and the application read,
    /// `QUICConnection.drainedStreamBytes`); while the listener is at its limit, new clients are
    /// refused, and the connections the budget picks (those draining too slowly, and after a
    /// few sweeps at the limit the largest holders) are closed with NO_ERROR and
    /// `QUICServerEndpoint.stalledAtBufferLimitReason`. Call on the driver's loop.
    package func watchBufferBudget(_ budget: ListenerBufferBudget, context: LoopContext) {
        QUICBufferSweep(driver: self, budget: budget).schedule(context)
    }
}

/// The periodic measurement `watchBufferBudget` runs; it ends (and withdraws the loop's
/// figure) once the driver stops serving.
private final class QUICBufferSweep {
    private weak var driver: QUICServerDriver?
    private var account: ListenerBufferAccount<ObjectIdentifier>

    init(driver: QUICServerDriver, budget: ListenerBufferBudget) {
        self.driver = driver
        account = ListenerBufferAccount(budget: budget)
    }

    func schedule(_ context: LoopContext) {
        context.schedule(at: context.now + ListenerBufferBudget.sweepInterval) { context in self.run(context) }
    }

    private func run(_ context: LoopContext) {
        guard let driver, driver.isServing else {
            account.withdraw()
            return
        }
        let connections = driver.connections.filter { !$0.isClosed }
        let holdings = connections.map {
            ListenerBufferAccount<ObjectIdentifier>.Holding(key: ObjectIdentifier($0), bytes: $0.heldBytes, drained: $0.drainedStreamBytes)
        }
        driver.noteHeldBytes(holdings.reduce(0) { $0 + $1.bytes })
        let closing = Set(account.sweep(holdings))
        driver.endpoint.isOverBufferLimit = account.budget.isExhausted
        if !closing.isEmpty {
            for connection in connections where closing.contains(ObjectIdentifier(connection)) {
                driver.endpoint.closeOverBufferLimit(connection, now: context.now)
            }
            driver.serviceEvictedConnections(context)
        }
        schedule(context)
    }
}
