import BraidCore
import BraidFramers
import BraidIO
import Foundation

extension NetworkConnection where ApplicationProtocol == WebSocket {
    /// Sends `content` as one binary message, or as the message the metadata's
    /// `NWProtocolWebSocket.Metadata` names (`.text`, `.ping`, `.pong`, `.close`). Starts the
    /// connection if needed; queued until the upgrade completes. Messages from concurrent
    /// senders never interleave.
    ///
    /// ```swift
    /// try await socket.send(Data([1, 2, 3]))
    /// try await socket.send(Data("are you there?".utf8)) { NWProtocolWebSocket.Metadata(opcode: .ping) }
    /// ```
    public func send<Content: DataProtocol>(
        _ content: Content, @ProtocolMetadataBuilder metadata builder: () -> [NWProtocolMetadata] = { [] }
    ) async throws {
        let metadata = webSocketMetadata(builder())
        let opcode = metadata?.opcode ?? .binary
        if opcode == .close {
            return try await sendMessage(Self.closePayload(code: metadata?.closeCode ?? .protocolCode(.normalClosure), reason: content), opcode: .close)
        }
        try await sendMessage(content, opcode: opcode)
    }

    /// Sends `content` as one text message.
    ///
    /// ```swift
    /// try await socket.send("hello")
    /// ```
    public func send(_ content: String, @ProtocolMetadataBuilder metadata builder: () -> [NWProtocolMetadata] = { [] }) async throws {
        let opcode = webSocketMetadata(builder())?.opcode ?? .text
        try await sendMessage(Array(content.utf8), opcode: opcode)
    }

    /// Sends a pong carrying `content` (at most 125 bytes): the answer to a ping received
    /// without `autoReplyPing`, or a heartbeat.
    ///
    /// ```swift
    /// let (ping, metadata) = try await socket.receive()
    /// if metadata.opcode == .ping { try await socket.pong(ping) }
    /// ```
    public func pong<Content: DataProtocol>(
        _ content: Content? = nil, @ProtocolMetadataBuilder metadata builder: () -> [NWProtocolMetadata] = { [] }
    ) async throws {
        try await sendMessage(content.map { Array($0) } ?? [], opcode: .pong)
    }

    /// Sends an empty pong.
    public func pong(@ProtocolMetadataBuilder metadata builder: () -> [NWProtocolMetadata] = { [] }) async throws {
        try await sendMessage([UInt8](), opcode: .pong)
    }

    /// Starts the close handshake: a close message with `code` and `reason` (at most 123
    /// bytes of UTF-8). The peer answers with its own close, which `receive()` delivers;
    /// messages sent after this one are dropped. `cancel()` afterwards closes the connection.
    ///
    /// ```swift
    /// try await socket.close(code: .protocolCode(.goingAway), reason: "shutting down")
    /// ```
    public func close(
        code: NWProtocolWebSocket.CloseCode = .protocolCode(.normalClosure), reason: String? = nil,
        @ProtocolMetadataBuilder metadata builder: () -> [NWProtocolMetadata] = { [] }
    ) async throws {
        try await sendMessage(Self.closePayload(code: code, reason: Array((reason ?? "").utf8)), opcode: .close)
    }

    /// The next whole message and what it is (`metadata.opcode`). Concurrent receives each
    /// get a different message, in order. After the peer's close (delivered with
    /// `metadata.closeCode`, its reason as the content) a receive throws
    /// `NetworkError.unexpectedEndOfStream`.
    ///
    /// ```swift
    /// let (content, metadata) = try await socket.receive()
    /// if metadata.opcode == .text { print(String(decoding: content, as: UTF8.self)) }
    /// ```
    public func receive() async throws -> (content: Data, metadata: WebSocket.Metadata) {
        let end = try webSocketEnd
        start()
        if let message = try end.decoded() { return Self.message(message) }
        guard let message = try await end.receive() else { throw MessageEnd.endedBetweenMessages }
        return Self.message(message)
    }

