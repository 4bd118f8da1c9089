import BraidIO
import Foundation

extension EventLoop {
    /// A virtual loop: runs `body` while moving the clock `step` at a time, until `body`
    /// returns (its result) or `limit` of virtual time has passed (`VirtualTimeLimit`). The
    /// clock runs at most ten times faster than the wall clock, so a task that is busy (not
    /// waiting on the loop) cannot see protocol timers, such as the idle timeout, fire behind
    /// its back.
    func drive<T: Sendable>(
        limit: Duration = .seconds(20), step: Duration = .milliseconds(1), _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        let outcome = SharedSlot<Result<T, any Error>>()
        let task = Task {
            let result: Result<T, any Error>
            do { result = .success(try await body()) } catch { result = .failure(error) }
            outcome.value = result
        }
        var elapsed = Duration.zero
        while outcome.value == nil {
            guard elapsed < limit else {
                task.cancel()
                throw VirtualTimeLimit(limit: limit)
            }
            advance(by: step)
            elapsed += step
            // Let the tasks that the step woke run before time moves on.
            try await Task.sleep(for: step / 10)
        }
        return try outcome.value!.get()
    }
}

/// `EventLoop.drive` ran out of virtual time.
struct VirtualTimeLimit: Error, CustomStringConvertible {
    let limit: Duration
    var description: String { "not done after \(limit) of virtual time" }
}
