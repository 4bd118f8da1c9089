/// One QUIC stream as the bottom of a stream's stack, as Network.framework's `QUICStream`: a
/// connection hands it to the closure of `openStream(directionality:_:)` and
/// `inboundStreams(prepending:_:)`, which puts a framer on it. It is not made by the
/// application, and is not a connection's stack.
///
/// ```swift
/// let stream = try await connection.openStream { quicStream in
///     TLV { quicStream }
/// }
/// try await stream.send(Data("hello".utf8), type: 1)
/// let (content, metadata) = try await stream.receive()
/// ```
///
/// A plain stream is a `QUIC.Stream<QUICStream>`: `openStream()` and `inboundStreams { }`.
/// `TLV { quicStream }` and `Coder(T.self, using: .json) { quicStream }` are the framers
/// implemented on a stream; on a connection (`NetworkConnection(to:) { TLV { quicStream } }`)
/// or a listener they fail with `NetworkError.unsupported`.
public struct QUICStream: NetworkProtocol, Hashable {
    /// Which way a stream carries data.
    public typealias Directionality = QUIC.Directionality
    /// Which side opened a stream.
    public typealias Initiator = QUIC.Initiator

    /// The application error code a framed stream resets (RESET_STREAM) and stops
    /// (STOP_SENDING) with when the peer announces a message larger than the framer's
    /// `maximumMessageSize`: 0x544C56, "TLV" in ASCII. The peer's receives then throw
    /// `NetworkError.streamReset(code:)` with it, and its sends `NetworkError.streamStopped`
    /// (a Braid peer sees the code as nil: ngtcp2 0.12.1 does not report a STOP_SENDING's code
    /// when the same code also reset the stream). The connection and its other streams go on.
    public static let messageTooLargeErrorCode: UInt64 = 0x544C56

    /// Only connections make one, for the closure that prepends a framer.
    init() {}
}
