import CBraid

extension QUICConnection {
    /// Snapshot of transport counters.
    package var statistics: QUICConnectionStatistics {
        var stat = ngtcp2_conn_stat()
        if !isTerminated { braid_ngtcp2_conn_get_conn_stat(conn, &stat) }
        return QUICConnectionStatistics(
            smoothedRTT: Duration(ngtcp2Duration: stat.smoothed_rtt), minRTT: Duration(ngtcp2Duration: stat.min_rtt),
            latestRTT: Duration(ngtcp2Duration: stat.latest_rtt), congestionWindow: stat.cwnd,
            bytesInFlight: stat.bytes_in_flight, packetsSent: counters.packetsSent, bytesSent: counters.bytesSent,
            packetsReceived: counters.packetsReceived, bytesReceived: counters.bytesReceived,
            datagramsLost: counters.datagramsLost, transmits: counters.transmits, probeTimeouts: counters.probeTimeouts)
    }

    /// ngtcp2's count of probe timeouts since the last acknowledgement.
    var probeTimeoutCount: Int {
        var stat = ngtcp2_conn_stat()
        braid_ngtcp2_conn_get_conn_stat(conn, &stat)
        return stat.pto_count
    }
}

/// Transport counters of one connection.
package struct QUICConnectionStatistics: Sendable, Hashable {
    package var smoothedRTT: Duration
    package var minRTT: Duration
    package var latestRTT: Duration
    package var congestionWindow: UInt64
    package var bytesInFlight: UInt64
    /// UDP datagrams and bytes handed out by `writeTransmits` / taken in by `receive`.
    package var packetsSent: UInt64
    package var bytesSent: UInt64
    package var packetsReceived: UInt64
    package var bytesReceived: UInt64
    /// RFC 9221 datagrams declared lost.
    package var datagramsLost: UInt64
    /// Batches (potential GSO sends) written.
    package var transmits: UInt64
    /// Probe timeouts (RFC 9002 §6.2) while `QUICConnection.countsProbeTimeouts` was set.
    package var probeTimeouts: UInt64 = 0
}
