/// A server endpoint's live counts and counters (`QUICServerEndpoint.statistics`): what its
/// limits bound now, and what it answered by itself so far.
package struct QUICServerStatistics: Sendable, Hashable {
    /// Live connections, half-open ones included (bounded by `maxConnections`).
    package var connections = 0
    /// Connections whose handshake has not completed (bounded by `maxHalfOpenConnections`).
    package var halfOpenConnections = 0
    /// Streams the connections' engines track.
    package var streams = 0
    /// Stream and datagram bytes the connections' engines hold (`QUICConnection.bufferedBytes`).
    package var bufferedBytes = 0
    /// A client without a token gets a Retry now.
    package var isRetryActive = false
    package var retriesSent = 0
    /// Clients refused with CONNECTION_REFUSED (a limit was reached, or the server stopped accepting).
    package var refusedConnections = 0
    /// Idle connections closed to make room for a new client.
    package var evictedConnections = 0
    package var statelessResetsSent = 0
    package var versionNegotiationsSent = 0
    package var droppedDatagrams = 0

    package init(
        connections: Int = 0, halfOpenConnections: Int = 0, streams: Int = 0, bufferedBytes: Int = 0,
        isRetryActive: Bool = false, retriesSent: Int = 0, refusedConnections: Int = 0, evictedConnections: Int = 0,
        statelessResetsSent: Int = 0, versionNegotiationsSent: Int = 0, droppedDatagrams: Int = 0
    ) {
        self.connections = connections
        self.halfOpenConnections = halfOpenConnections
        self.streams = streams
        self.bufferedBytes = bufferedBytes
        self.isRetryActive = isRetryActive
        self.retriesSent = retriesSent
        self.refusedConnections = refusedConnections
        self.evictedConnections = evictedConnections
        self.statelessResetsSent = statelessResetsSent
        self.versionNegotiationsSent = versionNegotiationsSent
        self.droppedDatagrams = droppedDatagrams
    }

    /// Two endpoints' figures together (a listener's loops).
    package static func + (lhs: Self, rhs: Self) -> Self {
        Self(
            connections: lhs.connections + rhs.connections, halfOpenConnections: lhs.halfOpenConnections + rhs.halfOpenConnections,
            streams: lhs.streams + rhs.streams, bufferedBytes: lhs.bufferedBytes + rhs.bufferedBytes,
            isRetryActive: lhs.isRetryActive || rhs.isRetryActive, retriesSent: lhs.retriesSent + rhs.retriesSent,
            refusedConnections: lhs.refusedConnections + rhs.refusedConnections,
            evictedConnections: lhs.evictedConnections + rhs.evictedConnections,
            statelessResetsSent: lhs.statelessResetsSent + rhs.statelessResetsSent,
            versionNegotiationsSent: lhs.versionNegotiationsSent + rhs.versionNegotiationsSent,
            droppedDatagrams: lhs.droppedDatagrams + rhs.droppedDatagrams)
    }
}
