import CBraid

/// ngtcp2 calls back into C function pointers with `user_data` = the `QUICConnection`.
/// Each callback records what happened (stream state, events) and returns quickly; none calls
/// back into ngtcp2's read/write functions, which the library forbids.
extension QUICConnection {
    static func from(_ userData: UnsafeMutableRawPointer?) -> QUICConnection {
        Unmanaged<QUICConnection>.fromOpaque(userData!).takeUnretainedValue()
    }

    static func callbacks(for role: Role) -> ngtcp2_callbacks {
        var cb = ngtcp2_callbacks()
        if role == .client {
            cb.client_initial = ngtcp2_crypto_client_initial_cb
            cb.recv_retry = ngtcp2_crypto_recv_retry_cb
            cb.recv_new_token = { _, token, userData in
                let connection = QUICConnection.from(userData)
                connection.receivedToken = Array(UnsafeBufferPointer(start: token!.pointee.base, count: token!.pointee.len))
                connection.refreshTicket()
                return 0
            }
            cb.early_data_rejected = { _, userData in
                QUICConnection.from(userData).earlyDataWasRejected()
                return 0
            }
            cb.handshake_confirmed = { _, userData in
                QUICConnection.from(userData).handshakeConfirmed = true
                return 0
            }
        } else {
            cb.recv_client_initial = ngtcp2_crypto_recv_client_initial_cb
        }
        cb.recv_crypto_data = { conn, level, offset, data, length, userData in
            // After `releaseTLSSessionWhenDone` only post-handshake messages can arrive: a
            // server's further tickets, which the client no longer takes.
            guard QUICConnection.from(userData).session != nil else { return 0 }
            return ngtcp2_crypto_recv_crypto_data_cb(conn, level, offset, data, length, userData)
        }
        cb.encrypt = ngtcp2_crypto_encrypt_cb
        cb.decrypt = ngtcp2_crypto_decrypt_cb
        cb.hp_mask = ngtcp2_crypto_hp_mask_cb
        cb.update_key = ngtcp2_crypto_update_key_cb
        cb.delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb
        cb.delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb
        cb.get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb
        cb.version_negotiation = ngtcp2_crypto_version_negotiation_cb
        cb.rand = { dest, length, _ in fillRandom(UnsafeMutableRawBufferPointer(start: dest, count: length)) }
        cb.get_new_connection_id = { _, cid, token, length, userData in
            let connection = QUICConnection.from(userData)
            cid!.pointee = (connection.connectionIDGenerator?.next() ?? ConnectionID.random(length: length)).ngtcp2
            let rc = (connection.serverKeyRing?.current.resetSecret ?? connection.staticSecret).withUnsafeBufferPointer {
                ngtcp2_crypto_generate_stateless_reset_token(token, $0.baseAddress, $0.count, cid)
            }
            guard rc == 0 else { return NGTCP2_ERR_CALLBACK_FAILURE }
            connection.recordRoutingChange(.issued(ConnectionID(cid!.pointee)))
            return 0
        }
        cb.remove_connection_id = { _, cid, userData in
            QUICConnection.from(userData).recordRoutingChange(.retired(ConnectionID(cid!.pointee)))
            return 0
        }
        cb.handshake_completed = { _, userData in
            QUICConnection.from(userData).handshakeCompleted()
        }
        cb.recv_stateless_reset = { _, _, userData in
            QUICConnection.from(userData).receivedStatelessReset = true
            return 0
        }
        cb.stream_open = { _, streamID, userData in
            let connection = QUICConnection.from(userData)
            if connection.streams[streamID] == nil {
                let stream = StreamState(id: streamID)
                stream.openedAt = connection.currentTime
                // Before the stream's first bytes, which ngtcp2 hands over next.
                stream.sink = connection.makeStreamSink?(streamID)
                connection.streams[streamID] = stream
                // A 0-RTT stream opens before the handshake completes; the server has chosen
                // the ALPN by then (from the ClientHello), and the application needs it.
                if connection.negotiatedALPN == nil, let session = connection.session {
                    connection.negotiatedALPN = BraidTLS.negotiatedALPN(session)
                }
                connection.emit(.streamOpened(streamID: streamID))
            }
            return 0
        }
        cb.recv_stream_data = { _, flags, streamID, _, data, length, userData, _ in
            let connection = QUICConnection.from(userData)
            guard let stream = connection.streams[streamID] else { return 0 }
            let early = flags & UInt32(NGTCP2_STREAM_DATA_FLAG_EARLY) != 0
            let bytes = UnsafeRawBufferPointer(start: data, count: length)
            if let sink = stream.sink {
                if length > 0 {
                    sink.receive(bytes)
                    stream.sunkSinceRead += length
                }
            } else {
                stream.receive.append(bytes, early: early)
            }
            let fin = flags & UInt32(NGTCP2_STREAM_DATA_FLAG_FIN) != 0
            if fin { stream.receive.finReceived = true }
            connection.noteDelivered(stream, length: length, fin: fin)
            if early { connection.earlyDataAccepted = true }
            connection.signalReadable(stream)
            return 0
        }
        cb.acked_stream_data_offset = { _, streamID, offset, length, userData, _ in
            let connection = QUICConnection.from(userData)
            guard let stream = connection.streams[streamID] else { return 0 }
            connection.releaseSendBytes(of: stream) { $0.acknowledge(upTo: offset + length) }
            if stream.wantsWritable && stream.send.unacknowledged < connection.transport.streamSendBufferLimit {
                stream.wantsWritable = false
                connection.emit(.streamWritable(streamID: streamID))
            }
            return 0
        }
        cb.stream_close = { _, flags, streamID, code, userData, _ in
            let connection = QUICConnection.from(userData)
            guard let stream = connection.streams[streamID] else { return 0 }
            // ngtcp2 0.12.1 has no callback for a peer's STOP_SENDING (its stream_stop_sending
            // reports our own); the peer's code arrives here when our unfinished send side closes.
            let codeSet = flags & UInt32(NGTCP2_STREAM_CLOSE_FLAG_APP_ERROR_CODE_SET) != 0
            if codeSet, connection.canSendOn(streamID: streamID), !stream.locallyReset,
                stream.receive.resetCode != code, !(stream.send.finSent && stream.send.unacknowledged == 0)
            {
                connection.peerStoppedSending(stream, code: code)
            }
            stream.closedByEngine = true
            stream.scheduled = false
            connection.retireIfDone(stream)
            return 0
        }
        cb.stream_reset = { _, streamID, finalSize, code, userData, _ in
            let connection = QUICConnection.from(userData)
            guard let stream = connection.streams[streamID] else { return 0 }
            stream.receive.resetCode = code
            connection.noteReceiveEndedEarly(stream, finalSize: finalSize)
            // Bytes not yet read are moot; their credit goes back to the connection window.
            connection.returnReceiveCredit(nil, bytes: connection.discardUnread(stream))
            connection.signalReadable(stream)
            return 0
        }
        cb.extend_max_local_streams_bidi = { _, _, userData in
            QUICConnection.from(userData).emit(.streamsAvailable)
            return 0
        }
        cb.extend_max_local_streams_uni = { _, _, userData in
            QUICConnection.from(userData).emit(.streamsAvailable)
            return 0
        }
        cb.extend_max_stream_data = { _, streamID, _, userData, _ in
            let connection = QUICConnection.from(userData)
            guard let stream = connection.streams[streamID] else { return 0 }
            stream.blocked = false
            connection.schedule(stream)
            return 0
        }
        cb.recv_datagram = { _, flags, data, length, userData in
            let connection = QUICConnection.from(userData)
            let early = flags & UInt32(NGTCP2_DATAGRAM_FLAG_EARLY) != 0
            if let sink = connection.datagramSink {
                sink.receive(UnsafeRawBufferPointer(start: data, count: length), early: early)
                if !connection.datagramsReceivedPending {
                    connection.datagramsReceivedPending = true
                    connection.emit(.datagramsReceived)
                }
            } else {
                connection.emit(.datagramReceived(bytes: Array(UnsafeBufferPointer(start: data, count: length)), early: early))
            }
            return 0
        }
        cb.ack_datagram = { _, id, userData in
            let connection = QUICConnection.from(userData)
            connection.datagramProbe.datagramResolved()
            connection.datagramSettled(.datagramAcknowledged(id: id))
            return 0
        }
        cb.lost_datagram = { _, id, userData in
            let connection = QUICConnection.from(userData)
            connection.counters.datagramLost()
            connection.datagramProbe.datagramResolved()
            connection.datagramSettled(.datagramLost(id: id))
            return 0
        }
        return cb
    }
}
