import BraidWebSocket

/// Helpers for the engine's tests: two engines joined in memory, frames built by hand (masked
/// or not), and the frames an engine queued, read back.
enum WebSocketTesting {
    static func client(_ change: (inout WebSocketConnection.Configuration) -> Void = { _ in }) -> WebSocketConnection {
        var configuration = WebSocketConnection.Configuration(role: .client)
        configuration.host = "example.com"
        configuration.path = "/chat"
        change(&configuration)
        return WebSocketConnection(configuration: configuration)
    }

    static func server(_ change: (inout WebSocketConnection.Configuration) -> Void = { _ in }) -> WebSocketConnection {
        var configuration = WebSocketConnection.Configuration(role: .server)
        change(&configuration)
        return WebSocketConnection(configuration: configuration)
    }

    /// Everything `from` has queued, handed to `to`.
    static func move(_ from: WebSocketConnection, to: WebSocketConnection) throws {
        var bytes: [UInt8] = []
        _ = from.withPendingOutput { bytes.append(contentsOf: $0); return $0.count }
        try bytes.withUnsafeBytes { try to.receive($0) }
    }

    /// A client and a server with the upgrade done.
    static func openPair(
        client change: (inout WebSocketConnection.Configuration) -> Void = { _ in },
        server serverChange: (inout WebSocketConnection.Configuration) -> Void = { _ in }
    ) throws -> (client: WebSocketConnection, server: WebSocketConnection) {
        let client = client(change), server = server(serverChange)
        client.start()
        server.start()
        try move(client, to: server)
        try move(server, to: client)
        guard client.isOpen, server.isOpen else { throw WebSocketError.handshakeFailed("the pair did not open") }
        return (client, server)
    }

    static func events(_ engine: WebSocketConnection) -> [WebSocketConnection.Event] {
        var events: [WebSocketConnection.Event] = []
        while let event = engine.pollEvent() { events.append(event) }
        return events
    }

    /// One frame's bytes; masked with `mask` when given.
    static func frame(
        _ opcode: UInt8, _ payload: [UInt8], fin: Bool = true, reserved: UInt8 = 0, mask: (UInt8, UInt8, UInt8, UInt8)? = (1, 2, 3, 4),
        lengthOverride: UInt64? = nil
    ) -> [UInt8] {
        var bytes: [UInt8] = []
        WebSocketFrameHeader(fin: fin, reserved: reserved, opcode: opcode, maskKey: mask, length: lengthOverride ?? UInt64(payload.count))
            .write(into: &bytes)
        var body = payload
        if let mask { body.withUnsafeMutableBytes { WebSocketFrameHeader.mask($0, key: mask, offset: 0) } }
        return bytes + body
    }

    /// The frames `engine` queued, unmasked: (opcode, payload).
    static func sentFrames(_ engine: WebSocketConnection) -> [(opcode: UInt8, payload: [UInt8])] {
        var bytes: [UInt8] = []
        _ = engine.withPendingOutput { bytes.append(contentsOf: $0); return $0.count }
        var parser = WebSocketFrameParser()
        var frames: [(UInt8, [UInt8])] = []
        var current: WebSocketFrameHeader?
        var payload: [UInt8] = []
        try? bytes.withUnsafeBytes { buffer in
            try parser.parse(buffer) { piece in
                switch piece {
                case .header(let header):
                    current = header
                    payload = []
                case .payload(let piece, _):
                    payload.append(contentsOf: piece)
                case .frameEnd:
                    if let key = current?.maskKey { payload.withUnsafeMutableBytes { WebSocketFrameHeader.mask($0, key: key, offset: 0) } }
                    frames.append((current!.opcode, payload))
                }
            }
        }
        return frames
    }

    /// Everything `engine` queued, as bytes.
    static func sentBytes(_ engine: WebSocketConnection) -> [UInt8] {
        var bytes: [UInt8] = []
        _ = engine.withPendingOutput { bytes.append(contentsOf: $0); return $0.count }
        return bytes
    }

    /// A close frame's code.
    static func closeCode(_ payload: [UInt8]) -> UInt16? {
        payload.count >= 2 ? UInt16(payload[0]) << 8 | UInt16(payload[1]) : nil
    }
}
