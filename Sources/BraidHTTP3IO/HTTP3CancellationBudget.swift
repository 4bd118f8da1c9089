import BraidCore

/// How many requests one HTTP/3 connection's client may cancel while the server works on them:
/// a token bucket of `requests` cancellations, refilled at `requests` per `interval`. A
/// client that resets requests as fast as it can open them (the "rapid reset" attack) makes
/// the server decode each request and start and cancel its handler; past this budget the
/// connection is closed instead (H3_EXCESSIVE_LOAD), so a new handshake is the price of
/// going on.
package struct HTTP3CancellationBudget: Sendable {
    package let requests: Int
    package let interval: Duration
    private var tokens: Double
    private var updated: MonotonicInstant?

    package init(requests: Int, per interval: Duration) {
        self.requests = max(requests, 0)
        self.interval = interval
        tokens = Double(self.requests)
    }

    /// Counts one cancellation at `now`; false once it goes past the budget.
    package mutating func take(at now: MonotonicInstant) -> Bool {
        if let updated, interval > .zero {
            let elapsed = Double((now - updated).components.attoseconds) / 1e18 + Double((now - updated).components.seconds)
            let period = Double(interval.components.seconds) + Double(interval.components.attoseconds) / 1e18
            tokens = min(Double(requests), tokens + elapsed / period * Double(requests))
        }
        updated = now
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }
}
