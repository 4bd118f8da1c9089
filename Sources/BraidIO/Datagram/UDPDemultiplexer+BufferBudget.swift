import BraidCore

extension UDPDemultiplexer {
    /// Counts this loop's peers against the listener's `budget`: every
    /// `ListenerBufferBudget.sweepInterval` each peer's channel is measured
    /// (`DatagramChannel.bufferedBytes`; drain: bytes written to the socket and read by the
    /// application); while the listener is at its limit, the peers the budget picks (those
    /// draining too slowly, and after a few sweeps at the limit the largest holders) end with
    /// `DatagramChannelError.overBufferLimit` (a DTLS peer gets close_notify). New peers are
    /// refused by the stack's admission (`ListenerBufferBudget.isExhausted`). The sweeps end
    /// once the demultiplexer closes. Call on the loop.
    package func watchBufferBudget(_ budget: ListenerBufferBudget, context: LoopContext) {
        ListenerBufferSweep<DatagramChannel>(
            budget: budget,
            holders: { [weak self] in
                guard let self, !self.closed else { return nil }
                return Array(self.channels.values)
            },
            measure: { ($0.bufferedBytes, $0.drainedBytes, 0) },
            settle: { [weak self] heldBytes, closing, context in
                self?.heapTrim.heldBytesChanged(to: heldBytes)
                for peer in closing { peer.close(with: DatagramChannelError.overBufferLimit, context: context) }
            }
        ).schedule(context)
    }
}
