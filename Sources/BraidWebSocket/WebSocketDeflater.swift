import CBraid

/// permessage-deflate's compressor (RFC 7692 §7.2.1) over zlib's raw deflate: each message
/// ends with a sync flush whose empty stored block's `00 00 FF FF` is left off. With no
/// context takeover, each message starts from an empty window.
///
/// A window of 8 bits is one zlib's raw deflate cannot make; messages are then sent as
/// stored (uncompressed) deflate blocks, which refer back to nothing and so fit any window.
package final class WebSocketDeflater {
    /// zlib keeps a pointer back to the stream: it must not move, so it lives on the heap.
    private let stream: UnsafeMutablePointer<z_stream>
    private let resetsEachMessage: Bool
    private static let chunk = 16 * 1024

    /// Nil when zlib cannot set up (out of memory).
    package init?(windowBits: Int, level: Int, memoryLevel: Int, noContextTakeover: Bool) {
        stream = .allocate(capacity: 1)
        stream.initialize(to: z_stream())
        let storedOnly = windowBits < 9
        let rc = braid_deflate_init2(
            stream, storedOnly ? Z_NO_COMPRESSION : Int32(min(max(level, -1), 9)), -Int32(max(windowBits, 9)), Int32(min(max(memoryLevel, 1), 9)))
        guard rc == Z_OK else {
            stream.deallocate()
            return nil
        }
        resetsEachMessage = noContextTakeover
    }

    deinit {
        deflateEnd(stream)
        stream.deinitialize(count: 1)
        stream.deallocate()
    }

    /// Compresses `input`, appending what zlib emits to `output` (zlib may hold some back).
    package func compress(_ input: UnsafeRawBufferPointer, into output: inout [UInt8]) {
        guard !input.isEmpty else { return }
        run(input, flush: Z_NO_FLUSH, into: &output)
    }

    /// Ends the message: flushes, and appends the rest without the final `00 00 FF FF`.
    package func finishMessage(into output: inout [UInt8]) {
        let start = output.count
        run(UnsafeRawBufferPointer(start: nil, count: 0), flush: Z_SYNC_FLUSH, into: &output)
        // A sync flush ends with an empty stored block; only its tail is dropped. zlib makes
        // nothing for a flush right after another (an empty message after a message): that
        // message is the empty stored block's first byte alone (RFC 7692 §7.2.3.6).
        if output.count - start >= 4, output[(output.count - 4)...].elementsEqual([0x00, 0x00, 0xFF, 0xFF]) {
            output.removeLast(4)
        } else if output.count == start {
            output.append(0x00)
        }
        if resetsEachMessage { deflateReset(stream) }
    }

    private func run(_ input: UnsafeRawBufferPointer, flush: Int32, into output: inout [UInt8]) {
        stream.pointee.next_in = input.baseAddress.map { UnsafeMutablePointer(mutating: $0.assumingMemoryBound(to: Bytef.self)) }
        stream.pointee.avail_in = UInt32(input.count)
        while true {
            let start = output.count
            output.append(contentsOf: repeatElement(0, count: Self.chunk))
            let rc = output.withUnsafeMutableBytes { buffer in
                stream.pointee.next_out = buffer.baseAddress!.advanced(by: start).assumingMemoryBound(to: Bytef.self)
                stream.pointee.avail_out = UInt32(Self.chunk)
                return deflate(stream, flush)
            }
            let left = Int(stream.pointee.avail_out)
            output.removeLast(left)
            // Z_BUF_ERROR: nothing to do (no input, nothing pending), not a failure.
            guard rc == Z_OK, left == 0 || stream.pointee.avail_in > 0 else { break }
        }
        stream.pointee.next_in = nil
        stream.pointee.next_out = nil
    }
}
