import Braid
import Foundation

/// The `echo` application over the public API, as `braid serve` runs it: every client-opened
/// bidirectional stream is echoed byte for byte with its end mirrored, every client-opened
/// unidirectional stream read to its end and dropped, every datagram echoed.
package enum EchoService {
    package static let alpn = "echo"

    /// Serves one connection until it ends.
    package static func serve(_ connection: NetworkConnection<QUIC>) async throws {
        try await withThrowingDiscardingTaskGroup { group in
            group.addTask {
                for await datagram in connection.datagrams { try await echo(datagram, on: connection) }
            }
            try await connection.inboundStreams(serve)
        }
    }

    /// Echoes one datagram. One that does not fit this end's packets yet (path-MTU discovery
    /// may still be raising the size) is dropped, as the network could have dropped it.
    package static func echo(_ datagram: Data, on connection: NetworkConnection<QUIC>) async throws {
        try await echo(datagram, on: QUICDatagramChannel(connection: connection))
    }

    /// Echoes one message; one too large for the channel is dropped, as the network could have
    /// dropped it.
    package static func echo(_ message: Data, on channel: some MessageChannel) async throws {
        do {
            try await channel.sendMessage(message)
        } catch NetworkError.datagramTooLarge {
        }
    }

    /// Echoes one client stream until its end. A unidirectional stream has no way back: it is
    /// read to its end and dropped, so its credit returns to the client.
    package static func serve(_ stream: QUIC.Stream<QUICStream>) async throws {
        guard stream.directionality == .bidirectional else {
            while try await !stream.receiveBytes(atMost: 65536).endOfStream {}
            return
        }
        try await serve(channel: stream)
    }

    /// Echoes one byte stream until its end, which it mirrors; returns the bytes echoed.
    @discardableResult
    package static func serve(channel: some ByteChannel) async throws -> Int {
        var count = 0
        while true {
            let (content, endOfStream) = try await channel.receiveBytes(atMost: 65536)
            try await channel.send(content, endOfStream: endOfStream)
            count += content.count
            if endOfStream { return count }
        }
    }
}

/// The `perf` application (after draft-banks-quic-performance) over the public API: on each
/// client-opened bidirectional stream the client sends the response size it wants as an
/// 8-byte big-endian integer, then optional upload bytes, then its end; the server reads and
/// discards the upload, then sends that many pattern bytes (`PerfPattern`) and its end.
package enum PerfService {
    package static let alpn = "perf"

    /// What the server saw on one stream.
    package struct Exchange: Sendable {
        package var requested: UInt64
        package var uploaded: Int
        /// The upload bytes were the pattern (as `braid client` sends it).
        package var uploadIntact: Bool
    }

    /// Serves one connection until it ends; `onExchange` hears of every completed stream.
    package static func serve(
        _ connection: NetworkConnection<QUIC>, onExchange: @escaping @Sendable (Exchange) -> Void = { _ in }
    ) async throws {
        try await connection.inboundStreams { stream in
            if let exchange = try await serve(stream) { onExchange(exchange) }
        }
    }

    /// Serves one client stream: reads the request and the upload, sends the response.
    package static func serve(_ stream: QUIC.Stream<QUICStream>) async throws -> Exchange? {
        guard stream.directionality == .bidirectional else { return nil }
        return try await serve(channel: stream)
    }

    /// Serves one exchange on a byte stream: reads the request and the upload, sends the response.
    package static func serve(channel: some ByteChannel) async throws -> Exchange {
        var request = PerfRequest()
        while !request.isComplete {
            let (content, endOfStream) = try await channel.receiveBytes(atMost: 1 << 20)
            try request.append(content, endOfStream: endOfStream)
        }
        let exchange = Exchange(requested: request.requested ?? 0, uploaded: request.uploaded, uploadIntact: request.uploadIntact)
        try await sendPattern(count: request.responseSize, on: channel)
        return exchange
    }

    /// Sends `count` pattern bytes and the stream's end, 256 KiB per call: large pieces keep
    /// the per-call costs (a copy into the engine's memory, a lock round) small per byte.
    package static func sendPattern(count: Int, on stream: some ByteChannel, onBytes: (Int) -> Void = { _ in }) async throws {
        var sent = 0
        repeat {
            let piece = min(PerfPattern.maxSlice, count - sent)
            try await stream.send(PerfPattern.slice(at: sent, count: piece), endOfStream: sent + piece == count)
            sent += piece
            onBytes(piece)
        } while sent < count
    }

    /// Reads the stream to its end, checking the bytes against the pattern from offset 0
    /// unless `verify` is false (then `intact` is always true); `onBytes` hears how many
    /// arrived each time.
    package static func receivePattern(
        from stream: some ByteChannel, verify: Bool = true, onBytes: (Int) -> Void = { _ in }
    ) async throws -> (count: Int, intact: Bool) {
        var count = 0, intact = true
        while true {
            let (content, endOfStream) = try await stream.receiveBytes(atMost: 1 << 20)
            if verify && intact && !PerfPattern.matches(content, at: count) { intact = false }
            count += content.count
            onBytes(content.count)
            if endOfStream { return (count, intact) }
        }
    }
}
