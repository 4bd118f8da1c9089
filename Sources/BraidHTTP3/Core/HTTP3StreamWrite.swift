import BraidCore

/// Bytes the engine hands the QUIC layer for one stream, in order: `pieces`, then the FIN if
/// `fin`. A write with no pieces and `fin` only finishes the stream.
///
/// Each piece is a range of a `StreamBytes` the write holds: a body chunk the caller's body
/// source gave (passed on, never copied), or frame bytes the engine copied out of nghttp3
/// (headers, frame headers, the control and QPACK streams). So the QUIC layer may keep the
/// pieces until the peer acknowledges them (`QUICConnection.send(streamID:bytes:range:fin:)`
/// does), and acknowledgements need not come back to the engine.
public struct HTTP3StreamWrite: Sendable {
    /// One contiguous range of bytes to send.
    public struct Piece: Sendable {
        public var bytes: StreamBytes
        public var range: Range<Int>
    }

    public var streamID: Int64
    public var pieces: [Piece]
    /// The stream's last bytes: send the FIN after them.
    public var fin: Bool

    /// The bytes in all pieces.
    public var count: Int { pieces.reduce(0) { $0 + $1.range.count } }

    /// A copy of the bytes (for tests and diagnostics).
    public var bytes: [UInt8] {
        var all: [UInt8] = []
        all.reserveCapacity(count)
        for piece in pieces {
            all.append(contentsOf: UnsafeRawBufferPointer(rebasing: piece.bytes.base[piece.range]))
        }
        return all
    }
}
