import Braid
import Foundation

/// Bulk and echo exchanges over a connection's own byte stream (`NetworkConnection<TLS>`,
/// `NetworkConnection<TCP>`), as the benchmarks run them beside the raw-socket loops: the
/// client sends the perf pattern in fixed-size application writes and finishes its side; the
/// server reads and counts until the end of the stream, then closes.
package enum StreamPerf {
    /// Sends `count` pattern bytes (`PerfPattern`) in writes of `chunk` bytes (at most
    /// `PerfPattern.maxSlice`), the last one with the end of the stream. Returns the number
    /// of sends.
    @discardableResult
    package static func sendPattern<Stack: StreamProtocol>(count: Int, chunk: Int, on connection: NetworkConnection<Stack>) async throws -> Int {
        precondition(chunk > 0 && chunk <= PerfPattern.maxSlice, "chunk must be 1...\(PerfPattern.maxSlice)")
        var sent = 0, calls = 0
        repeat {
            let piece = min(chunk, count - sent)
            try await connection.send(PerfPattern.slice(at: sent, count: piece), endOfStream: sent + piece == count)
            sent += piece
            calls += 1
        } while sent < count
        return calls
    }

    /// Receives up to `maximum` bytes per call until the peer's end of stream; returns the
    /// bytes and the number of receives that returned bytes. With `verify`, every byte is
    /// checked against the pattern from offset 0 (`intact`).
    package static func receiveAll<Stack: StreamProtocol>(
        from connection: NetworkConnection<Stack>, maximum: Int, verify: Bool = false
    ) async throws -> (bytes: Int, receives: Int, intact: Bool) {
        var bytes = 0, receives = 0, intact = true
        while true {
            let (content, metadata) = try await connection.receive(atLeast: 1, atMost: maximum)
            if !content.isEmpty {
                if verify && !PerfPattern.matches(content, at: bytes) { intact = false }
                bytes += content.count
                receives += 1
            }
            if metadata.isEndOfStream { return (bytes, receives, intact) }
        }
    }

    /// Echoes everything received, up to 64 KiB per call, until the peer's end of stream,
    /// which it mirrors.
    package static func echo<Stack: StreamProtocol>(on connection: NetworkConnection<Stack>) async throws {
        while true {
            let (content, metadata) = try await connection.receive(atLeast: 1, atMost: 65536)
            if !content.isEmpty || metadata.isEndOfStream {
                try await connection.send(content, endOfStream: metadata.isEndOfStream)
            }
            if metadata.isEndOfStream { return }
        }
    }
}
