import BraidCore

/// The connection-wide bound on stream bytes queued in the engine and not yet acknowledged
/// (`QUICTransportConfiguration.connectionSendBufferLimit`), and the streams waiting for room
/// under it: the engine's use of the one send-budget model.
///
/// A stream refused room joins the waiters with a ticket; it keeps that ticket until it next
/// gets room, so it moves up the line while others send. Room is handed out only once it is
/// worth a round (a quarter of the limit free again), to every waiter at once in ticket order:
/// the first takes what it can, and those that got nothing keep their place ahead of it for
/// the next round, so no stream waits forever behind busier ones.
extension SendBudget where Waiter == StreamState {
    /// The engine's budget: at least one byte, so a stream can always make progress.
    static func streams(limit: Int) -> Self { Self(limit: max(limit, 1)) }

    mutating func added(_ count: Int, by stream: StreamState) {
        engineHeld += count
        // It got room: its next wait starts at the back of the line.
        stream.sendBudgetTicket = nil
    }

    mutating func released(_ count: Int) {
        engineHeld -= count
        assert(engineHeld >= 0, "released more stream bytes than were held")
    }

    /// `stream` was refused room: it waits for the next round.
    mutating func refused(_ stream: StreamState) {
        if stream.sendBudgetTicket == nil { stream.sendBudgetTicket = takeTicket() }
        guard !stream.waitsForSendBudget else { return }
        stream.waitsForSendBudget = true
        wait(stream)
    }

    /// Ends the waits: the streams to wake, longest waiting first.
    mutating func takeRound() -> [StreamState] {
        let round = takeWaiters().sorted { ($0.sendBudgetTicket ?? .max) < ($1.sendBudgetTicket ?? .max) }
        for stream in round { stream.waitsForSendBudget = false }
        return round
    }
}
