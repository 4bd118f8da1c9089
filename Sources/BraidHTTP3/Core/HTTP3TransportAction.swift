/// What the engine needs the QUIC layer below it to do. Bytes to send are not actions: the
/// caller takes them with `HTTP3Connection.nextWrite(maxBytes:)`.
public enum HTTP3TransportAction: Sendable, Hashable {
    /// Extend the stream's and the connection's flow-control credit by `bytes`: input the
    /// engine consumed later than `receive` returned (a stream blocked on the QPACK encoder).
    case returnCredit(streamID: Int64, bytes: Int)
    /// Send STOP_SENDING on the stream with this code.
    case stopSending(streamID: Int64, code: HTTP3ErrorCode)
    /// Send RESET_STREAM on the stream with this code.
    case resetStream(streamID: Int64, code: HTTP3ErrorCode)
    /// Close the QUIC connection with this application error code.
    case closeConnection(code: HTTP3ErrorCode, reason: String)
}
