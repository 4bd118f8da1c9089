import BraidCore
import CBraid

/// Requests, responses, bodies and GOAWAY: what the application asks the engine to send.
extension HTTP3Connection {
    /// Client: sends a request on `streamID`, a bidirectional stream the caller opened on its
    /// QUIC connection. `fields` start with the pseudo-headers (`:method`, `:scheme`,
    /// `:authority`, `:path`); `body` (nil: none) is pulled as the stream can take it.
    /// Throws `HTTP3Error.goingAway` (retryable) once the server sent GOAWAY.
    public func sendRequest(streamID: Int64, fields: [HTTP3Field], body: HTTP3BodySource? = nil) throws {
        try ensureUsable()
        guard role == .client else { throw HTTP3Error.invalidState("Only a client sends requests.") }
        guard streamID & 3 == 0 else {
            throw HTTP3Error.invalidStream(streamID: streamID, reason: "a request needs a client-initiated bidirectional stream")
        }
        if let peerGoawayID { throw HTTP3Error.goingAway(lastStreamID: peerGoawayID) }
        guard streams[streamID] == nil else { throw HTTP3Error.invalidStream(streamID: streamID, reason: "already in use") }
        let stream = StreamState(id: streamID)
        stream.body = body
        streams[streamID] = stream
        let rc = withFieldArray(fields) { nva, count in
            withDataReader(body != nil) { reader in
                nghttp3_conn_submit_request(conn, streamID, nva, count, reader, nil)
            }
        }
        guard rc == 0 else {
            streams[streamID] = nil
            throw submitError(rc, streamID: streamID, function: "nghttp3_conn_submit_request")
        }
    }

    /// Server: sends the final response on a request's stream (after its `.headers` event).
    /// `fields` start with `:status`; `body` (nil: none) is pulled as the stream can take it.
    public func sendResponse(streamID: Int64, fields: [HTTP3Field], body: HTTP3BodySource? = nil) throws {
        try ensureUsable()
        let stream = try requestStream(streamID)
        guard !stream.sendAborted else {
            throw HTTP3Error.invalidStream(streamID: streamID, reason: "the stream was reset or stopped; no response can go out")
        }
        stream.body = body
        let rc = withFieldArray(fields) { nva, count in
            withDataReader(body != nil) { reader in
                nghttp3_conn_submit_response(conn, streamID, nva, count, reader)
            }
        }
        guard rc == 0 else {
            stream.body = nil
            throw submitError(rc, streamID: streamID, function: "nghttp3_conn_submit_response")
        }
    }

    /// Server: sends an interim (1xx) response before the final one.
    public func sendInterimResponse(streamID: Int64, fields: [HTTP3Field]) throws {
        try ensureUsable()
        guard try !requestStream(streamID).sendAborted else {
            throw HTTP3Error.invalidStream(streamID: streamID, reason: "the stream was reset or stopped; no response can go out")
        }
        let rc = withFieldArray(fields) { nva, count in nghttp3_conn_submit_info(conn, streamID, nva, count) }
        guard rc == 0 else { throw submitError(rc, streamID: streamID, function: "nghttp3_conn_submit_info") }
    }

    /// Abandons a request stream from our side: STOP_SENDING and RESET_STREAM with `code`
    /// (H3_REQUEST_CANCELLED by default), and no more events for it.
    public func cancelStream(streamID: Int64, code: HTTP3ErrorCode = .requestCancelled) throws {
        try ensureUsable()
        let stream = try requestStream(streamID)
        guard !stream.sendAborted || !stream.receiveEnded else {
            throw HTTP3Error.invalidStream(streamID: streamID, reason: "already cancelled or reset")
        }
        stream.receiveEnded = true
        cancel(stream, code: code)
    }

    /// Server: ends a request stream whose request will not be processed (its header section
    /// did not arrive in time): STOP_SENDING and RESET_STREAM with `code`, the fields received
    /// so far dropped, and no event for it from now on. Works as well on a stream nghttp3 has
    /// not read a byte of yet; nothing happens once the connection has failed.
    public func abandonRequest(streamID: Int64, code: HTTP3ErrorCode) {
        guard role == .server, failure == nil, let conn else { return }
        if sectionStream?.id == streamID { sectionStream = nil }
        guard let stream = streams[streamID] else {
            nghttp3_conn_shutdown_stream_read(conn, streamID)
            nghttp3_conn_shutdown_stream_write(conn, streamID)
            actions.append(.stopSending(streamID: streamID, code: code))
            actions.append(.resetStream(streamID: streamID, code: code))
            return
        }
        stream.receiveEnded = true
        stream.fields = []
        stream.fieldSectionSize = 0
        cancel(stream, code: code)
    }

    /// Server: the first step of a graceful shutdown, a GOAWAY that stops new requests
    /// without refusing any in flight (ID `(1 << 62) - 4`). Call `shutdown()` an RTT or so
    /// later.
    public func sendShutdownNotice() throws {
        try ensureUsable()
        guard role == .server else { throw HTTP3Error.invalidState("Only a server sends a shutdown notice in this engine.") }
        let rc = nghttp3_conn_submit_shutdown_notice(conn)
        guard rc == 0 else { throw HTTP3Error.internalError(code: rc, function: "nghttp3_conn_submit_shutdown_notice") }
        isShuttingDown = true
    }

