import BraidCore

/// One loop's periodic look at what its connections hold, for a listener's
/// `ListenerBufferBudget`: every `ListenerBufferBudget.sweepInterval` it measures them,
/// publishes their total (`ListenerBufferAccount.sweep`) and hands `settle` the total and the
/// connections the budget picked to close. It ends, withdrawing the loop's figure, once
/// `holders` answers nil (its owner closed or stopped serving). The UDP demultiplexer and the
/// QUIC server driver each run one; loop-only, like them.
package final class ListenerBufferSweep<Holder: AnyObject> {
    /// What a connection holds now, what it has drained so far, and how much of what it holds
    /// is only a bound on what its engine may hold (see `ListenerBufferAccount.Holding`).
    package typealias Measure = (_ holder: Holder) -> (bytes: Int, drained: UInt64, reserved: Int)
    /// The loop's total, and the connections to close (empty while the listener is under its
    /// limit).
    package typealias Settle = (_ heldBytes: Int, _ closing: [Holder], _ context: LoopContext) -> Void

    private var account: ListenerBufferAccount<ObjectIdentifier>
    private let holders: () -> [Holder]?
    private let measure: Measure
    private let settle: Settle

    /// `holders`: the loop's live connections, nil once the owner is gone (hold it weakly).
    package init(budget: ListenerBufferBudget, holders: @escaping () -> [Holder]?, measure: @escaping Measure, settle: @escaping Settle) {
        account = ListenerBufferAccount(budget: budget)
        self.holders = holders
        self.measure = measure
        self.settle = settle
    }

    /// Sets the next sweep; each sweep sets the one after it.
    package func schedule(_ context: LoopContext) {
        context.schedule(at: context.now + ListenerBufferBudget.sweepInterval) { context in self.run(context) }
    }

    private func run(_ context: LoopContext) {
        guard let current = holders() else {
            account.withdraw()
            return
        }
        var total = 0
        let holdings = current.map { holder in
            let (bytes, drained, reserved) = measure(holder)
            total += bytes
            return ListenerBufferAccount<ObjectIdentifier>.Holding(
                key: ObjectIdentifier(holder), bytes: bytes, drained: drained, reserved: reserved)
        }
        let picked = Set(account.sweep(holdings))
        settle(total, picked.isEmpty ? [] : current.filter { picked.contains(ObjectIdentifier($0)) }, context)
        schedule(context)
    }
}
