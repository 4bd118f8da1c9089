import CBraid
import DequeModule

/// What a connection holds now, for the server's live counts (`QUICServerStatistics`) and for
/// choosing which idle connection to evict when the server is full.
extension QUICConnection {
    /// Streams the engine tracks (open, or finished but not yet read to the end).
    package var streamCount: Int { streams.count }

    /// Bytes the engine holds for the application: stream bytes queued and not yet acknowledged,
    /// stream bytes received and not yet read (a stream with a sink holds none: they are in its
    /// owner's memory), and datagrams waiting to be sent. (ngtcp2's own buffers, such as
    /// out-of-order stream data, are in `engineReceiveBound`.)
    package var bufferedBytes: Int {
        var total = 0
        for stream in streams.values { total += stream.send.unacknowledged + stream.receive.buffered }
        for datagram in pendingDatagrams { total += datagram.bytes.count }
        return total
    }

    /// What a listener's buffer limit counts: the engine's `bufferedBytes`, what the owner
    /// holds outside the engine (`ownerHeldBytes`: sends not yet taken, received stream bytes
    /// and datagrams not yet read), and the most ngtcp2 may hold of received stream bytes it
    /// has not handed over (`engineReceiveBound`: out of order, within what was granted).
    package var heldBytes: Int { bufferedBytes + (ownerHeldBytes?() ?? 0) + engineReceiveBound }

    /// When the last datagram from the peer arrived (or the connection started).
    var lastReceiveTime: QUICInstant { currentTime }

    /// Server: closes an idle connection to make room for a new client, with a transport
    /// CONNECTION_CLOSE of NO_ERROR whose reason says why (RFC 9000 §10.2 allows closing at any
    /// time). The connection then goes through its closing period like any other close.
    func evict(reason: String, now: QUICInstant) {
        close(transportErrorCode: UInt64(NGTCP2_NO_ERROR), reason: reason, now: now)
    }
}
