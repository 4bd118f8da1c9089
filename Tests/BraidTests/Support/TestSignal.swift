import BraidCore

/// Something that happens once in a test (a handler got its connection, a server finished),
/// awaited with a deadline instead of polled: `fulfill` wakes every waiter at once.
final class TestSignal<Value: Sendable>: Sendable {
    private struct State {
        var value: Value?
        var waiters: [Int: CheckedContinuation<Value?, Never>] = [:]
        var nextID = 0
    }
    private let state = Locked(State())

    init() {}

    /// The value, if it was fulfilled.
    var value: Value? { state.withLock { $0.value } }

    /// Sets the value (the first call wins) and wakes the waiters.
    func fulfill(_ value: Value) {
        let waiters = state.withLock { state -> [CheckedContinuation<Value?, Never>] in
            guard state.value == nil else { return [] }
            state.value = value
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume(returning: value) }
    }

    /// The value once fulfilled, or nil if `deadline` passed first (generous: a loaded machine
    /// is slow, and a wait that succeeds returns at once).
    func wait(within deadline: Duration = .seconds(60)) async -> Value? {
        if let value { return value }
        return await withTaskGroup(of: Value?.self) { group in
            group.addTask { await self.waitUntilCancelled() }
            group.addTask {
                try? await Task.sleep(for: deadline)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first ?? self.value
        }
    }

    private func waitUntilCancelled() async -> Value? {
        let id = state.withLock { state -> Int in
            defer { state.nextID += 1 }
            return state.nextID
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Value?, Never>) in
                let ready = state.withLock { state -> Value?? in
                    if let value = state.value { return .some(value) }
                    if Task.isCancelled { return .some(nil) }
                    state.waiters[id] = continuation
                    return .none
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
            waiter?.resume(returning: nil)
        }
    }
}

/// Checks `condition` until it holds (true) or `deadline` passed (false), for state no event
/// announces (a cache filled by the library, a counter other tasks move). Every check is
/// cheap, so it looks often; the deadline is generous, as a wait that succeeds ends at once.
func waitUntil(within deadline: Duration = .seconds(60), _ condition: () throws -> Bool) async throws -> Bool {
    let end = ContinuousClock.now + deadline
    while try !condition() {
        guard ContinuousClock.now < end else { return false }
        try await Task.sleep(for: .milliseconds(5))
    }
    return true
}
