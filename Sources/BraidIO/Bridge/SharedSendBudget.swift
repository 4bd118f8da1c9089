import BraidCore

/// The bytes one connection's streams may hold for sending, all streams together: a
/// `SendBudget` under a lock, shared by the application's tasks and the connection's loop.
/// Held are those the engine holds unacknowledged (as the loop last published them) and those
/// sends have queued in the streams' outboxes.
///
/// A send is admitted (its bytes charged) before it copies them: at once while the held bytes
/// are below `limit` and nobody waits, else in turn, first come first served, as the loop
/// publishes room. So the connection holds at most `limit` plus one send, however many streams
/// and senders it has, and no sender waits forever behind others. Charged bytes leave the
/// budget when the engine takes them (the engine's own figure then counts them) or when they
/// are dropped.
package final class SharedSendBudget: Sendable {
    private struct Waiter {
        let count: Int
        /// The outbox the send goes to: if it fails first, so does the wait.
        let outbox: ObjectIdentifier
        let completion: Completion<Void>
    }

    private struct State {
        var budget: SendBudget<Waiter>
        var failure: (any Error)?
    }

    package let limit: Int
    private let state: Locked<State>

    package init(limit: Int) {
        self.limit = max(limit, 1)
        state = Locked(State(budget: SendBudget(limit: max(limit, 1))))
    }

    /// Bytes held now: the engine's (as last published) and those queued.
    package var held: Int { state.withLock { $0.budget.held } }

    /// Senders waiting to be admitted.
    package var waitingSenders: Int { state.withLock { $0.budget.waiterCount } }

    // MARK: Application side (any thread)

    /// Charges `count` bytes, waiting for room first when the budget is used up (or others
    /// wait). `waiting` runs once the call has to wait: it must get the loop to publish the
    /// engine's figure (a pump pass), so room that comes back is seen.
    package func admit(_ count: Int, for outbox: StreamOutbox, waiting: () -> Void) async throws {
        if try charge(count, regardless: false) { return }
        // A stream that takes no more sends lets this one through to fail there (its charge
        // goes back as it does), rather than wait for room it cannot use.
        if !outbox.takesSends, try charge(count, regardless: true) { return }
        try await Completion<Void>.wait { completion in
            let outcome = state.withLock { state -> Result<Void, any Error>? in
                if let failure = state.failure { return .failure(failure) }
                state.budget.wait(Waiter(count: count, outbox: ObjectIdentifier(outbox), completion: completion))
                return nil
            }
            if let outcome {
                completion.resume(outcome)
            } else {
                waiting()
            }
        }
    }

    /// Charges `count` if the budget has room and nobody waits (or `regardless`).
    private func charge(_ count: Int, regardless: Bool) throws -> Bool {
        try state.withLock { state -> Bool in
            if let failure = state.failure { throw failure }
            guard regardless || (!state.budget.hasWaiters && state.budget.isBelowLimit) else { return false }
            state.budget.queued += count
            return true
        }
    }

    /// Gives back bytes charged to a send that never reached the outbox.
    package func release(_ count: Int) {
        guard count > 0 else { return }
        resumeAdmitted(state.withLock { state in
            state.budget.queued -= count
            return Self.admitWaiters(&state.budget)
        })
    }

    // MARK: Loop side

    /// The engine took `count` queued bytes: they count as the engine's until the loop
    /// publishes its figure (so the budget never shows room they still take).
    package func handedToEngine(_ count: Int) {
        guard count > 0 else { return }
        state.withLock { state in
            state.budget.queued -= count
            state.budget.engineHeld += count
        }
    }

    /// Records what the engine holds now and admits the waiting senders that fit. Returns
    /// whether senders still wait (then the loop must hear when the engine's room returns).
    @discardableResult
    package func publish(engine: Int) -> Bool {
        let (admitted, stillWaiting) = state.withLock { state in
            state.budget.engineHeld = engine
            let admitted = Self.admitWaiters(&state.budget)
            return (admitted, state.budget.hasWaiters)
        }
        resumeAdmitted(admitted)
        return stillWaiting
    }

    /// The connection ended: waiting senders fail with `error`, and so do later admissions.
    package func fail(_ error: any Error) {
        let waiters = state.withLock { state in
            if state.failure == nil { state.failure = error }
            return state.budget.takeWaiters()
        }
        for waiter in waiters { waiter.completion.resume(.failure(error)) }
    }

    /// The stream of `outbox` can send no more: its senders waiting here fail with `error`.
    package func failWaiters(of outbox: StreamOutbox, _ error: any Error) {
        let key = ObjectIdentifier(outbox)
        let failed = state.withLock { state -> [Waiter] in
            var failed: [Waiter] = []
            state.budget.removeWaiters { waiter in
                guard waiter.outbox == key else { return false }
                failed.append(waiter)
                return true
            }
            return failed
        }
        for waiter in failed { waiter.completion.resume(.failure(error)) }
    }

    /// Admits waiters in order while the budget is below its limit, charging each its bytes (a
    /// cancelled one is dropped uncharged). Returns the claims to resume once the lock is
    /// released.
    private static func admitWaiters(_ budget: inout SendBudget<Waiter>) -> [Completion<Void>.Claim] {
        var admitted: [Completion<Void>.Claim] = []
        budget.admitWaiters { waiter in
            guard let claim = waiter.completion.claim() else { return nil }
            admitted.append(claim)
            return waiter.count
        }
        return admitted
    }

    private func resumeAdmitted(_ claims: [Completion<Void>.Claim]) {
        for claim in claims { claim.resume(.success(())) }
    }
}
