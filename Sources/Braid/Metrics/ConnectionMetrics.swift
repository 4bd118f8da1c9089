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
    private let retransmittedSegments: Counter
    private let probeTimeouts: Counter
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
        retransmittedSegments = counter("braid_retransmitted_segments_total")
        probeTimeouts = counter("braid_probe_timeouts_total")
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
            if let existing = made[stack]?.first(where: { isSame($0.factory, factory) }) { return existing }
            let reporter = ConnectionMetrics(factory: factory, stack: stack, role: .client, listener: "")
            made[stack, default: []].append(reporter)
            if made[stack]!.count > recentFactories { made[stack]!.removeFirst() }
            return reporter
        }
    }

    /// The client reporters of the last few factories per stack (a process has one backend;
    /// tests set one each, side by side).
    private static let clients = Locked<[String: [ConnectionMetrics]]>([:])
    private static let recentFactories = 8

    /// Whether two factories are one backend: the same object for classes; for value types
    /// (a struct wrapping a backend that lives elsewhere), equal values when the type is
    /// `Equatable`, else the same type (swift-metrics bootstraps one factory per process, so
    /// a value of the bootstrapped type is that backend). Boxing a struct for an identity
    /// check would make a new box, and a new reporter, every time.
    static func isSame(_ a: any MetricsFactory, _ b: any MetricsFactory) -> Bool {
        guard ObjectIdentifier(type(of: a)) == ObjectIdentifier(type(of: b)) else { return false }
        if type(of: a) is AnyObject.Type { return (a as AnyObject) === (b as AnyObject) }
        if let equatable = a as? any Equatable { return equal(equatable, b) }
        return true
    }

    private static func equal<T: Equatable>(_ a: T, _ b: Any) -> Bool { (b as? T) == a }

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
        add(retransmittedSegments, traffic.retransmittedSegments)
        add(probeTimeouts, traffic.probeTimeouts)
        add(datagramsLost, traffic.datagramsLost)
    }
}

/// Where Braid's metrics go when not to the bootstrapped `MetricsSystem`: a task-local
/// factory, read where connections and listeners are made (so tests running side by side
/// each count their own connections).
package enum BraidMetrics {
    @TaskLocal package static var factory: (any MetricsFactory)?
}
