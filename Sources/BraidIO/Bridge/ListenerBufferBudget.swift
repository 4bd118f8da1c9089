import BraidCore
import Synchronization

/// The bytes a listener's connections buffer, all its loops together, against one limit: what
/// their engines and queues hold to send and what they received that the application has not
/// read. Each loop measures its own connections once per `sweepInterval` and adds the change
/// here (`ListenerBufferAccount`), so the figure is at most one sweep old and costs nothing on
/// the packet path.
///
/// At the limit, new connections are refused, and each loop closes its connections that hold
/// bytes and moved none of them since its last sweep (a peer that grants no credit or does not
/// read), largest first, until what they hold covers the excess. Connections that make
/// progress are never closed for it: their senders are already bounded per connection.
package final class ListenerBufferBudget: Sendable {
    /// How often each loop measures its connections.
    package static let sweepInterval: Duration = .seconds(1)

    package let limit: Int
    private let total = Atomic(0)
    private let peakTotal = Atomic(0)
    private let closed = Atomic(0)
    private let refused = Atomic(0)

    package init(limit: Int) { self.limit = max(limit, 0) }

    /// Bytes buffered now, as of each loop's last sweep.
    package var buffered: Int { total.load(ordering: .relaxed) }
    /// The most `buffered` has been.
    package var peak: Int { peakTotal.load(ordering: .relaxed) }
    /// Connections closed so far because the listener was over its limit.
    package var closedConnections: Int { closed.load(ordering: .relaxed) }
    /// New connections refused so far because the listener was at its limit.
    package var refusedConnections: Int { refused.load(ordering: .relaxed) }

    /// At or over the limit: new connections are refused.
    package var isExhausted: Bool { buffered >= limit }

    /// Counts a new connection refused at the limit (the stack refuses it).
    package func noteRefused() { refused.add(1, ordering: .relaxed) }

    fileprivate func change(by delta: Int) {
        guard delta != 0 else { return }
        let now = total.add(delta, ordering: .relaxed).newValue
        _ = peakTotal.max(now, ordering: .relaxed)
    }

    fileprivate func noteClosed(_ count: Int) {
        if count > 0 { closed.add(count, ordering: .relaxed) }
    }
}

/// One loop's share of a `ListenerBufferBudget`: its connections' figures at the last sweep.
package struct ListenerBufferAccount<Key: Hashable> {
    /// What a connection holds and how far it has moved bytes (any counter that grows while it
    /// makes progress: bytes acknowledged, written or read).
    package struct Holding {
        package var key: Key
        package var bytes: Int
        package var progress: UInt64

        package init(key: Key, bytes: Int, progress: UInt64) {
            self.key = key
            self.bytes = bytes
            self.progress = progress
        }
    }

    package let budget: ListenerBufferBudget
    private var published = 0
    private var lastProgress: [Key: UInt64] = [:]

    package init(budget: ListenerBufferBudget) { self.budget = budget }

    /// Takes this loop's connections as they are now and publishes their total; returns the
    /// connections to close: while the listener is over its limit, those that hold bytes and
    /// made no progress since the last sweep, largest first, until what they hold covers the
    /// excess (or none is left).
    package mutating func sweep(_ holdings: [Holding]) -> [Key] {
        var sum = 0
        for holding in holdings { sum += holding.bytes }
        budget.change(by: sum - published)
        published = sum
        let previous = lastProgress
        lastProgress = Dictionary(holdings.map { ($0.key, $0.progress) }, uniquingKeysWith: { first, _ in first })
        var excess = budget.buffered - budget.limit
        guard excess > 0 else { return [] }
        let stalled = holdings.filter { holding in
            holding.bytes > 0 && previous[holding.key].map { $0 == holding.progress } == true
        }.sorted { $0.bytes > $1.bytes }
        var closing: [Key] = []
        for holding in stalled where excess > 0 {
            closing.append(holding.key)
            excess -= holding.bytes
        }
        budget.noteClosed(closing.count)
        return closing
    }

    /// The loop stops serving: its connections no longer count.
    package mutating func withdraw() {
        budget.change(by: -published)
        published = 0
        lastProgress.removeAll()
    }
}