    /// Every message received, in order, until the peer's close (included).
    ///
    /// ```swift
    /// for try await (content, metadata) in socket.messages where metadata.opcode == .binary {
    ///     print("\(content.count) bytes")
    /// }
    /// ```
    public var messages: NetworkMessages<(content: Data, metadata: WebSocket.Metadata)> {
        let end = Result { try webSocketEnd }
        return NetworkMessages(poll: { try end.get().decoded().map(Self.message) }) { [self] in
            let framed = try end.get()
            start()
            return try await framed.receive().map(Self.message)
        }
    }

    /// The subprotocol the server chose in the upgrade (nil: none, or not ready yet), as
    /// `NWProtocolWebSocket.Metadata.selectedSubprotocol` names it: on a client, one of those
    /// it offered; on a listener's connection, the one it answered with.
    ///
    /// ```swift
    /// if socket.selectedSubprotocol == "chat.v2" { try await socket.send("hello, v2") }
    /// ```
    public var selectedSubprotocol: String? { shared.snapshot.withLock { $0.upgrade?.subprotocol } }

    /// The permessage-deflate parameters the server agreed to, as its
    /// `Sec-WebSocket-Extensions` response named them (nil: messages travel uncompressed, or
    /// not ready yet).
    ///
    /// ```swift
    /// print(socket.negotiatedExtensions ?? "uncompressed")
    /// ```
    public var negotiatedExtensions: String? { shared.snapshot.withLock { $0.upgrade?.extensions } }

    // MARK: Pieces

    var webSocketEnd: MessageEnd {
        get throws {
            guard let framedEnd else { throw NetworkError.internalError("a WebSocket connection without a message receiver") }
            return framedEnd
        }
    }

    private func webSocketMetadata(_ metadata: [NWProtocolMetadata]) -> NWProtocolWebSocket.Metadata? {
        metadata.lazy.compactMap { $0 as? NWProtocolWebSocket.Metadata }.first
    }

    /// Queues one message as a record the connection's WebSocket layer frames (type: the
    /// opcode). Control messages carry at most 125 bytes.
    private func sendMessage(_ content: some Collection<UInt8>, opcode: NWProtocolWebSocket.Opcode) async throws {
        guard let bytes = try queueWebSocketMessage(content, opcode: opcode) else { return }
        try await webSocketEnd.end.sendWaiting(bytes, endOfStream: false, idempotent: false, queued: start)
    }

    /// Queues one message at once if the connection has room (nil), else returns its framed
    /// bytes for `sendWaiting`; through the optional in place (no copy of the end per send).
    func queueWebSocketMessage(_ content: some Collection<UInt8>, opcode: NWProtocolWebSocket.Opcode) throws -> StreamBytes? {
        guard opcode != .cont else { throw NetworkError.invalidState("a continuation frame is not a message: send the whole message") }
        if opcode.isControl && content.count > 125 {
            throw NetworkError.messageTooLarge(size: content.count, maximum: 125)
        }
        guard framedEnd != nil else { throw NetworkError.internalError("a WebSocket connection without a message receiver") }
        return try framedEnd?.queueAtOnce(content, type: UInt32(opcode.wire), queued: start) ?? nil
    }

    /// A close frame's payload: the code, then as much of the reason as fits in 125 bytes.
    static func closePayload(code: NWProtocolWebSocket.CloseCode, reason: some Collection<UInt8>) -> [UInt8] {
        let raw = code.rawValue
        return [UInt8(raw >> 8), UInt8(raw & 0xFF)] + reason.prefix(123)
    }

    /// A record from the WebSocket layer as a message: its opcode, and a close's code and
    /// reason.
    static func message(_ record: TLVMessage) -> (content: Data, metadata: WebSocket.Metadata) {
        let opcode = NWProtocolWebSocket.Opcode(wire: UInt8(truncatingIfNeeded: record.type)) ?? .binary
        guard opcode == .close else {
            return (record.value, WebSocket.Metadata(opcode: opcode, closeCode: nil, isComplete: true, lastMessage: false))
        }
        let bytes = [UInt8](record.value)
        let code = bytes.count >= 2 ? NWProtocolWebSocket.CloseCode(rawValue: UInt16(bytes[0]) << 8 | UInt16(bytes[1])) : .protocolCode(.noStatusReceived)
        return (Data(bytes.dropFirst(2)), WebSocket.Metadata(opcode: .close, closeCode: code, isComplete: true, lastMessage: true))
    }
}
