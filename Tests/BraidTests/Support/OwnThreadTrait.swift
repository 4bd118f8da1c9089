import BraidCore
import Foundation
import Testing

/// Runs each test it is given to (or each test of a suite) on a thread of its own rather than
/// on Swift's cooperative pool, at most one such test per core at a time. For synchronous
/// tests: an async test's own tasks (a listener's handlers, say) would share its one thread.
///
/// Why: the pool has one thread per core (two in CI), and a synchronous test that computes for
/// a second or more (two engines driven in memory, megabytes through TLS) holds a pool thread
/// for all that time. The whole suite runs in parallel, so two of them at once stopped every
/// other test's tasks: echo handlers, replies and timers of the socket tests waited seconds in
/// the pool's queue, and their wall-clock budgets ran out (gdb during such stalls found both
/// pool threads inside these tests). On threads of their own, the kernel shares the cores
/// between them and the pool instead. A test waiting for its turn holds no thread; its time
/// limit counts that wait (every test starts at once), so these tests' limits allow for a
/// loaded machine.
struct OwnThreadTrait: TestTrait, SuiteTrait, TestScoping {
    var isRecursive: Bool { true }

    func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        guard testCase != nil, !test.isSuite else { return try await function() }
        await Self.turns.acquire()
        defer { Self.turns.release() }
        let executor = DedicatedThreadExecutor(name: "test-\(test.name.prefix(20))")
        defer { executor.stop() }
        // A child task starts on the executor it prefers; the group awaits it, so `function`
        // does not outlive this call.
        try await withoutActuallyEscaping(function) { function in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask(executorPreference: executor) {
                    try await function()
                }
                try await group.waitForAll()
            }
        }
    }

    private static let turns = Turns(ProcessInfo.processInfo.activeProcessorCount)
}

extension Trait where Self == OwnThreadTrait {
    /// Runs the test, or every test of the suite, on a thread of its own (see `OwnThreadTrait`).
    static var ownThread: Self { Self() }
}
