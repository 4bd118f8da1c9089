import BraidCore
import CBraid

/// nghttp3 calls back into C function pointers with the connection's user data = the
/// `HTTP3Connection`. Each callback records what happened (events, actions, stream state) and
/// returns; none calls nghttp3 again (work that must, waits for `afterRead`).
extension HTTP3Connection {
    static func from(_ userData: UnsafeMutableRawPointer?) -> HTTP3Connection {
        Unmanaged<HTTP3Connection>.fromOpaque(userData!).takeUnretainedValue()
    }

    static func callbacks() -> nghttp3_callbacks {
        var cb = nghttp3_callbacks()
        cb.acked_stream_data = { _, streamID, length, userData, _ in
            HTTP3Connection.from(userData).releaseChunks(streamID: streamID, count: Int(length))
            return 0
        }
        cb.stream_close = { _, streamID, _, userData, _ in
            HTTP3Connection.from(userData).forget(streamID: streamID)
            return 0
        }
        cb.recv_data = { _, streamID, data, length, userData, _ in
            let connection = HTTP3Connection.from(userData)
            if let stream = connection.streams[streamID], stream.receiveEnded { return 0 }
            let bytes = Array(UnsafeBufferPointer(start: data, count: length))
            connection.events.append(.body(streamID: streamID, bytes: bytes))
            return 0
        }
        cb.deferred_consume = { _, streamID, consumed, userData, _ in
            HTTP3Connection.from(userData).actions.append(.returnCredit(streamID: streamID, bytes: consumed))
            return 0
        }
        cb.begin_headers = { _, streamID, userData, _ in
            HTTP3Connection.from(userData).beginFieldSection(streamID: streamID)
            return 0
        }
        cb.recv_header = { _, streamID, _, name, value, _, userData, _ in
            HTTP3Connection.from(userData).receiveField(streamID: streamID, name: name, value: value)
            return 0
        }
        cb.end_headers = { _, streamID, _, userData, _ in
            HTTP3Connection.from(userData).endFieldSection(streamID: streamID, trailers: false)
            return 0
        }
        cb.begin_trailers = { _, streamID, userData, _ in
            HTTP3Connection.from(userData).beginFieldSection(streamID: streamID)
            return 0
        }
        cb.recv_trailer = { _, streamID, _, name, value, _, userData, _ in
            HTTP3Connection.from(userData).receiveField(streamID: streamID, name: name, value: value)
            return 0
        }
        cb.end_trailers = { _, streamID, _, userData, _ in
            HTTP3Connection.from(userData).endFieldSection(streamID: streamID, trailers: true)
            return 0
        }
        cb.stop_sending = { _, streamID, code, userData, _ in
            HTTP3Connection.from(userData).actions.append(.stopSending(streamID: streamID, code: HTTP3ErrorCode(code: code)))
            return 0
        }
        cb.end_stream = { _, streamID, userData, _ in
            let connection = HTTP3Connection.from(userData)
            if let stream = connection.streams[streamID] {
                guard !stream.receiveEnded else { return 0 }
                stream.receiveEnded = true
            }
            connection.events.append(.endOfMessage(streamID: streamID))
            return 0
        }
        cb.reset_stream = { _, streamID, code, userData, _ in
            let connection = HTTP3Connection.from(userData)
            let error = HTTP3ErrorCode(code: code)
            connection.actions.append(.resetStream(streamID: streamID, code: error))
            // nghttp3 resets a stream itself for a malformed message (H3_MESSAGE_ERROR) or one
            // past our GOAWAY (H3_REQUEST_REJECTED, never seen by the application).
            connection.streams[streamID]?.sendAborted = true
            if let stream = connection.streams[streamID], !stream.receiveEnded {
                stream.receiveEnded = true
                stream.body = nil
                connection.events.append(.streamError(streamID: streamID, code: error))
            }
            return 0
        }
        cb.shutdown = { _, id, userData in
            HTTP3Connection.from(userData).receivedGoaways.append(id)
            return 0
        }
        return cb
    }

    /// A header or trailer section starts; a server sees a new request here.
    func beginFieldSection(streamID: Int64) {
        let stream: StreamState
        if let known = streams[streamID] {
            guard !known.receiveEnded else { return }
            stream = known
        } else {
            stream = StreamState(id: streamID)
            streams[streamID] = stream
        }
        stream.fields.removeAll()
        stream.fieldSectionSize = 0
        stream.oversized = false
        sectionStream = stream
    }

