/// What the peer said or did, for the application above the engine, in the order it happened.
public enum HTTP3Event: Sendable, Hashable {
    /// A header section: a request's (server) or a response's (client), including interim
    /// (1xx) responses before the final one. The fields passed nghttp3's checks.
    case headers(streamID: Int64, fields: [HTTP3Field])
    /// Bytes of a message body. Their flow-control credit is the application's to return
    /// (`HTTP3TransportAction.returnCredit` is not raised for them): return it as the bytes
    /// are consumed, so a slow reader stops the peer at the window.
    case body(streamID: Int64, bytes: [UInt8])
    /// The trailer section, after the body.
    case trailers(streamID: Int64, fields: [HTTP3Field])
    /// The message on this stream is complete (its FIN arrived).
    case endOfMessage(streamID: Int64)
    /// The peer reset the stream (RESET_STREAM) with this code: the message is incomplete.
    case streamReset(streamID: Int64, code: HTTP3ErrorCode)
    /// The peer asked us to stop sending on this stream (STOP_SENDING); the engine sends no
    /// more of our message there.
    case stopSending(streamID: Int64, code: HTTP3ErrorCode)
    /// The peer's message broke the rules (malformed or oversized header section): the engine
    /// stopped the stream with this code (STOP_SENDING and RESET_STREAM in the actions).
    case streamError(streamID: Int64, code: HTTP3ErrorCode)
    /// Client: the server will not process this request (a GOAWAY below it, or
    /// H3_REQUEST_REJECTED). Retry it on a new connection; the engine reset the stream.
    case requestRejected(streamID: Int64)
    /// The peer is shutting down (GOAWAY). From a server, `id` is the first request stream
    /// it will not process (`(1 << 62) - 4` for a notice); later requests fail with
    /// `HTTP3Error.goingAway`.
    case goaway(id: Int64)
    /// The connection failed; `HTTP3TransportAction.closeConnection` carries the code when
    /// the failure is ours to report.
    case connectionError(HTTP3Error)
}
