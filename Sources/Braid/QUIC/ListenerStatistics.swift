import BraidIO
import BraidQUIC
import BraidQUICIO

/// A QUIC listener's live counts (what its limits bound now) and what it refused so far,
/// across all its server loops (`NetworkListener.statistics`). Apple's Network.framework has
/// no such API; these are Braid's, so tests and operators can watch objects instead of memory.
///
/// ```swift
/// if let now = await listener.statistics {
///     print("\(now.connections) connections, \(now.halfOpenHandshakes) handshakes in progress")
/// }
/// ```
public struct ListenerStatistics: Sendable, Hashable {
    /// Live connections, handshakes in progress included (bounded by `newConnectionLimit`).
    public var connections: Int
    /// Connections whose handshake has not completed (bounded by `QUIC.halfOpenHandshakeLimit`).
    public var halfOpenHandshakes: Int
    /// Streams open (or finished but not yet read to the end) on all connections.
    public var streams: Int
    /// Stream and datagram bytes the connections' engines hold: sent and not yet acknowledged,
    /// received and not yet read (only HTTP/3's: other streams' received bytes wait in the
    /// streams themselves), datagrams waiting to go out.
    public var bufferedBytes: Int
    /// New clients without a token are asked to prove their address with Retry now (`retry(true)`,
    /// or the listener turned it on by itself under load).
    public var isRetryActive: Bool
    /// Retry packets sent so far.
    public var retriesSent: Int
    /// Clients refused so far because a limit was reached, or because `run` was cancelled (they
    /// see `NetworkError.serverBusy`).
    public var refusedConnections: Int
    /// Idle connections closed so far to make room for new clients at `newConnectionLimit`.
    public var evictedConnections: Int

    /// The figures of every loop's endpoint, read on its loop; nil once the group is closed.
    init?(summing group: QUICServerGroup) async {
        var total = QUICServerStatistics()
        for driver in group.drivers {
            guard let figures = try? await driver.loop.submit({ _ in driver.value.statistics }) else { return nil }
            total = total + figures
        }
        self.init(total)
    }

    init(_ server: QUICServerStatistics) {
        connections = server.connections
        halfOpenHandshakes = server.halfOpenConnections
        streams = server.streams
        bufferedBytes = server.bufferedBytes
        isRetryActive = server.isRetryActive
        retriesSent = server.retriesSent
        refusedConnections = server.refusedConnections
        evictedConnections = server.evictedConnections
    }
}
