import BraidIO
import Foundation

/// A request body as an HTTP/3 server handler receives it: the chunks as they arrive, at the
/// handler's pace (the peer gets flow-control credit only as they are consumed).
///
/// ```swift
/// var total = 0
/// for try await chunk in body { total += chunk.count }
/// ```
public struct HTTP3RequestBody: AsyncSequence, Sendable {
    public typealias Element = Data
    let exchange: HTTP3Exchange

    init(_ exchange: HTTP3Exchange) {
        self.exchange = exchange
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let exchange: HTTP3Exchange

        /// The next chunk (at most 256 KiB), nil at the end of the body; throws
        /// `NetworkError` if the client reset the request or the connection ended.
        public mutating func next() async throws -> Data? {
            try await NetworkError.mapping { try await exchange.receiveBody(maximum: 256 * 1024) }
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(exchange: exchange) }

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
                exchange.cancel()
                throw NetworkError.messageTooLarge(size: all.count + chunk.count, maximum: maximum)
            }
            all.append(chunk)
        }
        return all
    }
}
