import BraidCore
import BraidIO
import CoreMetrics

/// Where one kind of connection reports through swift-metrics: a listener's inbound
/// connections, or a stack's client connections. Made only when a metrics backend is
/// bootstrapped (`make` returns nil for swift-metrics' no-op default), with every handle and
/// dimension list made once here, so a connection reports with a few calls when it becomes
/// ready and when it ends, and nothing per packet. The names and labels are documented in the
/// Metrics article.
final class ConnectionMetrics: Sendable {
    enum Role: String {
        case client, server
    }

    private let factory: any MetricsFactory
    private let dimensions: [(String, String)]
    private let opened: Counter
    private let handshakeDuration: CoreMetrics.Timer
    private let bytesSent: Counter
    private let bytesReceived: Counter
    private let packetsSent: Counter
    private let packetsReceived: Counter
    private let retransmissions: Counter
    private let datagramsLost: Counter
    private let pathChanges: Counter

    private init(factory: any MetricsFactory, stack: String, role: Role, listener: String) {
        self.factory = factory
        let dimensions = [("stack", stack), ("role", role.rawValue), ("listener", listener)]
        self.dimensions = dimensions
        func counter(_ label: String) -> Counter { Counter(label: label, dimensions: dimensions, factory: factory) }
        opened = counter("braid_connections_opened_total")
        handshakeDuration = CoreMetrics.Timer(label: "braid_handshake_duration_seconds", dimensions: dimensions, factory: factory)
        bytesSent = counter("braid_bytes_sent_total")
        bytesReceived = counter("braid_bytes_received_total")
        packetsSent = counter("braid_packets_sent_total")
        packetsReceived = counter("braid_packets_received_total")
        retransmissions = counter("braid_retransmissions_total")
        datagramsLost = counter("braid_datagrams_lost_total")
        pathChanges = counter("braid_path_changes_total")
    }

    /// The reporter for connections of `stack` in `role` (`listener`: the listener's
    /// `metricsLabel`; empty for clients), or nil when no backend is bootstrapped.
    static func make(stack: String, role: Role, listener: String) -> ConnectionMetrics? {
        guard let factory = activeFactory else { return nil }
        return ConnectionMetrics(factory: factory, stack: stack, role: role, listener: listener)
    }

    /// The reporter of `stack`'s client connections: one per stack and backend, kept.
    static func client(stack: String) -> ConnectionMetrics? {
        guard let factory = activeFactory else { return nil }
        return clients.withLock { made in
            if let existing = made[stack], existing.factory as AnyObject === factory as AnyObject { return existing }
            let reporter = ConnectionMetrics(factory: factory, stack: stack, role: .client, listener: "")
            made[stack] = reporter
            return reporter
        }
    }

    private static let clients = Locked<[String: ConnectionMetrics]>([:])

    /// The factory reports go to: a test's (`BraidMetrics.factory`), or the bootstrapped one;
    /// nil for swift-metrics' no-op default.
    static var activeFactory: (any MetricsFactory)? {
        let factory = BraidMetrics.factory ?? MetricsSystem.factory
        return factory is NOOPMetricsHandler ? nil : factory
    }

    func connectionOpened(handshake: Duration) {
        opened.increment()
        let (seconds, attoseconds) = handshake.components
        handshakeDuration.recordNanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }

    /// The connection ended: `wasReady` says whether it had become ready (closed) or not
    /// (failed); `reason` is `NetworkError.metricsReason`.
    func connectionEnded(wasReady: Bool, reason: String, pathChanges: UInt64) {
        Counter(
            label: wasReady ? "braid_connections_closed_total" : "braid_connections_failed_total",
            dimensions: dimensions + [("reason", reason)], factory: factory
        ).increment()
        if pathChanges > 0 { self.pathChanges.increment(by: Int64(clamping: pathChanges)) }
    }

    func record(_ traffic: ConnectionTraffic) {
        func add(_ counter: Counter, _ value: UInt64) {
            if value > 0 { counter.increment(by: Int64(clamping: value)) }
        }
        add(bytesSent, traffic.bytesSent)
        add(bytesReceived, traffic.bytesReceived)
        add(packetsSent, traffic.packetsSent)
        add(packetsReceived, traffic.packetsReceived)
        add(retransmissions, traffic.retransmissions)
        add(datagramsLost, traffic.datagramsLost)
    }
}

/// Where Braid's metrics go when not to the bootstrapped `MetricsSystem`: a task-local
/// factory, read where connections and listeners are made (so tests running side by side
/// each count their own connections).
package enum BraidMetrics {
    @TaskLocal package static var factory: (any MetricsFactory)?
}
