import CBraid

/// permessage-deflate's decompressor (RFC 7692 §7.2.2) over zlib's raw inflate, bounded: it
/// never makes more than the message's limit plus one byte, so a small message that inflates
/// to gigabytes (a deflate bomb) fails at the limit with close code 1009.
package final class WebSocketInflater {
    private let stream: UnsafeMutablePointer<z_stream>
    /// The peer ended its deflate stream (a block with BFINAL set) inside this message.
    private var streamEnded = false
    private static let chunk = 64 * 1024
    private static let trailer: [UInt8] = [0x00, 0x00, 0xFF, 0xFF]

    /// Nil when zlib cannot set up (out of memory).
    package init?(windowBits: Int) {
        stream = .allocate(capacity: 1)
        stream.initialize(to: z_stream())
        // A window of 8 is opened as 9 (zlib's manual asks for it with raw inflate; zlib before
        // 1.2.9 turned 8 into 9 on the deflating side too): a larger inflate window accepts
        // everything a smaller one does.
        guard braid_inflate_init2(stream, -Int32(min(max(windowBits, 9), 15))) == Z_OK else {
            stream.deallocate()
            return nil
        }
    }

    deinit {
        inflateEnd(stream)
        stream.deinitialize(count: 1)
        stream.deallocate()
    }

    /// Inflates `input`, appending to `output`, which may hold at most `limit` bytes.
    package func inflate(_ input: UnsafeRawBufferPointer, into output: inout [UInt8], limit: Int) throws(WebSocketError) {
        guard !input.isEmpty else { return }
        guard !streamEnded else { throw .compressedDataInvalid("data came after the message's final deflate block") }
        try run(input, into: &output, limit: limit)
    }

    /// Ends the message: inflates the `00 00 FF FF` the sender left off. With `reset`, the
    /// next message starts from an empty window (the peer keeps no context).
    package func finishMessage(into output: inout [UInt8], limit: Int, reset: Bool) throws(WebSocketError) {
        if !streamEnded {
            var failure: WebSocketError?
            Self.trailer.withUnsafeBytes { bytes in
                do throws(WebSocketError) { try run(bytes, into: &output, limit: limit) } catch { failure = error }
            }
            if let failure { throw failure }
        }
        if reset || streamEnded {
            inflateReset(stream)
            streamEnded = false
        }
    }

    private func run(_ input: UnsafeRawBufferPointer, into output: inout [UInt8], limit: Int) throws(WebSocketError) {
        stream.pointee.next_in = UnsafeMutablePointer(mutating: input.baseAddress!.assumingMemoryBound(to: Bytef.self))
        stream.pointee.avail_in = UInt32(input.count)
        defer {
            stream.pointee.next_in = nil
            stream.pointee.next_out = nil
        }
        while true {
            // One byte past the limit's room: making it proves the message too large.
            let room = min(max(limit - output.count, 0) + 1, Self.chunk)
            let start = output.count
            output.append(contentsOf: repeatElement(0, count: room))
            let rc = output.withUnsafeMutableBytes { buffer in
                stream.pointee.next_out = buffer.baseAddress!.advanced(by: start).assumingMemoryBound(to: Bytef.self)
                stream.pointee.avail_out = UInt32(room)
                return CBraid.inflate(stream, Z_NO_FLUSH)
            }
            let left = Int(stream.pointee.avail_out)
            output.removeLast(left)
            if output.count > limit {
                output.removeLast(output.count - limit)
                throw .messageTooLarge(size: limit + 1, maximum: limit)
            }
            switch rc {
            case Z_OK:
                if left == 0 || stream.pointee.avail_in > 0 { continue }
                return
            case Z_BUF_ERROR:
                // No progress possible: the input is used up and the block continues later.
                return
            case Z_STREAM_END:
                streamEnded = true
                if stream.pointee.avail_in > 0 && !Self.isTrailer(stream.pointee.next_in, Int(stream.pointee.avail_in)) {
                    throw .compressedDataInvalid("data came after the message's final deflate block")
                }
                return
            default:
                let reason = stream.pointee.msg.map { String(cString: $0) } ?? "zlib error \(rc)"
                throw .compressedDataInvalid(reason)
            }
        }
    }

    private static func isTrailer(_ pointer: UnsafeMutablePointer<Bytef>?, _ count: Int) -> Bool {
        guard let pointer, count <= 4 else { return false }
        return UnsafeBufferPointer(start: pointer, count: count).elementsEqual(trailer.prefix(count))
    }
}
