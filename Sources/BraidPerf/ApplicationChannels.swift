import Braid
import Foundation

/// A reliable, ordered byte stream with an end each way, as the perf and echo applications
/// use it: a QUIC stream, a TLS or TCP connection, or a WebSocket connection
/// (`WebSocketChannel`).
package protocol ByteChannel: Sendable {
    func send<Bytes: Collection & Sendable>(_ bytes: Bytes, endOfStream: Bool) async throws where Bytes.Element == UInt8
    /// Bytes that may go before the handshake completes (QUIC's 0-RTT); elsewhere a plain send.
    func sendIdempotent<Bytes: Collection & Sendable>(_ bytes: Bytes, endOfStream: Bool) async throws where Bytes.Element == UInt8
    /// The next bytes (at most `maximum`; a WebSocket message whole), and whether the peer's
    /// end came with them.
    func receiveBytes(atMost maximum: Int) async throws -> (content: Data, endOfStream: Bool)
}

/// Whole messages both ways: QUIC datagrams, UDP and DTLS datagrams, WebSocket binary messages.
package protocol MessageChannel: Sendable {
    func sendMessage(_ message: Data) async throws
    /// Hands each message received to `body` until `body` returns false or the messages end.
    func receiveMessages(_ body: (Data) async throws -> Bool) async throws
    /// The largest message that fits, when the stack knows it (QUIC, once ready).
    var usableMessageSize: Int? { get }
    /// Whether every message arrives (WebSocket's), so none is ever sent twice.
    var isReliable: Bool { get }
}

extension MessageChannel {
    package var usableMessageSize: Int? { nil }
    package var isReliable: Bool { false }
}

extension QUIC.Stream: ByteChannel where ApplicationProtocol == QUICStream {
    package func receiveBytes(atMost maximum: Int) async throws -> (content: Data, endOfStream: Bool) {
        let (content, metadata) = try await receive(atLeast: 1, atMost: maximum)
        return (content, metadata.isEndOfStream)
    }
}

extension NetworkConnection: ByteChannel where ApplicationProtocol: StreamProtocol {
    /// A plain send: TLS's early data needs a ticket the tool's runs do not keep.
    package func sendIdempotent<Bytes: Collection & Sendable>(_ bytes: Bytes, endOfStream: Bool) async throws where Bytes.Element == UInt8 {
        try await send(bytes, endOfStream: endOfStream)
    }

    package func receiveBytes(atMost maximum: Int) async throws -> (content: Data, endOfStream: Bool) {
        let (content, metadata) = try await receive(atLeast: 1, atMost: maximum)
        return (content, metadata.isEndOfStream)
    }
}

/// A QUIC connection's datagrams (RFC 9221).
package struct QUICDatagramChannel: MessageChannel {
    let connection: NetworkConnection<QUIC>

    package func sendMessage(_ message: Data) async throws { try await connection.datagrams.send(message) }

    package func receiveMessages(_ body: (Data) async throws -> Bool) async throws {
        for await datagram in connection.datagrams where try await !body(datagram) { return }
    }

    package var usableMessageSize: Int? { connection.usableDatagramFrameSize }
}

/// A UDP connection's datagrams.
package struct UDPMessageChannel: MessageChannel {
    let connection: NetworkConnection<UDP>

    package func sendMessage(_ message: Data) async throws { try await connection.send(message) }

    package func receiveMessages(_ body: (Data) async throws -> Bool) async throws {
        for try await (content, _) in connection.messages where try await !body(content) { return }
    }
}

/// A DTLS connection's datagrams.
package struct DTLSMessageChannel: MessageChannel {
    let connection: NetworkConnection<DTLS>

    package func sendMessage(_ message: Data) async throws { try await connection.send(message) }

    package func receiveMessages(_ body: (Data) async throws -> Bool) async throws {
        for try await (content, _) in connection.messages where try await !body(content) { return }
    }
}

/// A WebSocket connection as both channels: each message is one binary message; as a byte
/// stream, each send is one binary message and an empty binary message marks the end of the
/// stream (WebSocket has no half-close: its close ends both directions).
package struct WebSocketChannel: ByteChannel, MessageChannel {
    let connection: NetworkConnection<WebSocket>

    package init(_ connection: NetworkConnection<WebSocket>) { self.connection = connection }

    package func send<Bytes: Collection & Sendable>(_ bytes: Bytes, endOfStream: Bool) async throws where Bytes.Element == UInt8 {
        if !bytes.isEmpty { try await connection.send(Data(bytes)) }
        if endOfStream { try await connection.send(Data()) }
    }

    package func sendIdempotent<Bytes: Collection & Sendable>(_ bytes: Bytes, endOfStream: Bool) async throws where Bytes.Element == UInt8 {
        try await send(bytes, endOfStream: endOfStream)
    }

    package func receiveBytes(atMost maximum: Int) async throws -> (content: Data, endOfStream: Bool) {
        while true {
            let (content, metadata) = try await connection.receive()
            switch metadata.opcode {
            case .binary: return (content, content.isEmpty)
            case .close: throw NetworkError.unexpectedEndOfStream(received: 0, wanted: 1)
            default: continue
            }
        }
    }

    package var isReliable: Bool { true }

    package func sendMessage(_ message: Data) async throws { try await connection.send(message) }

    package func receiveMessages(_ body: (Data) async throws -> Bool) async throws {
        for try await (content, metadata) in connection.messages {
            if metadata.opcode == .close { return }
            guard metadata.opcode == .binary else { continue }
            if try await !body(content) { return }
        }
    }
}
