import BraidCore

extension UDPDemultiplexer {
    /// Counts this loop's peers against the listener's `budget`: every
    /// `ListenerBufferBudget.sweepInterval` each peer's channel is measured
    /// (`DatagramChannel.bufferedBytes`; drain: bytes written to the socket and read by the
    /// application); while the listener is at its limit, the peers the budget picks (those
    /// draining too slowly, and after a few sweeps at the limit the largest holders) end with
    /// `DatagramChannelError.overBufferLimit` (a DTLS peer gets close_notify). New peers are
    /// refused by the stack's admission (`ListenerBufferBudget.isExhausted`). Call on the loop.
    package func watchBufferBudget(_ budget: ListenerBufferBudget, context: LoopContext) {
        UDPBufferSweep(demultiplexer: self, budget: budget).schedule(context)
    }
}

/// The periodic measurement `watchBufferBudget` runs; it ends (and withdraws the loop's
/// figure) once the demultiplexer closes.
private final class UDPBufferSweep {
    private weak var demultiplexer: UDPDemultiplexer?
    private var account: ListenerBufferAccount<ObjectIdentifier>

    init(demultiplexer: UDPDemultiplexer, budget: ListenerBufferBudget) {
        self.demultiplexer = demultiplexer
        account = ListenerBufferAccount(budget: budget)
    }

    func schedule(_ context: LoopContext) {
        context.schedule(at: context.now + ListenerBufferBudget.sweepInterval) { context in self.run(context) }
    }

    private func run(_ context: LoopContext) {
        guard let demultiplexer, !demultiplexer.closed else {
            account.withdraw()
            return
        }
        let peers = Array(demultiplexer.channels.values)
        let holdings = peers.map {
            ListenerBufferAccount<ObjectIdentifier>.Holding(key: ObjectIdentifier($0), bytes: $0.bufferedBytes, drained: $0.drainedBytes)
        }
        demultiplexer.heapTrim.heldBytesChanged(to: holdings.reduce(0) { $0 + $1.bytes })
        let closing = Set(account.sweep(holdings))
        for peer in peers where closing.contains(ObjectIdentifier(peer)) {
            peer.close(with: DatagramChannelError.overBufferLimit, context: context)
        }
        schedule(context)
    }
}
