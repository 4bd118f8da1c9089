import CBraid

/// Unreliable datagrams (RFC 9221): the send queue, the size limit, and the probe that keeps
/// a datagram-only flight from stalling.
extension QUICConnection {
    /// A datagram queued by `sendDatagram`: its ID and its payload as the sender gave it. (A
    /// struct, not a tuple: the send path copies the queue's first entry per packet, and a
    /// struct's copy is direct code where a tuple's goes through generic value witnesses.)
    struct PendingDatagram {
        let id: UInt64
        let bytes: any QUICDatagramPayload
    }

    /// Largest datagram payload that can be sent now (0 if the peer did not enable datagrams).
    package var maxDatagramPayloadSize: Int {
        guard !isClosed, let params = ngtcp2_conn_get_remote_transport_params(conn)?.pointee,
            params.max_datagram_frame_size > 0
        else { return 0 }
        // Frame: type (1) + length varint (up to 4 for our sizes). Packet: short header (1 + DCID
        // up to 20 + packet number up to 4) + AEAD tag (16).
        let frameLimit = Int(min(params.max_datagram_frame_size, 65535)) - 5
        // The current path's packet size, not the configured maximum: until path-MTU
        // discovery raises it, packets are 1,200 bytes and a larger datagram would never fit.
        let packetLimit = ngtcp2_conn_get_path_max_tx_udp_payload_size(conn) - 1 - 20 - 4 - 16 - 5
        return max(0, min(frameLimit, packetLimit))
    }

    /// Queues an unreliable datagram (RFC 9221). Returns its ID for `.datagramAcknowledged` /
    /// `.datagramLost`. Throws `datagramTooLarge` or `datagramsNotSupported` instead of dropping.
    @discardableResult
    package func sendDatagram<Bytes: Collection>(_ bytes: Bytes) throws -> UInt64 where Bytes.Element == UInt8 {
        // One memcpy when the bytes are contiguous (Data, arrays), not a generic copy loop.
        try sendDatagram(payload: bytes.withContiguousStorageIfAvailable { Array($0) } ?? Array(bytes))
    }

    /// Queues a datagram as it is, without copying it: the engine holds `payload` until it is
    /// written into a packet. Returns its ID; throws as `sendDatagram(_:)` does.
    @discardableResult
    package func sendDatagram(payload: some QUICDatagramPayload) throws -> UInt64 {
        try ensureOpen()
        let maximum = maxDatagramPayloadSize
        if maximum == 0 {
            if ngtcp2_conn_get_remote_transport_params(conn) == nil {
                throw QUICError.invalidState("datagrams can be sent once the handshake has progressed")
            }
            throw QUICError.datagramsNotSupported
        }
        guard payload.count <= maximum else { throw QUICError.datagramTooLarge(size: payload.count, maximum: maximum) }
        let id = nextDatagramID
        nextDatagramID += 1
        pendingDatagrams.append(PendingDatagram(id: id, bytes: payload))
        pendingDatagramHighWater = max(pendingDatagramHighWater, pendingDatagrams.count)
        return id
    }

    /// Datagrams queued by `sendDatagram` and not yet written into a packet.
    package var pendingDatagramCount: Int { pendingDatagrams.count }

    /// The most datagrams that have waited in the queue at once, over the connection's life:
    /// shows whether a sender's bound on the queue held (a sampled count can miss the peak).
    package var largestPendingDatagramCount: Int { pendingDatagramHighWater }

    /// Reports a sent datagram's outcome (`datagramAcknowledged` or `datagramLost`), or folds
    /// it into one `datagramsSettled` (`reportsEachDatagramOutcome`).
    func datagramSettled(_ outcome: QUICEvent) {
        if reportsEachDatagramOutcome {
            emit(outcome)
        } else if !datagramsSettledPending {
            datagramsSettledPending = true
            emit(.datagramsSettled)
        }
    }

    // MARK: - Datagram probe (see `DatagramProbe`)

    /// Sets ngtcp2's keep-alive to what the probe wants now; after every input and write.
    func updateDatagramProbe() {
        guard conn != nil, !isClosed else { return }
        if let keepAlive = datagramProbe.keepAliveChange(pto: ngtcp2_conn_get_pto(conn)) {
            ngtcp2_conn_set_keep_alive_timeout(conn, keepAlive)
        }
    }

    /// Whether the next datagram may take the congestion window (`DatagramProbe.windowAllows`).
    var datagramWindowAllows: Bool {
        DatagramProbe.windowAllows(
            congestionWindowLeft: ngtcp2_conn_get_cwnd_left(conn),
            packetSize: UInt64(ngtcp2_conn_get_path_max_tx_udp_payload_size(conn)))
    }
}
