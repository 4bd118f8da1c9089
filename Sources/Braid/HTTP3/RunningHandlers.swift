import BraidCore
import BraidIO

/// How many request handlers of one HTTP/3 connection are still running, and a wait for the
/// last of them (the handlers are unstructured tasks, so no task group waits for them).
final class RunningHandlers: Sendable {
    private let state = Locked<(count: Int, waiter: Completion<Void>?)>((0, nil))

    func started() {
        state.withLock { $0.count += 1 }
    }

    func finished() {
        let waiter = state.withLock { state -> Completion<Void>? in
            state.count -= 1
            guard state.count == 0 else { return nil }
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(.success(()))
    }

    /// Returns once no handler is running.
    func allFinished() async {
        try? await Completion<Void>.wait { completion in
            let idle = state.withLock { state -> Bool in
                if state.count == 0 { return true }
                state.waiter = completion
                return false
            }
            if idle { completion.resume(.success(())) }
        }
    }
}
