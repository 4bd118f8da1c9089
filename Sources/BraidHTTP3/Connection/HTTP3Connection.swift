import BraidCore
import CBraid

/// One HTTP/3 connection over nghttp3 0.8, sans-IO: stream bytes in, stream bytes, events and
/// transport actions out. No sockets, clocks or threads: the QUIC layer below feeds it what
/// arrives on each stream and sends what it writes.
///
/// Not thread-safe and not `Sendable`: like `QUICConnection`, one owner drives it on one
/// thread. nghttp3 reaches it through an unretained pointer, valid while the owner holds it.
///
/// The caller's part (the QUIC glue):
/// - Opens three unidirectional streams and passes their IDs (`HTTP3LocalStreams`).
/// - Input: `receive(streamID:bytes:fin:)` for every stream's bytes in order (it returns the
///   bytes whose flow-control credit may go back at once; body bytes are credited as the
///   application consumes them), `peerResetStream`, `peerStoppedSending`, `streamClosed`,
///   `blockStream`/`unblockStream` for QUIC flow control, `peerClosedConnection`.
/// - Output: `nextWrite(maxBytes:)` until nil, whenever the QUIC layer has room;
///   `takeTransportActions()` (STOP_SENDING, RESET_STREAM, credit, close) and
///   `takeEvents()` for the application, after each input or call.
/// - Requests: a client opens a bidirectional stream and calls `sendRequest`; a server
///   answers a `.headers` event with `sendResponse`. Bodies are pulled from an
///   `HTTP3BodySource`; trailers come at its end. Server push is never enabled (a client
///   never sends MAX_PUSH_ID, so a server may not push).
/// - Shutdown: a server calls `sendShutdownNotice()` then, an RTT or so later, `shutdown()`;
///   requests the server will not process end in `.requestRejected` (retryable), new ones
///   throw `HTTP3Error.goingAway`.
///
/// ```swift
/// let streams = HTTP3LocalStreams(
///     control: try quic.openStream(bidirectional: false),
///     qpackEncoder: try quic.openStream(bidirectional: false),
///     qpackDecoder: try quic.openStream(bidirectional: false))
/// let h3 = try HTTP3Connection(role: .client, localStreams: streams)
/// let request = try quic.openStream(bidirectional: true)
/// try h3.sendRequest(streamID: request, fields: [
///     HTTP3Field(":method", "GET"), HTTP3Field(":scheme", "https"),
///     HTTP3Field(":authority", "example.com"), HTTP3Field(":path", "/"),
/// ])
/// while let write = h3.nextWrite() {
///     for (index, piece) in write.pieces.enumerated() {
///         let last = index == write.pieces.count - 1
///         try quic.send(streamID: write.streamID, bytes: piece.bytes, range: piece.range, fin: write.fin && last)
///     }
///     if write.pieces.isEmpty { try quic.send(streamID: write.streamID, bytes: [UInt8](), fin: true) }
/// }
/// // ... and as QUIC events come: h3.receive(streamID:bytes:fin:), then h3.takeEvents().
/// ```
///
/// A peer that breaks the protocol (a bad frame on the control stream, a QPACK error) fails
/// the connection: `.connectionError` and `closeConnection` with nghttp3's HTTP/3 code; a
/// malformed message (uppercase field name, missing pseudo-header) ends only its stream with
/// H3_MESSAGE_ERROR. Nothing the peer sends crashes the engine.
///
/// Limits and memory: a header or trailer section past `maxFieldSectionSize` ends its stream
/// with H3_EXCESSIVE_LOAD (fields past the limit are not kept); nghttp3 refuses QPACK names
/// over 256 and values over 65,536 encoded bytes, and more than `qpackBlockedStreams` streams
/// waiting on the encoder (QPACK_DECOMPRESSION_FAILED); a body longer than its
/// content-length fails the connection with H3_MESSAGE_ERROR (nghttp3 0.8 reports it from
/// its read, not per stream). The engine holds, per stream, at most the body chunks nghttp3
/// asked for and has not yet written (about one), and the section being received
/// (`receivingFieldSectionBytes`; a server ends a request whose section takes too long with
/// `abandonRequest(streamID:code:)`, which drops it); events
/// wait until taken, and their body bytes are bounded by the QUIC flow-control window as
/// long as credit goes back only as they are consumed. The peer's
/// SETTINGS_MAX_FIELD_SECTION_SIZE is not checked on sending (nghttp3 0.8 does not).
public final class HTTP3Connection {
    /// Which side of the connection this engine plays.
    public enum Role: Sendable, Hashable {
        case client
        case server
    }

