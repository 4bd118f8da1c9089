import Braid
import BraidPerf
import Foundation
import Testing

/// Braid's WebSocket against Python's `websockets` (PyPI), an independent implementation, both
/// ways, over TCP (`ws`) and TLS (`wss`), with `Tests/Interop/peers/websockets_peer.py` on the
/// other side: the upgrade (path, query, subprotocol, an added header), text and binary
/// messages up to 1 MiB, fragments, ping and pong, the close handshake with its code and
/// reason; and a raw-socket client breaking RFC 6455 in each way a hostile peer can, answered
/// by the Braid listener's close with the right code.
@Suite(.serialized, .timeLimit(.minutes(10))) struct WebSocketInteropTests {
    enum Scheme: String, CaseIterable, Sendable {
        case ws, wss
    }

    static func peer(_ arguments: [String]) throws -> ChildProcess {
        try ChildProcess(try PeerProcess.aioquicPython, [PeerProcess.repository.appendingPathComponent("Tests/Interop/peers/websockets_peer.py").path] + arguments)
    }

    static func braidServer(_ scheme: Scheme, maximumMessageSize: Int = 16 << 20) -> WebSocket {
        switch scheme {
        case .ws: WebSocket { TCP() }.subprotocols(["chat"]).maximumMessageSize(maximumMessageSize)
        case .wss:
            WebSocket { TLS().identity(certificateChainFile: Fixtures.path("server.pem"), privateKeyFile: Fixtures.path("server-key.pem")) }
                .subprotocols(["chat"]).maximumMessageSize(maximumMessageSize)
        }
    }

    /// The Braid listener's application: echoes, answers pings, ends at the close.
    @Sendable static func echo(_ connection: NetworkConnection<WebSocket>) async throws {
        for try await (content, metadata) in connection.messages {
            switch metadata.opcode {
            case .text: try await connection.send(String(decoding: content, as: UTF8.self))
            case .binary: try await connection.send(content)
            case .ping: try await connection.pong(content)
            default: break
            }
        }
    }

    @Test(arguments: Scheme.allCases)
    func braidClientTalksToAWebsocketsServer(_ scheme: Scheme) async throws {
        var arguments = ["server", "--port", "0", "--subprotocols", "other,chat"]
        if scheme == .wss { arguments += ["--cert", Fixtures.path("server.pem"), "--key", Fixtures.path("server-key.pem")] }
        let server = try Self.peer(arguments)
        defer { Task { await server.stop() } }
        let port = try await server.listeningPort()
        let url = URL(string: "\(scheme.rawValue)://127.0.0.1:\(port)/room/7?user=ann")!
        let stack: WebSocket =
            switch scheme {
            case .ws: WebSocket { TCP() }
            case .wss: WebSocket { TLS().trust(.certificateAuthorities(file: Fixtures.caFile)).serverName("localhost") }
            }
        let connection = NetworkConnection(to: .url(url)) {
            stack.subprotocols(["chat"]).additionalHeaders([(name: "X-Braid", value: "yes")])
        }
        defer { connection.cancel() }

        for text in ["hello", "κόσμε", ""] {
            try await connection.send(text)
            let (content, metadata) = try await connection.receive()
            #expect(metadata.opcode == .text)
            #expect(String(decoding: content, as: UTF8.self) == text)
        }
        for size in [0, 125, 126, 65536, 1 << 20] {
            let bytes = Data(pattern(seed: UInt64(size), count: size))
            try await connection.send(bytes)
            let (content, metadata) = try await connection.receive()
            #expect(metadata.opcode == .binary)
            #expect(content == bytes)
        }
        try await connection.send("fragments")
        #expect(try await connection.receive().content == Data("fragmented".utf8))
        // The server pings; Braid delivers the ping (no autoReplyPing) and the application answers.
        try await connection.send("ping-me")
        let (ping, pingMetadata) = try await connection.receive()
        #expect(pingMetadata.opcode == .ping)
        #expect(ping == Data("from-python".utf8))
        try await connection.pong(ping)
        #expect(try await connection.receive().content == Data("pong-ok".utf8))
        // Braid's own ping, answered by websockets.
        try await connection.send(Data("braid".utf8)) { NWProtocolWebSocket.Metadata(opcode: .ping) }
        let pong = try await connection.receive()
        #expect(pong.metadata.opcode == .pong && pong.content == Data("braid".utf8))

        try await connection.close(code: .applicationCode(3001), reason: "finished")
        let (_, closeMetadata) = try await connection.receive()
        #expect(closeMetadata.opcode == .close)
        #expect(closeMetadata.closeCode == .applicationCode(3001))
        connection.cancel()

        let opened = try await server.jsonLine { $0["event"] as? String == "open" }
        #expect(opened["path"] as? String == "/room/7?user=ann")
        #expect(opened["subprotocol"] as? String == "chat")
        #expect(opened["x_braid"] as? String == "yes")
        let closed = try await server.jsonLine(within: 30) { $0["event"] as? String == "closed" }
        #expect(closed["code"] as? Int == 3001, "\(closed)")
        #expect(closed["reason"] as? String == "finished")
        #expect(closed["pong"] as? Bool == true)
    }

    @Test(arguments: Scheme.allCases)
    func websocketsClientTalksToABraidListener(_ scheme: Scheme) async throws {
        let server = try await RunningFramedListener.start(Self.braidServer(scheme), handler: Self.echo)
        defer { server.task.cancel() }
        var arguments = ["client", "--url", "\(scheme.rawValue)://127.0.0.1:\(server.listener.port!.rawValue)/", "--subprotocol", "chat"]
        if scheme == .wss { arguments += ["--ca", Fixtures.caFile] }
        let report = try await runClient(try Self.peer(arguments), within: 150)
        #expect(report["error"] is NSNull, "\(report)")
        #expect(report["ok"] as? Bool == true)
        #expect(report["subprotocol"] as? String == "chat")
        #expect(report["echoes_ok"] as? Bool == true)
        #expect(report["fragmented_ok"] as? Bool == true)
        #expect(report["pong_ok"] as? Bool == true)
        // Braid's engine answers the close with the client's code.
        #expect(report["close_code"] as? Int == 1001)
    }

    static let hostileCases: [(String, Int)] = [
        ("unmasked", 1002), ("reserved-bit", 1002), ("reserved-opcode", 1002), ("invalid-utf8", 1007), ("oversize", 1009),
        ("fragmented-ping", 1002), ("long-ping", 1002), ("bad-close-code", 1002), ("one-byte-close", 1002),
    ]

    @Test(arguments: Scheme.allCases)
    func hostileClientGetsTheRightCloseCode(_ scheme: Scheme) async throws {
        // Each connection fails on its peer's violation; the listener goes on.
        let server = try await RunningFramedListener.start(Self.braidServer(scheme, maximumMessageSize: 1000)) { connection in
            for try await _ in connection.messages {}
        }
        defer { server.task.cancel() }
        for (name, code) in Self.hostileCases {
            var arguments = ["hostile", "--port", String(server.listener.port!.rawValue), "--case", name]
            if scheme == .wss { arguments += ["--ca", Fixtures.caFile] }
            let report = try await runClient(try Self.peer(arguments), within: 150)
            #expect(report["close_code"] as? Int == code, "\(name): \(report)")
        }
    }
}
