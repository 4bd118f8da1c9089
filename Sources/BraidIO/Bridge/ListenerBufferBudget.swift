import BraidCore
import Synchronization

/// The bytes a listener's connections buffer, all its loops together, against one limit: what
/// their engines and queues hold to send and what they received that the application has not
/// read. Each loop measures its own connections once per `sweepInterval` and adds the change
/// here (`ListenerBufferAccount`), so the figure is at most one sweep old and costs nothing on
/// the packet path.
///
/// At the limit, new connections are refused, and each loop sheds its share of the excess (its
/// part of `buffered`): first its connections that hold bytes and drained fewer than
/// `minimumDrain` of them since its last sweep (a peer that grants no credit, reads nothing or
/// trickles), largest first; once the listener has been at its limit for
/// `sweepsBeforeClosingAnyHolder` sweeps in a row, its largest holders whatever they drain, so
/// peers that drain slowly cannot keep every new client out.
package final class ListenerBufferBudget: Sendable {
    /// How often each loop measures its connections.
    package static let sweepInterval: Duration = .seconds(1)
    /// Bytes a connection must drain (written to its socket or acknowledged by its peer, or
    /// read by the application) between two sweeps to count as making progress, unless it
    /// drained all it held at the last sweep.
    package static let minimumDrain = 64 * 1024
    /// Sweeps in a row at the limit after which the largest holders are closed even if they
    /// drain `minimumDrain`.
    package static let sweepsBeforeClosingAnyHolder = 3

    package let limit: Int
    private let total = Atomic(0)
    private let peakTotal = Atomic(0)
    private let closed = Atomic(0)
    private let refused = Atomic(0)

    /// `limit` must be positive (`NetworkListener` rejects anything else before it gets here).
    package init(limit: Int) {
        precondition(limit > 0, "a listener's buffer limit must be positive")
        self.limit = limit
    }

    /// Bytes buffered now, as of each loop's last sweep.
    package var buffered: Int { total.load(ordering: .relaxed) }
    /// The most `buffered` has been.
    package var peak: Int { peakTotal.load(ordering: .relaxed) }
    /// Connections closed so far because the listener was over its limit.
    package var closedConnections: Int { closed.load(ordering: .relaxed) }
    /// New connections refused so far at any of the listener's limits: this budget's, and
    /// those the stack counts here too (TCP's and TLS's connection limits).
    package var refusedConnections: Int { refused.load(ordering: .relaxed) }

    /// At or over the limit: new connections are refused.
    package var isExhausted: Bool { buffered >= limit }

    /// Counts a new connection refused at the limit, or at another of the listener's limits
    /// (the stack refuses it).
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
    /// What a connection holds, and how many bytes it has drained from what it holds so far:
    /// written to its socket or acknowledged by its peer, and read by the application (never
    /// bytes received from the peer, which a peer that never reads can trickle).
    /// `reserved` of `bytes` are a bound on what an engine may hold unseen (QUIC: receive
    /// windows granted and not yet delivered) rather than bytes seen held: they count against
    /// the limit, but a connection holding only them is not stalled (an idle connection holds
    /// its windows too), so it is closed only once the largest holders are.
    package struct Holding {
        package var key: Key
        package var bytes: Int
        package var drained: UInt64
        package var reserved: Int

        package init(key: Key, bytes: Int, drained: UInt64, reserved: Int = 0) {
            self.key = key
            self.bytes = bytes
            self.drained = drained
            self.reserved = reserved
        }

        /// Bytes seen held.
        var seen: Int { max(0, bytes - reserved) }
    }

    private struct Last {
        var seen: Int
        var drained: UInt64
    }

    package let budget: ListenerBufferBudget
    private var published = 0
    private var last: [Key: Last] = [:]
    /// Connections picked already that have not ended yet: their bytes are on their way out.
    private var picked: Set<Key> = []
    /// Sweeps in a row that found the listener at its limit.
    private var sweepsAtLimit = 0

    package init(budget: ListenerBufferBudget) { self.budget = budget }

    /// Takes this loop's connections as they are now and publishes their total; returns the
    /// connections to close while the listener is at its limit: enough to cover this loop's
    /// share of what must go for the listener to get under it (the excess times this loop's
    /// part of `buffered`, less what connections picked before and not yet ended hold). Stalled
    /// ones first (holding bytes, having drained fewer than `minimumDrain` since the last sweep
    /// and not all they held then), largest first; after `sweepsBeforeClosingAnyHolder` sweeps
    /// in a row at the limit, any, largest first.
    package mutating func sweep(_ holdings: [Holding]) -> [Key] {
        var sum = 0
        for holding in holdings { sum += holding.bytes }
        budget.change(by: sum - published)
        published = sum
        let previous = last
        last = Dictionary(
            holdings.map { ($0.key, Last(seen: $0.seen, drained: $0.drained)) }, uniquingKeysWith: { first, _ in first })
        picked.formIntersection(last.keys)

        let total = budget.buffered
        guard total >= budget.limit, sum > 0 else {
            sweepsAtLimit = total >= budget.limit ? sweepsAtLimit + 1 : 0
            return []
        }
        sweepsAtLimit += 1
        // Under the limit means below it: `isExhausted` refuses at it.
        let excess = total - budget.limit + 1
        let share = sum >= total ? excess : Int((Double(excess) * Double(sum) / Double(total)).rounded(.up))
        var needed = share
        for holding in holdings where picked.contains(holding.key) { needed -= holding.bytes }
        guard needed > 0 else { return [] }

        let candidates = holdings.filter { $0.bytes > 0 && !picked.contains($0.key) }.sorted { $0.bytes > $1.bytes }
        var closing: [Key] = []
        func pick(_ holding: Holding) {
            closing.append(holding.key)
            picked.insert(holding.key)
            needed -= holding.bytes
        }
        for holding in candidates where needed > 0 && Self.isStalled(holding, since: previous[holding.key]) { pick(holding) }
        if needed > 0 && sweepsAtLimit >= ListenerBufferBudget.sweepsBeforeClosingAnyHolder {
            for holding in candidates where needed > 0 && !picked.contains(holding.key) { pick(holding) }
        }
        budget.noteClosed(closing.count)
        return closing
    }

    /// Held bytes seen at the last sweep too, and drained fewer than `minimumDrain` of them
    /// since, and not all of them. A connection first seen now is not known to be stalled.
    private static func isStalled(_ holding: Holding, since last: Last?) -> Bool {
        guard let last, last.seen > 0, holding.seen > 0 else { return false }
        let drained = holding.drained &- last.drained
        return drained < UInt64(min(ListenerBufferBudget.minimumDrain, last.seen))
    }

    /// The loop stops serving: its connections no longer count.
    package mutating func withdraw() {
        budget.change(by: -published)
        published = 0
        last.removeAll()
        picked.removeAll()
    }
}