    // Per-request state skips the run-time exclusivity check (a runtime call on every access,
    // dozens per request): the engine runs on one thread, and no access is held across a call
    // into nghttp3, whose callbacks are the only way back in.
    /// What the engine remembers about one request stream.
    final class StreamState {
        let id: Int64
        /// Where the body comes from (nil: none, or it ended).
        @exclusivity(unchecked) var body: HTTP3BodySource?
        /// Body chunks handed to nghttp3 and not yet out in a write, oldest first, with the
        /// bytes of the first already written.
        @exclusivity(unchecked) var chunks: [(bytes: StreamBytes, range: Range<Int>)] = []
        @exclusivity(unchecked) var chunkHead = 0
        /// The header or trailer section being received.
        @exclusivity(unchecked) var fields: [HTTP3Field] = []
        @exclusivity(unchecked) var fieldSectionSize = 0
        @exclusivity(unchecked) var oversized = false
        /// Client: the request was rejected (reported once).
        @exclusivity(unchecked) var rejected = false
        /// The message's receive side has ended (end, reset or error).
        @exclusivity(unchecked) var receiveEnded = false
        /// Our side may send nothing more: we reset the stream, or the peer stopped it.
        @exclusivity(unchecked) var sendAborted = false

        init(id: Int64) { self.id = id }
    }

    public let role: Role
    public let configuration: HTTP3Configuration
    public let localStreams: HTTP3LocalStreams
    var conn: OpaquePointer?
    @exclusivity(unchecked) var streams: [Int64: StreamState] = [:]
    @exclusivity(unchecked) var events: [HTTP3Event] = []
    @exclusivity(unchecked) var actions: [HTTP3TransportAction] = []
    /// The stream whose field section nghttp3 is reading (set at its start, cleared at its end).
    @exclusivity(unchecked) var sectionStream: StreamState?
    /// Streams whose header section went past the limit while nghttp3 read them; ended once
    /// the read returns (nghttp3 must not be called from its own callbacks).
    @exclusivity(unchecked) var oversizedStreams: [Int64] = []
    /// The GOAWAY IDs received while nghttp3 read (handled once the read returns).
    @exclusivity(unchecked) var receivedGoaways: [Int64] = []
    /// The lowest GOAWAY ID the peer sent.
    public internal(set) var peerGoawayID: Int64?
    /// Whether we sent GOAWAY (a notice or the final one).
    public internal(set) var isShuttingDown = false
    /// Why the connection failed, once it has.
    public internal(set) var failure: HTTP3Error?
    /// Whether a callback failed inside nghttp3 (the read's error is then ours).
    var callbackError: HTTP3Error?
    /// The vectors `nextWrite` asks nghttp3 to fill, kept from one write to the next.
    @exclusivity(unchecked) var writeVectors = [nghttp3_vec](repeating: nghttp3_vec(), count: HTTP3Connection.vectorsPerWrite)

    /// Starts an HTTP/3 connection on streams the caller opened; SETTINGS and the stream
    /// types are the first writes.
    public init(role: Role, localStreams: HTTP3LocalStreams, configuration: HTTP3Configuration = HTTP3Configuration()) throws {
        self.role = role
        self.configuration = configuration
        self.localStreams = localStreams
        var callbacks = Self.callbacks()
        var settings = nghttp3_settings()
        braid_nghttp3_settings_default(&settings)
        settings.max_field_section_size = UInt64(max(0, configuration.maxFieldSectionSize))
        settings.qpack_max_dtable_capacity = max(0, configuration.qpackMaxTableCapacity)
        settings.qpack_encoder_max_dtable_capacity = max(0, configuration.qpackEncoderMaxTableCapacity)
        settings.qpack_blocked_streams = max(0, configuration.qpackBlockedStreams)
        let userData = Unmanaged.passUnretained(self).toOpaque()
        let rc = role == .client
            ? braid_nghttp3_conn_client_new(&conn, &callbacks, &settings, userData)
            : braid_nghttp3_conn_server_new(&conn, &callbacks, &settings, userData)
        guard rc == 0, conn != nil else {
            throw HTTP3Error.internalError(code: rc, function: "nghttp3_conn_\(role)_new")
        }
        if role == .server {
            nghttp3_conn_set_max_client_streams_bidi(conn, configuration.maxClientBidirectionalStreams)
        }
        var bound = nghttp3_conn_bind_control_stream(conn, localStreams.control)
        guard bound == 0 else { throw HTTP3Error.internalError(code: bound, function: "nghttp3_conn_bind_control_stream") }
        bound = nghttp3_conn_bind_qpack_streams(conn, localStreams.qpackEncoder, localStreams.qpackDecoder)
        guard bound == 0 else { throw HTTP3Error.internalError(code: bound, function: "nghttp3_conn_bind_qpack_streams") }
    }

