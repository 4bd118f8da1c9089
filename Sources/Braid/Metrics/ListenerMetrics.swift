import BraidCore
import BraidIO
import CoreMetrics

/// A running listener's own figures through swift-metrics: what its limits bound now (gauges)
/// and what it refused so far (counters), read every `interval` while it runs and once more as
/// it stops. Made only when a metrics backend is bootstrapped.
final class ListenerMetrics: Sendable {
    static let interval: Duration = .seconds(5)

    private let connections: Gauge
    private let halfOpenHandshakes: Gauge
    private let bufferedBytes: Gauge
    private let retries: Counter
    private let refused: Counter
    /// The connections whose handlers run now, counted by the listener itself (every stack).
    let liveConnections = Locked(0)

    init(factory: any MetricsFactory, stack: String, listener: String) {
        let dimensions = [("stack", stack), ("listener", listener)]
        connections = Gauge(label: "braid_listener_connections", dimensions: dimensions, factory: factory)
        halfOpenHandshakes = Gauge(label: "braid_listener_half_open_handshakes", dimensions: dimensions, factory: factory)
        bufferedBytes = Gauge(label: "braid_listener_buffered_bytes", dimensions: dimensions, factory: factory)
        retries = Counter(label: "braid_listener_retries_total", dimensions: dimensions, factory: factory)
        refused = Counter(label: "braid_listener_refused_total", dimensions: dimensions, factory: factory)
    }

    /// Reads `group` and `budget` every `interval` until the calling task is cancelled, then
    /// once more (call before the group closes: a closed group reports nothing).
    func watch(_ group: any ListenerGroup, budget: ListenerBufferBudget) async {
        var reported = (retries: 0, refused: 0)
        while true {
            let statistics = await group.listenerStatistics
            connections.record(liveConnections.withLock { $0 })
            halfOpenHandshakes.record(statistics?.halfOpenHandshakes ?? 0)
            // What the buffer limit counts, every stack alike (QUIC's statistics are the
            // engines' figure alone).
            bufferedBytes.record(budget.buffered)
            let retriesNow = statistics?.retriesSent ?? 0
            // QUIC's refusals include those at every limit; TLS's and TCP's (the budget's)
            // those at the buffer limit and the connection limits.
            let refusedNow = statistics?.refusedConnections ?? budget.refusedConnections
            if retriesNow > reported.retries { retries.increment(by: Int64(retriesNow - reported.retries)) }
            if refusedNow > reported.refused { refused.increment(by: Int64(refusedNow - reported.refused)) }
            reported = (retriesNow, refusedNow)
            if Task.isCancelled { return }
            try? await Task.sleep(for: Self.interval)
        }
    }

    /// The listener stopped: nothing is live any more.
    func stopped() {
        connections.record(0)
        halfOpenHandshakes.record(0)
        bufferedBytes.record(0)
    }
}