    /// The stream whose field section nghttp3 is reading: the one `beginFieldSection` found,
    /// without a lookup per field.
    func fieldSectionStream(_ streamID: Int64) -> StreamState? {
        if let stream = sectionStream, stream.id == streamID { return stream }
        return streams[streamID]
    }

    /// One field; past `maxFieldSectionSize` the section is marked and no more is kept.
    func receiveField(streamID: Int64, name: OpaquePointer?, value: OpaquePointer?) {
        guard let stream = fieldSectionStream(streamID), !stream.oversized else { return }
        let nameBuffer = nghttp3_rcbuf_get_buf(name)
        let valueBuffer = nghttp3_rcbuf_get_buf(value)
        stream.fieldSectionSize += nameBuffer.len + valueBuffer.len + 32
        if stream.fieldSectionSize > configuration.maxFieldSectionSize {
            stream.oversized = true
            stream.receiveEnded = true
            stream.fields.removeAll()
            oversizedStreams.append(streamID)
            return
        }
        let nameText = String(decoding: UnsafeBufferPointer(start: nameBuffer.base, count: nameBuffer.len), as: UTF8.self)
        let valueBytes = Array(UnsafeBufferPointer(start: valueBuffer.base, count: valueBuffer.len))
        // Room for a typical section at once, rather than growing field by field.
        if stream.fields.isEmpty { stream.fields.reserveCapacity(8) }
        stream.fields.append(HTTP3Field(name: nameText, value: valueBytes))
    }

    func endFieldSection(streamID: Int64, trailers: Bool) {
        guard let stream = fieldSectionStream(streamID) else { return }
        sectionStream = nil
        guard !stream.oversized, !stream.receiveEnded else { return }
        let fields = stream.fields
        stream.fields = []
        events.append(trailers ? .trailers(streamID: streamID, fields: fields) : .headers(streamID: streamID, fields: fields))
    }

    /// Body bytes nghttp3 no longer needs (written, and so acknowledged to it at once).
    func releaseChunks(streamID: Int64, count: Int) {
        guard let stream = streams[streamID] else { return }
        var left = count
        while left > 0, let first = stream.chunks.first {
            let remaining = first.range.count - stream.chunkHead
            if left >= remaining {
                stream.chunks.removeFirst()
                stream.chunkHead = 0
                left -= remaining
            } else {
                stream.chunkHead += left
                left = 0
            }
        }
    }

    /// Work nghttp3's callbacks left for after the read: streams with oversized header
    /// sections end with H3_EXCESSIVE_LOAD; a GOAWAY rejects the requests above its ID.
    func afterRead() {
        for streamID in oversizedStreams {
            guard let conn, let stream = streams[streamID] else { continue }
            stream.body = nil
            stream.sendAborted = true
            nghttp3_conn_shutdown_stream_read(conn, streamID)
            nghttp3_conn_shutdown_stream_write(conn, streamID)
            actions.append(.stopSending(streamID: streamID, code: .excessiveLoad))
            actions.append(.resetStream(streamID: streamID, code: .excessiveLoad))
            events.append(.streamError(streamID: streamID, code: .excessiveLoad))
        }
        oversizedStreams.removeAll()
        let goaways = receivedGoaways
        receivedGoaways.removeAll()
        for id in goaways {
            peerGoawayID = min(id, peerGoawayID ?? id)
            events.append(.goaway(id: id))
            if role == .client {
                for stream in streams.values.sorted(by: { $0.id < $1.id }) where stream.id >= id && !stream.receiveEnded {
                    stream.receiveEnded = true
                    reject(stream)
                    cancel(stream, code: .requestCancelled)
                }
            }
        }
    }

    /// Client: reports a request the server will not process, once.
    func reject(_ stream: StreamState) {
        guard !stream.rejected else { return }
        stream.rejected = true
        events.append(.requestRejected(streamID: stream.id))
    }

    /// Ends both directions of a request stream from our side.
    func cancel(_ stream: StreamState, code: HTTP3ErrorCode) {
        guard let conn else { return }
        stream.body = nil
        stream.sendAborted = true
        nghttp3_conn_shutdown_stream_read(conn, stream.id)
        nghttp3_conn_shutdown_stream_write(conn, stream.id)
        actions.append(.stopSending(streamID: stream.id, code: code))
        actions.append(.resetStream(streamID: stream.id, code: code))
    }
}