    /// Sends the final GOAWAY: a server processes the requests it has seen and rejects later
    /// ones with H3_REQUEST_REJECTED (the client retries them); a client accepts no pushes
    /// (it never allows any). Requests in flight finish; close the QUIC connection once
    /// `activeStreamCount` is zero.
    public func shutdown() throws {
        try ensureUsable()
        let rc = nghttp3_conn_shutdown(conn)
        guard rc == 0 else { throw HTTP3Error.internalError(code: rc, function: "nghttp3_conn_shutdown") }
        isShuttingDown = true
    }

    // MARK: Helpers

    func requestStream(_ streamID: Int64) throws -> StreamState {
        guard let stream = streams[streamID] else {
            throw HTTP3Error.invalidStream(streamID: streamID, reason: "no such request stream (closed, or no request arrived)")
        }
        return stream
    }

    func submitError(_ rc: Int32, streamID: Int64, function: String) -> HTTP3Error {
        switch rc {
        case NGHTTP3_ERR_CONN_CLOSING: .goingAway(lastStreamID: peerGoawayID ?? streamID)
        case NGHTTP3_ERR_STREAM_IN_USE: .invalidStream(streamID: streamID, reason: "already in use")
        case NGHTTP3_ERR_STREAM_NOT_FOUND: .invalidStream(streamID: streamID, reason: "no such stream")
        case NGHTTP3_ERR_INVALID_STATE: .invalidStream(streamID: streamID, reason: "a response was already sent")
        default: .internalError(code: rc, function: function)
        }
    }

    /// Calls `body` with `fields` as nghttp3 name/value pairs pointing into one buffer
    /// (nghttp3 copies them before returning). Both live in temporary allocations, on the
    /// stack for a typical section: a message's head costs no allocation here.
    func withFieldArray<Result>(_ fields: [HTTP3Field], _ body: (UnsafePointer<nghttp3_nv>?, Int) -> Result) -> Result {
        var total = 0
        for field in fields { total += field.name.utf8.count + field.value.count }
        return withUnsafeTemporaryAllocation(byteCount: max(total, 1), alignment: 1) { storage in
            withUnsafeTemporaryAllocation(of: nghttp3_nv.self, capacity: max(fields.count, 1)) { nva in
                let base = storage.baseAddress!.assumingMemoryBound(to: UInt8.self)
                var offset = 0
                for index in fields.indices {
                    let field = fields[index]
                    let name = base + offset
                    let nameCount = field.name.utf8.count
                    UnsafeMutableRawBufferPointer(rebasing: storage[offset...]).copyBytes(from: field.name.utf8)
                    offset += nameCount
                    let value = base + offset
                    field.value.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: storage[offset...]).copyMemory(from: $0) }
                    offset += field.value.count
                    (nva.baseAddress! + index).initialize(
                        to: nghttp3_nv(name: name, value: value, namelen: nameCount, valuelen: field.value.count, flags: UInt8(NGHTTP3_NV_FLAG_NONE)))
                }
                return body(UnsafePointer(nva.baseAddress), fields.count)
            }
        }
    }

    /// Calls `body` with the engine's data reader, or nil for a message without a body.
    func withDataReader<Result>(_ hasBody: Bool, _ body: (UnsafePointer<nghttp3_data_reader>?) -> Result) -> Result {
        guard hasBody else { return body(nil) }
        var reader = nghttp3_data_reader(read_data: { _, streamID, vec, vectorCount, flags, userData, _ in
            HTTP3Connection.from(userData).readBody(streamID: streamID, into: vec!, count: vectorCount, flags: flags!)
        })
        return body(&reader)
    }

    /// nghttp3 asks for the next body bytes: one chunk from the stream's source, kept until
    /// it leaves in a write.
    func readBody(streamID: Int64, into vectors: UnsafeMutablePointer<nghttp3_vec>, count: Int, flags: UnsafeMutablePointer<UInt32>) -> nghttp3_ssize {
        guard count > 0, let stream = streams[streamID], let source = stream.body else {
            // The source is gone (cancelled or stopped): nghttp3 must not send more.
            return nghttp3_ssize(NGHTTP3_ERR_WOULDBLOCK)
        }
        // An empty chunk is asked again a few times, then treated as `.pending`, so a source
        // that keeps returning nothing cannot spin the engine.
        for _ in 0..<4 {
            switch source() {
            case .bytes(let bytes, let range):
                guard !range.isEmpty else { continue }
                precondition(range.lowerBound >= 0 && range.upperBound <= bytes.count, "body chunk range outside its bytes")
                stream.chunks.append((bytes, range))
                vectors[0] = nghttp3_vec(base: bytes.base.baseAddress!.assumingMemoryBound(to: UInt8.self) + range.lowerBound, len: range.count)
                return 1
            case .pending:
                return nghttp3_ssize(NGHTTP3_ERR_WOULDBLOCK)
            case .end(let trailers):
                stream.body = nil
                flags.pointee |= UInt32(NGHTTP3_DATA_FLAG_EOF)
                if !trailers.isEmpty {
                    flags.pointee |= UInt32(NGHTTP3_DATA_FLAG_NO_END_STREAM)
                    // nghttp3 0.8 takes trailers from inside the data callback (its own
                    // example server does so): they go out after the body, with the FIN.
                    let rc = withFieldArray(trailers) { nva, fieldCount in nghttp3_conn_submit_trailers(conn, streamID, nva, fieldCount) }
                    if rc != 0 {
                        callbackError = .internalError(code: rc, function: "nghttp3_conn_submit_trailers")
                        return nghttp3_ssize(NGHTTP3_ERR_CALLBACK_FAILURE)
                    }
                }
                return 0
            }
        }
        return nghttp3_ssize(NGHTTP3_ERR_WOULDBLOCK)
    }
}
