import CBraid
import DequeModule
#if canImport(Glibc)
import Glibc
#endif

/// Output: packets written by ngtcp2 into GSO batches (same path, ECN and size, the last one
/// may be shorter), straight into the caller's memory (or, for callers that give none, a batch buffer of its own).
extension QUICConnection {
    /// Writes every packet that may go out now into batches and hands each batch to `sink`:
    /// (path, ECN, segment size, bytes). The bytes are valid only during the call.
    /// At most `maxSegments` packets per batch (GSO limit) and `maxBatches` batches per call.
    package func writeTransmits(
        now: QUICInstant, maxSegments: Int = QUICConnection.maxSegmentsPerBatch, maxBatches: Int = .max,
        _ sink: (QUICPath, ECN, Int, UnsafeRawBufferPointer) -> Void
    ) {
        let batch = batchStorage ?? .allocate(byteCount: Self.maxBatchBytes + maxPacketSize, alignment: 16)
        batchStorage = batch
        writeTransmits(now: now, maxSegments: maxSegments, maxBatches: maxBatches, into: { batch }) { path, ecn, segmentSize, length in
            sink(path, ecn, segmentSize, UnsafeRawBufferPointer(rebasing: batch[0..<length]))
        }
    }

    /// Like `writeTransmits(now:maxSegments:maxBatches:_:)`, but each batch is written straight
    /// into memory the caller owns, so the packets are not copied again on their way to the
    /// socket: `slot` gives the memory for the next batch (at least `maxBatchBytes` bytes; nil
    /// stops writing), and `commit` reports what went into it: (path, ECN, segment size, length).
    package func writeTransmits(
        now: QUICInstant, maxSegments: Int = QUICConnection.maxSegmentsPerBatch, maxBatches: Int = .max,
        into slot: () -> UnsafeMutableRawBufferPointer?, commit: (QUICPath, ECN, Int, Int) -> Void
    ) {
        switch phase {
        case .terminated, .draining:
            return
        case .closing:
            if closePacket.isPending, let buffer = slot() {
                closePacket.markSent()
                let packet = closePacket.packet
                packet.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: buffer[0..<$0.count]).copyMemory(from: $0) }
                commit(path, .notECT, packet.count, packet.count)
                counters.sent(packets: 1, bytes: packet.count)
            }
            return
        case .handshaking, .established:
            break
        }
        let segmentLimit = min(max(maxSegments, 1), Self.maxSegmentsPerBatch)
        let packetSize = ngtcp2_conn_get_path_max_tx_udp_payload_size(conn)
        // Room for the largest packet ngtcp2 may write, not just the path's current size:
        // a path-MTU probe is larger than the path's packets, and ngtcp2 skips a probe that
        // does not fit, so with room for only the path's size it never raises it. (Other
        // packets stay at the path's size: ngtcp2 shapes them.)
        let packetRoom = max(packetSize, ngtcp2_conn_get_max_tx_udp_payload_size(conn))
        let quantum = max(1, ngtcp2_conn_get_send_quantum(conn) / max(packetSize, 1))
        var budget = min(quantum, segmentLimit * min(maxBatches, 1 << 20))
        var batches = 0

        while budget > 0 && batches < maxBatches && !isClosed {
            guard let buffer = slot() else { break }
            // Assemble one batch.
            var length = 0
            var segmentSize = 0
            var count = 0
            var batchPath: QUICPath?
            var batchECN = ECN.notECT
            if let held = heldPacket, let storage = heldPacketStorage {
                // The held packet starts this batch.
                buffer.baseAddress!.copyMemory(from: storage.baseAddress!, byteCount: held.length)
                heldPacket = nil
                length = held.length
                segmentSize = held.length
                count = 1
                batchPath = held.path
                batchECN = held.ecn
                budget -= 1
            }
            var batchClosed = false
            // A GSO send is one UDP datagram to the kernel: its payload must stay under 64 KiB.
            while count < segmentLimit && budget > 0 && !batchClosed && length + packetRoom <= Self.maxBatchBytes {
                let room = min(packetRoom, buffer.count - length)
                guard let packet = writePacket(into: buffer.baseAddress! + length, capacity: room, now: now) else { break }
                budget -= 1
                if count > 0 && (packet.path != batchPath || packet.ecn != batchECN || packet.length > segmentSize) {
                    // It starts the next batch, which may be written into other memory: it
                    // waits aside (a copy of one packet, only where a batch breaks).
                    holdPacket(from: buffer.baseAddress! + length, packet)
                    batchClosed = true
                    break
                }
                if count == 0 {
                    segmentSize = packet.length
                    batchPath = packet.path
                    batchECN = packet.ecn
                }
                length += packet.length
                count += 1
                // A short packet can only be the last of a GSO batch.
                if packet.length < segmentSize { batchClosed = true }
            }
            guard count > 0, let batchPath else { break }
            commit(batchPath, batchECN, segmentSize, length)
            counters.sentBatch(packets: count, bytes: length)
            datagramProbe.noteActivity(at: now)
            batches += 1
            if !batchClosed && heldPacket == nil && count < segmentLimit { break }
        }
        if !isClosed {
            // Pacing starts once the handshake is complete. Before that the only RTT is the
            // 333 ms initial guess, which spaces the client's Finished ~21 ms after its Initial
            // even on loopback; handshake flights are small and capped by the amplification
            // limit and the initial window anyway.
            if isEstablished { ngtcp2_conn_update_pkt_tx_time(conn, now.nanoseconds) }
            updateDatagramProbe()
        }
    }

    private func holdPacket(from bytes: UnsafeRawPointer, _ packet: (length: Int, path: QUICPath, ecn: ECN)) {
        if let storage = heldPacketStorage, storage.count < packet.length {
            storage.deallocate()
            heldPacketStorage = nil
        }
        let storage = heldPacketStorage ?? .allocate(byteCount: max(maxPacketSize, packet.length), alignment: 16)
        heldPacketStorage = storage
        storage.baseAddress!.copyMemory(from: bytes, byteCount: packet.length)
        heldPacket = (packet.length, packet.path, packet.ecn)
    }

    /// Convenience for tests and simple owners: the batches `writeTransmits` produces, copied.
    package func pollTransmits(now: QUICInstant, maxSegments: Int = QUICConnection.maxSegmentsPerBatch) -> [Transmit] {
        var out: [Transmit] = []
        writeTransmits(now: now, maxSegments: maxSegments) { path, ecn, segmentSize, bytes in
            out.append(Transmit(path: path, ecn: ecn, segmentSize: segmentSize, bytes: Array(bytes)))
        }
        return out
    }

    /// Writes one QUIC packet (coalescing stream frames from several streams, datagrams, ACKs
    /// and control frames) into `dest`. Nil when nothing may be sent now.
    private func writePacket(into dest: UnsafeMutableRawPointer, capacity: Int, now: QUICInstant)
        -> (length: Int, path: QUICPath, ecn: ECN)?
    {
        let buffer = dest.assumingMemoryBound(to: UInt8.self)
        var info = ngtcp2_pkt_info()
        ngtcp2_path_storage_zero(pathStorage)
        let path = writePath
        var rotations = 0
        // Datagram frames already in this packet, with their frames' least overhead.
        var datagramBytesInPacket = 0
        while true {
            // 1. Datagrams first: they are latency-sensitive and never retransmitted.
            if let datagram = pendingDatagrams.first {
                if datagram.bytes.count > maxDatagramPayloadSize {
                    // It fitted when queued, but the path's packets shrank (e.g. after migration).
                    pendingDatagrams.removeFirst()
                    counters.datagramLost()
                    datagramSettled(.datagramLost(id: datagram.id))
                    continue
                }
                if datagramWindowAllows {
                    // The packet stays open for more (WRITE_MORE) only when something else may
                    // share it: without that, ngtcp2 finishes it in this call, instead of in a
                    // second call that offers it a datagram too large for what is left.
                    let count = datagram.bytes.count
                    let more = !sendSchedule.isEmpty || nextDatagramMayShare(after: datagramBytesInPacket + count + 2, capacity: capacity)
                    var accepted: Int32 = 0
                    let written = datagram.bytes.withUnsafeBytes { bytes -> Int in
                        var vec = ngtcp2_vec(
                            base: UnsafeMutablePointer(mutating: bytes.baseAddress?.assumingMemoryBound(to: UInt8.self)), len: bytes.count)
                        return braid_ngtcp2_conn_writev_datagram(
                            conn, path, &info, buffer, capacity, &accepted,
                            UInt32(more ? NGTCP2_WRITE_DATAGRAM_FLAG_MORE : NGTCP2_WRITE_DATAGRAM_FLAG_NONE), datagram.id, &vec, 1,
                            now.nanoseconds)
                    }
                    if accepted != 0 {
                        pendingDatagrams.removeFirst()
                        datagramProbe.datagramSent()
                        datagramBytesInPacket += count + 2
                    }
                    if written == Int(NGTCP2_ERR_WRITE_MORE) { continue }
                    if written > 0 { return (written, QUICPath(path.pointee), ECN(bits: info.ecn)) }
                    if written == 0 { return nil }
                    if written == Int(NGTCP2_ERR_INVALID_ARGUMENT) || written == Int(NGTCP2_ERR_INVALID_STATE) {
                        // Too large for the peer's limit or datagrams not negotiated: checked on
                        // enqueue, so only reachable if the peer changed its mind; drop it.
                        pendingDatagrams.removeFirst()
                        counters.datagramLost()
                        datagramSettled(.datagramLost(id: datagram.id))
                        continue
                    }
                    handleWriteError(Int32(written), now: now)
                    return nil
                }
            }
            // 2. Stream data, round-robin across streams with unsent bytes.
            // After one full rotation without filling the packet, finish it without stream data.
            var streamID: Int64 = -1
            var vecCount = 0
            var flags = UInt32(NGTCP2_WRITE_STREAM_FLAG_NONE)
            var stream: StreamState?
            if rotations < sendSchedule.count, let state = sendSchedule.first {
                // A stream that left the schedule (done, blocked, reset, retired) is dropped here.
                guard state.scheduled else {
                    sendSchedule.removeFirst()
                    sendTurnBytes = 0
                    continue
                }
                stream = state
                streamID = state.id
                if sendTurnBytes == 0 { sendTurnLimit = streamTurnLimit() }
                flags = UInt32(NGTCP2_WRITE_STREAM_FLAG_MORE)
                state.send.unsentRegions(limit: Self.maxVecs) { base, count in
                    vecs[vecCount] = ngtcp2_vec(base: UnsafeMutablePointer(mutating: base.assumingMemoryBound(to: UInt8.self)), len: count)
                    vecCount += 1
                }
                if state.send.finQueued && !state.send.finSent { flags |= UInt32(NGTCP2_WRITE_STREAM_FLAG_FIN) }
            }
            var accepted: ngtcp2_ssize = -1
            let written = braid_ngtcp2_conn_writev_stream(
                conn, path, &info, buffer, capacity, &accepted, flags, streamID, vecs.baseAddress, vecCount, now.nanoseconds)
            if let stream, accepted >= 0 {
                stream.send.markSent(accepted)
                sendTurnBytes += accepted
                if flags & UInt32(NGTCP2_WRITE_STREAM_FLAG_FIN) != 0 && stream.send.unsentCount == 0 {
                    stream.send.finSent = true
                }
            }
            if let stream, written > 0, stream.send.hasUnsent, sendTurnBytes < sendTurnLimit {
                // The packet is full and the stream's turn is not over: it starts the next one.
            } else if let stream {
                // Rotate: this stream goes to the back, or leaves the schedule when done/blocked.
                sendSchedule.removeFirst()
                sendTurnBytes = 0
                if written == Int(NGTCP2_ERR_STREAM_DATA_BLOCKED) {
                    stream.blocked = true
                    stream.scheduled = false
                } else if written == Int(NGTCP2_ERR_STREAM_SHUT_WR) || written == Int(NGTCP2_ERR_STREAM_NOT_FOUND) {
                    stream.scheduled = false
                    // We did not shut it: the peer's STOP_SENDING did (code not known yet).
                    if !stream.locallyReset { peerStoppedSending(stream, code: nil) }
                } else if stream.send.hasUnsent {
                    sendSchedule.append(stream)
                    rotations += 1
                } else {
                    stream.scheduled = false
                }
            }
            switch written {
            case Int(NGTCP2_ERR_WRITE_MORE), Int(NGTCP2_ERR_STREAM_DATA_BLOCKED), Int(NGTCP2_ERR_STREAM_SHUT_WR),
                Int(NGTCP2_ERR_STREAM_NOT_FOUND):
                continue
            case 1...:
                return (written, QUICPath(path.pointee), ECN(bits: info.ecn))
            case 0:
                return nil
            default:
                handleWriteError(Int32(written), now: now)
                return nil
            }
        }
    }

    /// The bytes a stream starting its turn may send: `streamSendQuantum`, or less when the
    /// busy streams' equal shares of the congestion window are smaller (at least a packet), so
    /// that on a slow path every busy stream still gets a turn in each window's worth of
    /// packets and a short message waits about one round trip, not one quantum per stream.
    private func streamTurnLimit() -> Int {
        var stat = ngtcp2_conn_stat()
        braid_ngtcp2_conn_get_conn_stat(conn, &stat)
        let share = Int(clamping: stat.cwnd) / max(1, sendSchedule.count)
        return min(Self.streamSendQuantum, max(maxPacketSize, share))
    }

    /// Whether the datagram queued after the first may go into the same packet, where `used`
    /// bytes of datagram frames are (the first's included): false only when the frames cannot
    /// fit together even in a packet of `capacity` bytes with the shortest header (one byte,
    /// no connection ID, a one-byte packet number) and each frame's length in one byte.
    private func nextDatagramMayShare(after used: Int, capacity: Int) -> Bool {
        guard pendingDatagrams.count > 1 else { return false }
        let next = pendingDatagrams[pendingDatagrams.index(after: pendingDatagrams.startIndex)].bytes.count
        return used + next + 2 <= capacity - 2 - Self.aeadTagLength
    }

    /// Every AEAD QUIC v1 uses (AES-GCM, ChaCha20-Poly1305, AES-CCM) adds a 16-byte tag.
    private static let aeadTagLength = 16

    /// `path` is the first member of `ngtcp2_path_storage`; ngtcp2 copies the packet's path into it.
    var writePath: UnsafeMutablePointer<ngtcp2_path> {
        UnsafeMutableRawPointer(pathStorage).assumingMemoryBound(to: ngtcp2_path.self)
    }
}
