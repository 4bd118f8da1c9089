import BraidCore
import DequeModule

/// A connection's sends, or its receives, run one after another in the order they were
/// asked for: the classic API's completions come in order. An operation that can finish at
/// once (a send the connection has room for) does, without a task, when nothing is queued
/// before it; the others run on one task per run of waiting operations, not one per call.
/// Nothing runs before `resume()` (the connection's `start(queue:)`).
final class ClassicOperationQueue: Sendable {
    typealias Operation = @Sendable () async -> Void

    private struct State {
        var paused = true
        var running = false
        var pending = Deque<Operation>()
    }
    private let state = Locked(State())

    /// Runs `attempt` now if the queue runs (or `beforeResume`: even before it does) and
    /// nothing waits before it: when it returns nil the operation is done, else what it
    /// returns waits its turn. Otherwise queues `operation`, the whole of it, behind the others.
    func submit(beforeResume: Bool = false, trying attempt: () -> Operation?, otherwise operation: @escaping Operation) {
        let start = state.withLock { state -> Bool in
            if !state.paused || beforeResume, !state.running, state.pending.isEmpty {
                guard let rest = attempt() else { return false }
                state.pending.append(rest)
            } else {
                state.pending.append(operation)
            }
            return claimRun(&state)
        }
        if start { run() }
    }

    /// Queues `operation` behind the others.
    func submit(_ operation: @escaping Operation) {
        let start = state.withLock { state -> Bool in
            state.pending.append(operation)
            return claimRun(&state)
        }
        if start { run() }
    }

    /// Starts running what is queued, and everything submitted from now on.
    func resume() {
        let start = state.withLock { state -> Bool in
            state.paused = false
            return claimRun(&state)
        }
        if start { run() }
    }

    private func claimRun(_ state: inout State) -> Bool {
        guard !state.paused, !state.running, !state.pending.isEmpty else { return false }
        state.running = true
        return true
    }

    private func run() {
        Task {
            while let operation = state.withLock({ state -> Operation? in
                guard let next = state.pending.popFirst() else {
                    state.running = false
                    return nil
                }
                return next
            }) {
                await operation()
            }
        }
    }
}
