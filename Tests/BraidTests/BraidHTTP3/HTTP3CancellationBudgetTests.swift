import BraidCore
import BraidHTTP3IO
import Testing

/// The budget an HTTP/3 server keeps of the requests a client cancels: a burst of `requests`,
/// refilled at `requests` per `interval`, never above the burst.
@Suite struct HTTP3CancellationBudgetTests {
    @Test func allowsTheBurstThenRefillsAtItsRate() {
        var budget = HTTP3CancellationBudget(requests: 200, per: .seconds(10))
        let start = MonotonicInstant(nanoseconds: 1_000_000_000)
        #expect(takes(200, from: &budget, at: start) == 200)
        #expect(takes(1, from: &budget, at: start) == 0)
        // 20 a second: half a second later, 10 more.
        let later = start + .milliseconds(500)
        #expect(takes(10, from: &budget, at: later) == 10)
        #expect(takes(1, from: &budget, at: later) == 0)
        // An hour of quiet refills the burst, not more.
        let quiet = later + .seconds(3600)
        #expect(takes(200, from: &budget, at: quiet) == 200)
        #expect(takes(1, from: &budget, at: quiet) == 0)
    }

    /// How many of `count` cancellations at `now` the budget allows.
    private func takes(_ count: Int, from budget: inout HTTP3CancellationBudget, at now: MonotonicInstant) -> Int {
        var allowed = 0
        for _ in 0..<count where budget.take(at: now) { allowed += 1 }
        return allowed
    }
}
