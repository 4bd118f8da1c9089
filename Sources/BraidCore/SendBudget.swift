import DequeModule

/// The one model of a bound on what is held for sending, for every stack: a QUIC connection's
/// budget (in its engine, and for its senders across threads), each byte stream's bound (TLS,
/// TCP, QUIC streams), each datagram queue's and each HTTP/3 body's.
///
/// Held is what the engine (or socket) holds unacknowledged, as its owner last published it
/// (`engineHeld`), plus what senders queued toward it that it has not taken yet (`queued`), in
/// the user's unit (bytes, or datagrams). A sender refused room joins `waiters`, first come
/// first served. How the line moves is the user's, through the predicates here: one waiter at
/// a time while the budget is below its limit (`admitWaiters`), or everyone at once in a round
/// once a quarter of the limit is free again (`roundDue`), with a ticket a waiter keeps until it
/// gets room, so those that got nothing stay ahead of newcomers.
///
/// A value without a lock: a budget threads share lives under the lock of its owner.
/// Public and `@inlinable` (as `Locked`) so that each stack's hot path compiles it specialized.
public struct SendBudget<Waiter> {
    /// The bound; a user that must never stop at zero passes at least 1.
    public let limit: Int
    /// What the engine holds unacknowledged, as last published.
    public var engineHeld = 0
    /// What senders queued that the engine has not taken yet.
    public var queued = 0
    /// Senders refused room, in the order they came.
    @usableFromInline var line = Deque<Waiter>()
    /// Tickets handed out so far (`takeTicket`).
    @usableFromInline var ticketsIssued: UInt64 = 0

    @inlinable public init(limit: Int) { self.limit = limit }

    /// What is held now: the engine's and the queued.
    @inlinable public var held: Int { engineHeld + queued }

    /// What may still be held before the limit.
    @inlinable public var room: Int { max(limit - held, 0) }

    /// Held is below the limit: a sender may go (a send larger than the room goes whole).
    @inlinable public var isBelowLimit: Bool { held < limit }

    /// `count` more fit under the limit.
    @inlinable public func fits(_ count: Int) -> Bool { held + count <= limit }

    /// Senders wait for room.
    @inlinable public var hasWaiters: Bool { !line.isEmpty }

    /// How many senders wait.
    @inlinable public var waiterCount: Int { line.count }

    /// A round of room is due: senders wait, and a quarter of the limit is free.
    @inlinable public var roundDue: Bool { !line.isEmpty && held <= limit - limit / 4 }

    /// `waiter` joins the line, behind everyone there.
    @inlinable public mutating func wait(_ waiter: Waiter) { line.append(waiter) }

    /// A place in line that a waiter keeps across rounds until it gets room: lower goes first.
    @inlinable public mutating func takeTicket() -> UInt64 {
        defer { ticketsIssued += 1 }
        return ticketsIssued
    }

    /// Empties the line: every waiter, in the order they came. Costs nothing when none waits
    /// (the loop asks on every drain).
    @inlinable public mutating func takeWaiters() -> [Waiter] {
        guard !line.isEmpty else { return [] }
        defer { line.removeAll() }
        return Array(line)
    }

    /// Drops the waiters `shouldLeave` picks, keeping the others' order.
    @inlinable public mutating func removeWaiters(where shouldLeave: (Waiter) throws -> Bool) rethrows {
        try line.removeAll(where: shouldLeave)
    }

    /// Admits waiters in order while the budget is below its limit: `charge` returns what the
    /// waiter queues (added to `queued`), or nil for one that left (dropped uncharged).
    @inlinable public mutating func admitWaiters(_ charge: (Waiter) -> Int?) {
        while let waiter = line.first, held < limit {
            line.removeFirst()
            if let count = charge(waiter) { queued += count }
        }
    }
}

extension SendBudget: Sendable where Waiter: Sendable {}
