import BraidCore
import Testing

@testable import BraidIO

/// `SharedSendBudget` driven by hand, as a QUIC connection's streams and loop drive it: sends are
/// admitted at once below the limit, then in turn as the loop publishes room, and never left
/// waiting when their stream or the connection fails.
@Suite struct SendBudgetAdmissionTests {
    struct Failure: Error {}

    /// How many times waiting senders asked the loop to look again.
    final class Asks: Sendable {
        private let count = Locked(0)
        func ask() { count.withLock { $0 += 1 } }
        var value: Int { count.withLock { $0 } }
    }

    /// Waits (generously bounded) until `budget` has `count` waiting senders.
    private func waitForWaiters(_ budget: SharedSendBudget, _ count: Int) async throws {
        let reached = try await waitUntil { budget.waitingSenders == count }
        #expect(reached, "\(budget.waitingSenders) waiting senders, not \(count)")
    }

    @Test func sendsAreAdmittedInTurnAsRoomIsPublished() async throws {
        let budget = SharedSendBudget(limit: 100)
        let outbox = StreamOutbox(limit: 1000, open: true, budget: budget)
        // Below the limit a send is admitted whole, even one larger than the room.
        try await budget.admit(150, for: outbox) {}
        #expect(budget.held == 150)
        let loopAsked = Asks()
        let first = Task { try await budget.admit(10, for: outbox) { loopAsked.ask() } }
        try await waitForWaiters(budget, 1)
        let second = Task { try await budget.admit(20, for: outbox) { loopAsked.ask() } }
        try await waitForWaiters(budget, 2)
        // Each waiting sender asked the loop to look at the engine again.
        #expect(loopAsked.value == 2)

        // The engine took the 150 bytes and holds them: no room yet.
        budget.handedToEngine(150)
        #expect(budget.publish(engine: 150))
        #expect(budget.waitingSenders == 2)
        // Room for one: the first in line is admitted (and charged), the second still waits.
        #expect(budget.publish(engine: 95))
        try await first.value
        #expect(budget.held == 105)
        #expect(budget.waitingSenders == 1)
        // More room: the second is admitted too.
        #expect(!budget.publish(engine: 0))
        try await second.value
        #expect(budget.held == 30)
        // Charges given back (bytes dropped before reaching the engine) leave the budget.
        budget.release(30)
        #expect(budget.held == 0)
    }

    @Test func waitingSendersFailWithTheirStreamOrTheConnection() async throws {
        let budget = SharedSendBudget(limit: 100)
        let first = StreamOutbox(limit: 1000, open: true, budget: budget)
        let second = StreamOutbox(limit: 1000, open: true, budget: budget)
        try await budget.admit(100, for: first) {}
        let onFirst = Task { try await budget.admit(10, for: first) {} }
        try await waitForWaiters(budget, 1)
        let onSecond = Task { try await budget.admit(10, for: second) {} }
        try await waitForWaiters(budget, 2)

        // The first stream fails: its waiting sender fails, the other stream's still waits.
        first.fail(Failure())
        await #expect(throws: Failure.self) { try await onFirst.value }
        #expect(budget.waitingSenders == 1)
        // A send on the failed stream is let through (to fail at its outbox), not left waiting.
        try await budget.admit(5, for: first) {}
        budget.release(5)

        // The connection ends: every waiting sender fails, and so does any later admission.
        budget.fail(Failure())
        await #expect(throws: Failure.self) { try await onSecond.value }
        await #expect(throws: Failure.self) { try await budget.admit(1, for: second) {} }
        #expect(budget.waitingSenders == 0)
    }
}
