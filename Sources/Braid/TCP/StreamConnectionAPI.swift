import BraidIO
import Foundation

/// Per-receive information of a byte stream (a TLS or TCP connection, or a QUIC stream):
/// whether the content ends the stream.
public struct StreamMetadata: Sendable, Hashable {
    /// The peer finished the stream with this content (FIN, or TLS close_notify); nothing follows.
    public var isEndOfStream: Bool
}

/// A protocol whose connections carry one byte stream each way, sent and received on the
/// connection itself (`TLS`, `TCP`).
public protocol StreamProtocol: NetworkProtocol {}

extension TLS: StreamProtocol {}
extension TCP: StreamProtocol {}

extension NetworkConnection where ApplicationProtocol: StreamProtocol {
    /// The connection's byte stream. Every TLS and TCP connection has one (its core was made
    /// for the stack).
    var byteStream: ByteStreamEnd {
        get throws {
            guard let end = shared.byteStream?.end else { throw NetworkError.internalError("a \(ApplicationProtocol.self) connection without a byte stream") }
            return end
        }
    }

    /// Sends `content`; with `endOfStream`, finishes this side after it (TCP FIN; with TLS,
    /// close_notify first). Starts the connection if needed and waits for it to be ready. Returns
    /// once the connection has taken the bytes: at once for up to 64 KiB that fit under
    /// `TCP.sendBufferLimit`, else once they are with the socket (or TLS).
    ///
    /// ```swift
    /// try await connection.send(Data("Hello, world!".utf8))
    /// ```
    public func send<Content: Collection & Sendable>(_ content: Content, endOfStream: Bool = false) async throws
    where Content.Element == UInt8 {
        guard let storage = try queueAtOnce(content, endOfStream: endOfStream) else { return }
        try await byteStream.sendWaiting(storage, endOfStream: endOfStream, idempotent: false, queued: start)
    }

    /// `ByteStreamEnd.queueAtOnce(copying:)` on the connection's own end, outside the async
    /// call and in place in its part: a copy of the end into the async frame cost a reference
    /// count per part, per send.
    func queueAtOnce(_ content: some Collection<UInt8> & Sendable, endOfStream: Bool) throws -> StreamOutbox.Storage? {
        guard let part = shared.byteStream else {
            _ = try byteStream  // throws the missing stream's error
            return nil
        }
        return try part.end.queueAtOnce(copying: content, endOfStream: endOfStream, queued: start)
    }

    /// Sends an integer in network byte order.
    public func send<Integer: FixedWidthInteger & Sendable>(_ value: Integer) async throws {
        try await byteStream.send(ByteStreamEnd.bytes(of: value), endOfStream: false, idempotent: false, queued: start)
    }

    /// Exactly `count` bytes; throws `NetworkError.unexpectedEndOfStream` if the peer finishes
    /// first (the bytes stay queued for a smaller receive).
    ///
    /// ```swift
    /// let incoming = try await connection.receive(exactly: 98).content
    /// ```
    public func receive(exactly count: Int) async throws -> (content: Data, metadata: StreamMetadata) {
        start()
        return try await byteStream.receive(exactly: count)
    }

    /// Between `minimum` and `maximum` bytes; fewer than `minimum` only at the end of the
    /// stream (`metadata.isEndOfStream`, possibly with empty content).
    public func receive(atLeast minimum: Int = 1, atMost maximum: Int) async throws -> (content: Data, metadata: StreamMetadata) {
        start()
        return try await byteStream.receive(atLeast: minimum, atMost: maximum)
    }

    /// An integer sent in network byte order, with the receive's metadata.
    ///
    /// ```swift
    /// let length = try await connection.receive(as: UInt32.self).content
    /// ```
    public func receive<Integer: FixedWidthInteger & Sendable>(
        as type: Integer.Type
    ) async throws -> (content: Integer, metadata: StreamMetadata) {
        start()
        return try await byteStream.receive(as: type)
    }

    /// Whether the connection runs Multipath TCP, once ready: false unless the parameters
    /// asked for it (`multipathServiceType`), and false when they did but the kernel or the
    /// peer lacks MPTCP and the connection fell back to plain TCP.
    public var isMultipath: Bool { shared.snapshot.withLock { $0.multipath } }

}

extension NetworkConnection where ApplicationProtocol == TLS {
    /// The application protocol both ends agreed on (ALPN), once ready; nil if none was.
    public var negotiatedALPN: String? { shared.snapshot.withLock { $0.negotiatedALPN } }

    /// Braid: whether the handshake resumed an earlier session (a client's ticket from
    /// `TLS.sessionCache`, accepted by the server; on a listener's connection, a client's), set
    /// once ready; false before, and after a full handshake.
    public var isResumed: Bool { shared.snapshot.withLock { $0.resumed } }

    /// Client: whether the server accepted the early data `sendIdempotent` sent. Listener:
    /// whether this connection received early data. Set once ready.
    public var earlyDataAccepted: Bool { shared.snapshot.withLock { $0.earlyDataAccepted } }

    /// Like `send`, but on a connection that resumes (a `TLS.sessionCache` holds a ticket for
    /// the server) with `TLS.earlyDataEnabled(true)`, bytes sent before the connection starts
    /// travel as TLS 1.3 early data with the ClientHello, up to the ticket's limit (the server's
    /// `maxEarlyDataSize`, 16 KiB by default); the rest, and a send that ends the stream, wait
    /// for the handshake. If the server refuses early data, Braid sends the bytes again after
    /// the handshake, in order; `earlyDataAccepted` tells which happened. An attacker can
    /// replay early data, so send only requests that are safe to repeat.
    ///
    /// ```swift
    /// let connection = NetworkConnection(to: endpoint) { TLS().earlyDataEnabled(true).sessionCache(cache) }
    /// try await connection.sendIdempotent(Data("GET /status\n".utf8))
    /// ```
    public func sendIdempotent<Content: Collection & Sendable>(_ content: Content, endOfStream: Bool = false) async throws
    where Content.Element == UInt8 {
        guard let end = shared.byteStream?.end else { throw NetworkError.internalError("a TLS connection without a byte stream") }
        // Queued before the connection starts, so a resumed connection finds them for early data.
        try await end.send(StreamBytes(copying: content), endOfStream: endOfStream, idempotent: true, queued: start)
    }
}

extension NetworkConnection {
    /// The peer's address and port as IP literals, once ready (nil before).
    public var remoteEndpoint: NWEndpoint? { shared.snapshot.withLock { $0.remoteEndpoint } }
    /// The local address and port the connection sends from, once ready (nil before); a QUIC
    /// connection's `migrate()` updates it.
    public var localEndpoint: NWEndpoint? { shared.snapshot.withLock { $0.localEndpoint } }
}
