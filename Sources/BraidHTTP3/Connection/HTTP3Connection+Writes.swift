import BraidCore
import CBraid

/// The send side: nghttp3 chooses the stream and the bytes; the engine hands them out as
/// owned pieces, so nghttp3 can forget them at once.
extension HTTP3Connection {
    /// The vectors asked of nghttp3 per write (frame headers and body chunks alternate).
    static let vectorsPerWrite = 16

    /// The next bytes to send, on whichever stream nghttp3 schedules (control and QPACK
    /// streams first), at most `maxBytes` of them; nil when nothing is ready. Call it while
    /// the QUIC layer has room and send every write whole, in order: the engine counts the
    /// bytes as sent. A stream the QUIC layer cannot take more on should be blocked
    /// (`blockStream`) until its credit returns.
    ///
    /// The bytes are the engine's to give away: body chunks are passed on by reference and
    /// nghttp3's own bytes are copied out, so nghttp3 is told at once that they are
    /// acknowledged and holds nothing for retransmission (the QUIC layer keeps the pieces).
    public func nextWrite(maxBytes: Int = .max) -> HTTP3StreamWrite? {
        guard failure == nil, let conn, maxBytes > 0 else { return nil }
        var streamID: Int64 = -1
        var fin: Int32 = 0
        let count = writeVectors.withUnsafeMutableBufferPointer { vectors in
            nghttp3_conn_writev_stream(conn, &streamID, &fin, vectors.baseAddress, vectors.count)
        }
        if count < 0 {
            fail(libraryError: Int32(count), function: "nghttp3_conn_writev_stream")
            return nil
        }
        guard streamID >= 0 else { return nil }
        var pieces: [HTTP3StreamWrite.Piece] = []
        // A message's frame headers and its body chunk, typically: room for a few at once.
        pieces.reserveCapacity(4)
        // nghttp3's own bytes waiting to be copied: the vectors from `copyStart` on, `copyBytes`
        // of them in all (the vectors stay in `writeVectors` until copied).
        var copyStart = -1, copyBytes = 0
        var taken = 0
        var offered = 0
        for index in 0..<Int(count) {
            let vector = writeVectors[index]
            offered += vector.len
            let take = min(vector.len, maxBytes - taken)
            guard take > 0, let base = vector.base else { continue }
            taken += take
            if let piece = chunkPiece(streamID: streamID, base: UnsafeRawPointer(base), count: take) {
                if copyStart >= 0 { pieces.append(copied(from: copyStart, upTo: index, bytes: copyBytes)) }
                copyStart = -1
                copyBytes = 0
                pieces.append(piece)
            } else {
                if copyStart < 0 { copyStart = index }
                copyBytes += take
            }
        }
        if copyStart >= 0 { pieces.append(copied(from: copyStart, upTo: Int(count), bytes: copyBytes)) }
        let rc = nghttp3_conn_add_write_offset(conn, streamID, taken)
        guard rc == 0 else {
            fail(libraryError: rc, function: "nghttp3_conn_add_write_offset")
            return nil
        }
        if taken > 0 {
            let acked = nghttp3_conn_add_ack_offset(conn, streamID, UInt64(taken))
            guard acked == 0 else {
                fail(libraryError: acked, function: "nghttp3_conn_add_ack_offset")
                return nil
            }
        }
        return HTTP3StreamWrite(streamID: streamID, pieces: pieces, fin: fin != 0 && taken == offered)
    }

    /// The piece of a body chunk `base` points into, if it does (nghttp3 hands body bytes
    /// back as the very pointers the data reader gave it).
    func chunkPiece(streamID: Int64, base: UnsafeRawPointer, count: Int) -> HTTP3StreamWrite.Piece? {
        guard let stream = streams[streamID] else { return nil }
        for chunk in stream.chunks {
            let start = UnsafeRawPointer(chunk.bytes.base.baseAddress!)
            let lower = start + chunk.range.lowerBound
            let upper = start + chunk.range.upperBound
            if base >= lower && base + count <= upper {
                let offset = base - start
                return HTTP3StreamWrite.Piece(bytes: chunk.bytes, range: offset..<offset + count)
            }
        }
        return nil
    }

    /// The first `total` bytes of nghttp3's vectors `start..<end` (in `writeVectors`) copied
    /// into one piece of their own.
    func copied(from start: Int, upTo end: Int, bytes total: Int) -> HTTP3StreamWrite.Piece {
        let bytes = StreamBytes(count: total) { destination in
            var offset = 0
            for index in start..<end where offset < total {
                let vector = writeVectors[index]
                guard let base = vector.base else { continue }
                let run = min(vector.len, total - offset)
                UnsafeMutableRawBufferPointer(rebasing: destination[offset..<offset + run]).copyMemory(from: UnsafeRawBufferPointer(start: base, count: run))
                offset += run
            }
        }
        return HTTP3StreamWrite.Piece(bytes: bytes, range: 0..<total)
    }
}
