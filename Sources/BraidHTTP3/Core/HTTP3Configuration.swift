/// The HTTP/3 settings and limits of one connection.
public struct HTTP3Configuration: Sendable, Hashable {
    /// The largest header or trailer section accepted from the peer, counted as RFC 9114
    /// section 4.2.2 does (name + value + 32 per field); advertised in SETTINGS as
    /// SETTINGS_MAX_FIELD_SECTION_SIZE. A larger section ends its stream with H3_EXCESSIVE_LOAD
    /// (the engine stops keeping fields once past it, so memory stays bounded). nghttp3 also
    /// refuses any single name over 256 or value over 65,536 encoded bytes
    /// (QPACK_DECOMPRESSION_FAILED, a connection error).
    public var maxFieldSectionSize: Int = 64 * 1024
    /// The QPACK dynamic table the peer's encoder may use (SETTINGS_QPACK_MAX_TABLE_CAPACITY).
    public var qpackMaxTableCapacity: Int = 4096
    /// The most dynamic table our encoder uses (at most what the peer allows).
    public var qpackEncoderMaxTableCapacity: Int = 4096
    /// Streams that may wait for QPACK encoder input at once (SETTINGS_QPACK_BLOCKED_STREAMS);
    /// one more is QPACK_DECOMPRESSION_FAILED. Their bytes wait in nghttp3, within the QUIC
    /// flow-control window (their credit comes back as `returnCredit` once decoded).
    public var qpackBlockedStreams: Int = 100
    /// Server: how many bidirectional streams the client may open in all (the QUIC
    /// transport's limit); raise it with `setMaxClientBidirectionalStreams(_:)`.
    public var maxClientBidirectionalStreams: UInt64 = 100

    public init() {}
}

/// The three unidirectional streams each side of an HTTP/3 connection opens (RFC 9114 section
/// 6.2): the caller opens them on its QUIC connection and hands their IDs to the engine, which
/// writes the stream types, SETTINGS and QPACK instructions on them. The peer must allow at
/// least three unidirectional streams.
public struct HTTP3LocalStreams: Sendable, Hashable {
    public var control: Int64
    public var qpackEncoder: Int64
    public var qpackDecoder: Int64

    public init(control: Int64, qpackEncoder: Int64, qpackDecoder: Int64) {
        self.control = control
        self.qpackEncoder = qpackEncoder
        self.qpackDecoder = qpackDecoder
    }
}
