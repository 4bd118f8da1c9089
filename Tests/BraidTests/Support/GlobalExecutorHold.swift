import Dispatch
import Foundation

/// Holds every thread of Swift's global executor (one per core on Linux): for tests of work
/// that must go on while that executor is busy, such as what an event loop runs as its own.
/// Every other test's tasks wait meanwhile, so a test holds it only as long as it must.
enum GlobalExecutorHold {
    /// Blocks the calling thread (the test's own, one of the executor's) and one task on each
    /// other thread of the executor, runs `body` there, and lets them all go when it returns.
    static func whileHeld<Result>(_ body: () -> Result) -> Result {
        let others = max(ProcessInfo.processInfo.activeProcessorCount - 1, 0)
        let holding = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        for _ in 0..<others {
            Task.detached { hold(announcing: holding, until: release) }
        }
        // Each holder takes a thread of its own: a thread already holding never runs another.
        for _ in 0..<others { holding.wait() }
        defer { for _ in 0..<others { release.signal() } }
        return body()
    }

    /// Synchronous, so the blocking waits are not made in an async context.
    private static func hold(announcing holding: DispatchSemaphore, until release: DispatchSemaphore) {
        holding.signal()
        release.wait()
    }
}
