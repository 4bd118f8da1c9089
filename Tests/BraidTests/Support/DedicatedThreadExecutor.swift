import BraidCore
import Foundation

/// A task executor with one thread of its own, which runs its jobs in order until `stop()`.
/// `OwnThreadTrait` runs a test's body on one, off Swift's cooperative pool.
final class DedicatedThreadExecutor: TaskExecutor {
    private struct State {
        var jobs: [UnownedJob] = []
        var stopped = false
    }

    private let state = Locked(State())
    private let wake = DispatchSemaphore(value: 0)

    init(name: String) {
        let thread = Thread { [self] in
            // Foundation does not name the thread on Linux, and it would show the pool's name.
            try? name.prefix(15).write(toFile: "/proc/thread-self/comm", atomically: false, encoding: .utf8)
            while true {
                wake.wait()
                let (jobs, stopped) = state.withLock { state in
                    defer { state.jobs.removeAll() }
                    return (state.jobs, state.stopped)
                }
                for job in jobs { job.runSynchronously(on: asUnownedTaskExecutor()) }
                if stopped { return }
            }
        }
        thread.start()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let accepted = state.withLock { state in
            guard !state.stopped else { return false }
            state.jobs.append(job)
            return true
        }
        // A job after `stop()` (a task that outlived the scope that preferred this executor)
        // goes to the global executor: never run here, on the enqueuing thread, which may be
        // an event loop's in the middle of its pass.
        guard accepted else { return globalConcurrentExecutor.enqueue(ExecutorJob(job)) }
        wake.signal()
    }

    /// Ends the thread once the jobs queued so far have run. Call once its scope has ended.
    func stop() {
        state.withLock { $0.stopped = true }
        wake.signal()
    }
}
