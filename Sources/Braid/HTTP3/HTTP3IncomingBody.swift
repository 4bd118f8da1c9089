import BraidCore
import BraidHTTP3IO
import BraidIO
import Foundation

/// A message body as it arrives: a request's body in an HTTP/3 server handler, or a response's
/// body from `HTTP3Client.bytes(for:)`. The chunks come at the reader's pace: the peer gets
/// flow-control credit only as they are consumed, so a slow reader stops the peer.
///
/// ```swift
/// var total = 0
/// for try await chunk in body { total += chunk.count }
/// ```
///
/// A response body from `bytes(for:)` that is dropped before its end cancels its request
/// (H3_REQUEST_CANCELLED), so the server stops sending; a request body a handler leaves unread
/// does not (the response still goes out).
public struct HTTP3IncomingBody: AsyncSequence, Sendable {
    public typealias Element = Data
    let reader: Reader

    init(_ exchange: HTTP3Exchange, cancelsWhenDropped: Bool, keepingAlive owner: (any Sendable)? = nil) {
        reader = Reader(exchange: exchange, cancelsWhenDropped: cancelsWhenDropped, owner: owner)
    }

    /// The exchange, and whether the body ended; cancels an unfinished response when the last
    /// copy of the body goes away.
    final class Reader: Sendable {
        let exchange: HTTP3Exchange
        let cancelsWhenDropped: Bool
        let finished = Locked(false)
        /// What must live while the body is read (a client's connection).
        let owner: (any Sendable)?

        init(exchange: HTTP3Exchange, cancelsWhenDropped: Bool, owner: (any Sendable)?) {
            self.exchange = exchange
            self.cancelsWhenDropped = cancelsWhenDropped
            self.owner = owner
        }

        deinit {
            if cancelsWhenDropped && !finished.withLock({ $0 }) { exchange.cancel() }
        }

        func next() async throws -> Data? {
            let chunk = try await NetworkError.mapping { try await exchange.receiveBody(maximum: 256 * 1024) }
            if chunk == nil { finished.withLock { $0 = true } }
            return chunk
        }
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let reader: Reader

        /// The next chunk (at most 256 KiB), nil at the end of the body; throws
        /// `NetworkError` if the peer reset the stream or the connection ended.
        public mutating func next() async throws -> Data? {
            try await reader.next()
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(reader: reader) }

    /// The whole body, or `NetworkError.messageTooLarge` (and the request is cancelled) once
    /// it passes `maximum` bytes.
    ///
    /// ```swift
    /// let upload = try await body.collect(upTo: 10 * 1024 * 1024)
    /// ```
    public func collect(upTo maximum: Int) async throws -> Data {
        var all = Data()
        for try await chunk in self {
            guard all.count + chunk.count <= maximum else {
                reader.exchange.cancel()
                throw NetworkError.messageTooLarge(size: all.count + chunk.count, maximum: maximum)
            }
            all.append(chunk)
        }
        return all
    }
}
