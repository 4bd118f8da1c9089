import BraidCore
import Foundation
import Testing

@Suite struct LockedTests {
    /// Four times as many threads as this machine has cores, each adding under the lock: no
    /// increment is lost (the count is exact), and every thread finishes although the lock is
    /// contended throughout with more threads than can run.
    @Test func contendedIncrementsAreAllCounted() {
        let counter = Locked(0)
        let threads = 4 * max(2, ProcessInfo.processInfo.activeProcessorCount)
        let increments = 20_000
        DispatchQueue.concurrentPerform(iterations: threads) { _ in
            for _ in 0..<increments { counter.withLock { $0 += 1 } }
        }
        #expect(counter.withLock { $0 } == threads * increments)
    }

    /// A noncopyable value is kept in place and released with the lock.
    @Test func holdsANoncopyableValueAndReleasesIt() {
        final class Witness: Sendable {}
        struct Unique: ~Copyable { let witness: Witness }
        weak var released: Witness?
        do {
            let witness = Witness()
            released = witness
            let lock = Locked(Unique(witness: witness))
            #expect(lock.withLock { $0.witness === witness })
        }
        #expect(released == nil)
    }
}
