/// The connection-wide bound on stream bytes queued in the engine and not yet acknowledged
/// (`QUICTransportConfiguration.connectionSendBufferLimit`), and the streams waiting for room
/// under it.
///
/// A stream refused room joins the waiters with a ticket; it keeps that ticket until it next
/// gets room, so it moves up the line while others send. Room is handed out only once it is
/// worth a round (a quarter of the limit free again), to every waiter at once in ticket order:
/// the first takes what it can, and those that got nothing keep their place ahead of it for
/// the next round, so no stream waits forever behind busier ones.
struct ConnectionSendBudget {
    let limit: Int
    /// Stream bytes queued on all streams and not yet acknowledged.
    private(set) var held = 0
    /// Streams refused room since the last round.
    private var waiters: [StreamState] = []
    private var nextTicket: UInt64 = 0

    init(limit: Int) { self.limit = max(limit, 1) }

    /// Bytes that may still be queued before the limit.
    var room: Int { max(limit - held, 0) }

    /// A round of room is due: waiters exist and a quarter of the limit is free.
    var roundDue: Bool { !waiters.isEmpty && held <= limit - limit / 4 }

    mutating func added(_ count: Int, by stream: StreamState) {
        held += count
        // It got room: its next wait starts at the back of the line.
        stream.sendBudgetTicket = nil
    }

    mutating func released(_ count: Int) {
        held -= count
        assert(held >= 0, "released more stream bytes than were held")
    }

    /// `stream` was refused room: it waits for the next round.
    mutating func refused(_ stream: StreamState) {
        if stream.sendBudgetTicket == nil {
            stream.sendBudgetTicket = nextTicket
            nextTicket += 1
        }
        guard !stream.waitsForSendBudget else { return }
        stream.waitsForSendBudget = true
        waiters.append(stream)
    }

    /// Ends the waits: the streams to wake, longest waiting first.
    mutating func takeRound() -> [StreamState] {
        let round = waiters.sorted { ($0.sendBudgetTicket ?? .max) < ($1.sendBudgetTicket ?? .max) }
        waiters.removeAll(keepingCapacity: true)
        for stream in round { stream.waitsForSendBudget = false }
        return round
    }
}
