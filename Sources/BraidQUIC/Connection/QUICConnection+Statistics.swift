import CBraid

extension QUICConnection {
    /// Snapshot of transport counters.
    public var statistics: QUICConnectionStatistics {
        var stat = ngtcp2_conn_stat()
        if !isTerminated { braid_ngtcp2_conn_get_conn_stat(conn, &stat) }
        return QUICConnectionStatistics(
            smoothedRTT: Duration(ngtcp2Duration: stat.smoothed_rtt), minRTT: Duration(ngtcp2Duration: stat.min_rtt),
            latestRTT: Duration(ngtcp2Duration: stat.latest_rtt), congestionWindow: stat.cwnd,
            bytesInFlight: stat.bytes_in_flight, packetsSent: counters.packetsSent, bytesSent: counters.bytesSent,
            packetsReceived: counters.packetsReceived, bytesReceived: counters.bytesReceived,
            datagramsLost: counters.datagramsLost, transmits: counters.transmits)
    }
}

/// Transport counters of one connection.
public struct QUICConnectionStatistics: Sendable, Hashable {
    public var smoothedRTT: Duration
    public var minRTT: Duration
    public var latestRTT: Duration
    public var congestionWindow: UInt64
    public var bytesInFlight: UInt64
    /// UDP datagrams and bytes handed out by `writeTransmits` / taken in by `receive`.
    public var packetsSent: UInt64
    public var bytesSent: UInt64
    public var packetsReceived: UInt64
    public var bytesReceived: UInt64
    /// RFC 9221 datagrams declared lost.
    public var datagramsLost: UInt64
    /// Batches (potential GSO sends) written.
    public var transmits: UInt64
}
