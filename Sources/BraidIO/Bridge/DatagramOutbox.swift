import BraidCore
import DequeModule
import Foundation

/// Datagrams handed to `send` that the loop has not yet queued in the engine.
///
/// A sender appends under a lock and returns; only the first datagram of a burst posts work to
/// the loop, which then takes everything queued so far. So a burst of sends costs one loop
/// pass and goes out as one batch of packets (one `sendmmsg`/GSO write) instead of a thread
/// hop and a system call each. Waiting happens only when `limit` datagrams are already queued
/// here (the engine's own queue is full too), or before the connection is ready.
package final class DatagramOutbox: Sendable {
    /// What `offer` decided.
    package enum Offer {
        /// Queued; the loop already has a pass coming that will take it.
        case queued
        /// Queued; the caller must post a drain pass to the loop.
        case queuedDrainNeeded
        /// Not queued: the outbox is full; wait for room, then offer again.
        case full
        /// Not queued: the loop must decide (not ready yet, or larger than the last published
        /// limit, which path-MTU discovery may have raised since).
        case needsLoop
        /// Not queued: the connection has ended.
        case failed(any Error)
    }

    private struct State {
        var queue = Deque<Data>()
        /// The loop will look at `queue` again without being asked: a drain pass is posted,
        /// or the queue waits for engine room that acknowledgements will free.
        var drainPending = false
        /// The largest datagram the engine accepted when last asked; nil before ready.
        var maximumSize: Int?
        var failure: (any Error)?
        /// The bound, in datagrams: `queued` counts those in `queue`; its line holds the
        /// senders waiting for room (a cancelled one stays until the next wake, as a no-op).
        var budget: SendBudget<Completion<Void>>
        /// The most datagrams `queue` has held at once.
        var highWater = 0
        /// The bytes of the datagrams in `queue`.
        var heldBytes = 0
    }

    package let limit: Int
    private let state: Locked<State>

    package init(limit: Int) {
        self.limit = limit
        state = Locked(State(budget: SendBudget(limit: limit)))
    }

    /// Datagrams queued and not yet taken by the loop.
    package var count: Int { state.withLock { $0.queue.count } }

    /// The bytes of the datagrams queued and not yet taken by the loop (a listener's buffer
    /// limit counts them).
    package var heldBytes: Int { state.withLock { $0.heldBytes } }

    /// The most datagrams queued here at once, over the connection's life.
    package var largestCount: Int { state.withLock { $0.highWater } }

    /// Senders waiting for room (cancelled ones included until the next wake).
    package var roomWaiterCount: Int { state.withLock { $0.budget.waiterCount } }

    /// Called from any thread by `send`.
    package func offer(_ datagram: Data) -> Offer {
        state.withLock { state in
            if let failure = state.failure { return .failed(failure) }
            guard let maximum = state.maximumSize, datagram.count <= maximum else { return .needsLoop }
            guard state.budget.isBelowLimit else { return .full }
            state.queue.append(datagram)
            state.heldBytes += datagram.count
            state.budget.queued += 1
            state.highWater = max(state.highWater, state.queue.count)
            if state.drainPending { return .queued }
            state.drainPending = true
            return .queuedDrainNeeded
        }
    }

    /// Suspends until the outbox has room (or the connection ends, or the task is cancelled).
    package func waitForRoom() async throws {
        try await Completion<Void>.wait { completion in
            let immediate: Result<Void, any Error>? = state.withLock { state in
                if let failure = state.failure { return .failure(failure) }
                if state.budget.isBelowLimit { return .success(()) }
                state.budget.removeWaiters { !$0.isPending }
                state.budget.wait(completion)
                return nil
            }
            if let immediate { completion.resume(immediate) }
        }
    }

    /// Loop: takes up to `count` datagrams, oldest first, into `taken` (emptied first), and
    /// wakes senders waiting for room. When `count` covers everything queued, the queue's
    /// storage itself moves to `taken` and the outbox keeps `taken`'s (its room kept), so a
    /// drain copies no datagram and allocates nothing. While datagrams remain, the loop keeps
    /// them in mind (it takes more as the engine's queue drains), so senders post no further
    /// passes.
    package func take(upTo count: Int, into taken: inout Deque<Data>) {
        taken.removeAll(keepingCapacity: true)
        let waiters = state.withLock { state -> [Completion<Void>] in
            if state.queue.count <= count {
                swap(&state.queue, &taken)
            } else {
                for _ in 0..<count { taken.append(state.queue.removeFirst()) }
            }
            state.budget.queued -= taken.count
            if state.queue.isEmpty {
                state.drainPending = false
                state.heldBytes = 0
            } else {
                for datagram in taken { state.heldBytes -= datagram.count }
            }
            guard !taken.isEmpty else { return [] }
            return state.budget.takeWaiters()
        }
        for waiter in waiters { waiter.resume(.success(())) }
    }

    /// Loop: the size senders may queue without asking the loop (nil: ask the loop).
    package func publish(maximumSize: Int?) {
        state.withLock { $0.maximumSize = maximumSize }
    }

    /// Loop: the connection ended; queued datagrams are dropped and waiting senders fail.
    package func fail(_ error: any Error) {
        let waiters = state.withLock { state -> [Completion<Void>] in
            if state.failure == nil { state.failure = error }
            state.queue.removeAll()
            state.heldBytes = 0
            state.budget.queued = 0
            state.drainPending = false
            return state.budget.takeWaiters()
        }
        for waiter in waiters { waiter.resume(.failure(error)) }
    }
}