    deinit {
        if let conn { nghttp3_conn_del(conn) }
    }

    // MARK: Output

    /// The events since the last call, oldest first.
    public func takeEvents() -> [HTTP3Event] {
        defer { events.removeAll(keepingCapacity: true) }
        return events
    }

    /// The transport actions since the last call, oldest first.
    public func takeTransportActions() -> [HTTP3TransportAction] {
        defer { actions.removeAll(keepingCapacity: true) }
        return actions
    }

    /// Request streams the engine still tracks (open, or finished but not yet closed by the
    /// QUIC layer). After a GOAWAY, the connection may close once this reaches zero.
    public var activeStreamCount: Int { streams.count }

    /// The decoded fields of the header and trailer sections being received (kept until each
    /// section ends, at most `maxFieldSectionSize` per stream), counted as RFC 9114 section
    /// 4.2.2 counts a section: name + value + 32 per field. Walks the streams: for a periodic
    /// look (a listener's buffer limit), not per request.
    public var receivingFieldSectionBytes: Int {
        var total = 0
        for stream in streams.values where !stream.fields.isEmpty { total += stream.fieldSectionSize }
        return total
    }

    // MARK: Input

    /// Feeds bytes that arrived on a stream (any stream: request, control, QPACK, or one the
    /// engine does not know yet), in order, with `fin` on its last bytes. Returns how many of
    /// them the QUIC layer may credit back to the peer now; body bytes (`.body` events) are
    /// the application's to credit, and bytes nghttp3 holds for a QPACK-blocked stream come
    /// back later as `returnCredit`.
    @discardableResult
    public func receive(streamID: Int64, bytes: UnsafeRawBufferPointer, fin: Bool) -> Int {
        guard failure == nil, let conn else { return bytes.count }
        let base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self)
        let consumed = nghttp3_conn_read_stream(conn, streamID, base, bytes.count, fin ? 1 : 0)
        if consumed < 0 {
            fail(libraryError: Int32(consumed), function: "nghttp3_conn_read_stream")
            return 0
        }
        afterRead()
        return Int(consumed)
    }

    /// `receive(streamID:bytes:fin:)` for bytes in an array.
    @discardableResult
    public func receive(streamID: Int64, bytes: [UInt8], fin: Bool) -> Int {
        bytes.withUnsafeBytes { receive(streamID: streamID, bytes: $0, fin: fin) }
    }

    /// The peer reset a stream (RESET_STREAM): nghttp3 drops what it holds of it, and the
    /// application hears `.streamReset` (`.requestRejected` for H3_REQUEST_REJECTED on a
    /// client's request, which is retryable).
    /// A reset control or QPACK stream fails the connection (H3_CLOSED_CRITICAL_STREAM).
    public func peerResetStream(streamID: Int64, code: UInt64) {
        guard failure == nil, let conn else { return }
        if streamID & 2 != 0 {
            // A unidirectional stream: nghttp3 forgets one of no known type, and refuses to
            // close a control or QPACK stream, which is then the connection's end.
            let rc = nghttp3_conn_close_stream(conn, streamID, code)
            if rc != 0 && rc != NGHTTP3_ERR_STREAM_NOT_FOUND {
                fail(libraryError: rc, function: "nghttp3_conn_close_stream")
            }
            return
        }
        let rc = nghttp3_conn_shutdown_stream_read(conn, streamID)
        if rc != 0 && rc != NGHTTP3_ERR_STREAM_NOT_FOUND {
            fail(libraryError: rc, function: "nghttp3_conn_shutdown_stream_read")
            return
        }
        guard let stream = streams[streamID], !stream.receiveEnded else { return }
        stream.receiveEnded = true
        let error = HTTP3ErrorCode(code: code)
        if role == .client && error == .requestRejected {
            reject(stream)
        } else {
            events.append(.streamReset(streamID: streamID, code: error))
        }
    }

    /// The peer sent STOP_SENDING: nghttp3 writes no more on the stream (the QUIC layer
    /// resets its sending side). On our control or QPACK stream it fails the connection
    /// (H3_CLOSED_CRITICAL_STREAM).
    public func peerStoppedSending(streamID: Int64, code: UInt64) {
        guard failure == nil, let conn else { return }
        if [localStreams.control, localStreams.qpackEncoder, localStreams.qpackDecoder].contains(streamID) {
            fail(libraryError: NGHTTP3_ERR_H3_CLOSED_CRITICAL_STREAM, function: "STOP_SENDING")
            return
        }
        nghttp3_conn_shutdown_stream_write(conn, streamID)
        guard let stream = streams[streamID] else { return }
        stream.sendAborted = true
        stream.body = nil
        stream.chunks.removeAll()
        stream.chunkHead = 0
        events.append(.stopSending(streamID: streamID, code: HTTP3ErrorCode(code: code)))
    }

    /// The QUIC layer closed the stream (both directions done, or reset) and forgot it.
    /// Closing a control or QPACK stream fails the connection (H3_CLOSED_CRITICAL_STREAM).
    public func streamClosed(streamID: Int64, code: UInt64 = 0x100) {
        guard failure == nil, let conn else { return }
        let rc = nghttp3_conn_close_stream(conn, streamID, code)
        if rc != 0 && rc != NGHTTP3_ERR_STREAM_NOT_FOUND {
            fail(libraryError: rc, function: "nghttp3_conn_close_stream")
            return
        }
        forget(streamID: streamID)
    }

    /// Drops what the engine remembers about a stream.
    func forget(streamID: Int64) {
        streams[streamID] = nil
        if sectionStream?.id == streamID { sectionStream = nil }
    }

    /// QUIC flow control stops the stream: `nextWrite` skips it until `unblockStream`.
    public func blockStream(streamID: Int64) {
        guard failure == nil, let conn else { return }
        nghttp3_conn_block_stream(conn, streamID)
    }

    /// The peer gave the stream more credit (or the QUIC layer room): it may write again.
    public func unblockStream(streamID: Int64) {
        guard failure == nil, let conn else { return }
        let rc = nghttp3_conn_unblock_stream(conn, streamID)
        if rc != 0 && rc != NGHTTP3_ERR_STREAM_NOT_FOUND {
            fail(libraryError: rc, function: "nghttp3_conn_unblock_stream")
        }
    }

    /// A body source that returned `.pending` has more now.
    public func resumeBody(streamID: Int64) {
        guard failure == nil, let conn else { return }
        let rc = nghttp3_conn_resume_stream(conn, streamID)
        if rc != 0 && rc != NGHTTP3_ERR_STREAM_NOT_FOUND {
            fail(libraryError: rc, function: "nghttp3_conn_resume_stream")
        }
    }

    /// Server: the client may open this many bidirectional streams in all (the QUIC
    /// transport raised its limit).
    public func setMaxClientBidirectionalStreams(_ count: UInt64) {
        guard role == .server, let conn else { return }
        nghttp3_conn_set_max_client_streams_bidi(conn, count)
    }

    /// The QUIC connection closed with this application code (the peer's close, or the
    /// transport's end): the engine fails every call from now on.
    public func peerClosedConnection(code: UInt64, reason: String = "") {
        guard failure == nil else { return }
        let error = HTTP3Error.connectionError(HTTP3ErrorCode(code: code), reason: reason, byPeer: true)
        failure = error
        events.append(.connectionError(error))
    }

    // MARK: Failure

    /// Fails the connection for an nghttp3 error: the application hears `.connectionError`,
    /// the transport closes with the HTTP/3 code nghttp3 infers (H3_INTERNAL_ERROR for our own
    /// failures).
    func fail(libraryError rc: Int32, function: String) {
        guard failure == nil else { return }
        let error: HTTP3Error
        if rc == NGHTTP3_ERR_CALLBACK_FAILURE, let callbackError {
            error = callbackError
        } else if nghttp3_err_is_fatal(rc) != 0 && rc != NGHTTP3_ERR_CALLBACK_FAILURE {
            error = .internalError(code: rc, function: function)
        } else {
            let code = HTTP3ErrorCode(code: nghttp3_err_infer_quic_app_error_code(rc))
            error = .connectionError(code, reason: String(cString: nghttp3_strerror(rc)), byPeer: false)
        }
        failure = error
        let code: HTTP3ErrorCode
        if case .connectionError(let inferred, _, _) = error { code = inferred } else { code = .internalError }
        events.append(.connectionError(error))
        actions.append(.closeConnection(code: code, reason: error.description))
    }

    func ensureUsable() throws {
        if let failure { throw failure }
        guard conn != nil else { throw HTTP3Error.invalidState("The HTTP/3 connection is gone.") }
    }
}
