import Braid
import BraidPerf
import Foundation
import Testing

/// permessage-deflate between Braid and Python's `websockets` (which offers and accepts it by
/// default), both ways, with `Tests/Interop/peers/websockets_peer.py`: each side's parameters
/// negotiated as the other configured them, many messages over one compression context,
/// compressed fragmented messages, a 1 MiB message; the wire bytes each side read show the
/// messages travelled compressed. And the subprotocol the server picked among several offered,
/// as the connection reports it.
@Suite(.serialized, .timeLimit(.minutes(3))) struct WebSocketDeflateInteropTests {
    /// One compressible text, as the peer's `COMPRESSIBLE`.
    static let compressible = Array(repeating: "The quick brown fox jumps over the lazy dog; κόσμε.", count: 40).joined(separator: " ")

    static func deflate(_ change: (inout NWProtocolWebSocket.PerMessageDeflate) -> Void = { _ in }) -> NWProtocolWebSocket.PerMessageDeflate {
        var deflate = NWProtocolWebSocket.PerMessageDeflate()
        change(&deflate)
        return deflate
    }

    /// What a Braid client asks for, what the websockets server is told, and the response's
    /// extension value Braid must then report.
    struct ClientCase: Sendable, CustomTestStringConvertible {
        let name: String
        let deflate: NWProtocolWebSocket.PerMessageDeflate
        let serverArguments: [String]
        let secure: Bool
        let expected: String
        var testDescription: String { name }
    }

    static let clientCases = [
        // websockets' default server bounds both windows to 12 bits.
        ClientCase(
            name: "defaults", deflate: deflate(), serverArguments: [], secure: false,
            expected: "permessage-deflate; server_max_window_bits=12; client_max_window_bits=12"),
        ClientCase(
            name: "defaults over TLS", deflate: deflate(), serverArguments: [], secure: true,
            expected: "permessage-deflate; server_max_window_bits=12; client_max_window_bits=12"),
        ClientCase(
            name: "Braid asks for server_no_context_takeover and a 10-bit server window",
            deflate: deflate {
                $0.serverNoContextTakeover = true
                $0.serverMaximumWindowBits = 10
            }, serverArguments: [], secure: false,
            expected: "permessage-deflate; server_no_context_takeover; server_max_window_bits=10; client_max_window_bits=12"),
        ClientCase(
            name: "the server imposes client_no_context_takeover and a 9-bit client window", deflate: deflate(),
            serverArguments: ["--client-no-context-takeover", "--client-max-window-bits", "9"], secure: false,
            expected: "permessage-deflate; client_no_context_takeover; client_max_window_bits=9"),
        // zlib cannot compress with an 8-bit window: Braid sends stored blocks, which websockets
        // (whose own compressor needs 9 bits or more) inflates with its 8-bit window.
        ClientCase(
            name: "Braid's client window is 8 bits", deflate: deflate { $0.clientMaximumWindowBits = 8 }, serverArguments: [], secure: false,
            expected: "permessage-deflate; server_max_window_bits=12; client_max_window_bits=8"),
    ]

    @Test(arguments: clientCases)
    func braidClientCompressesWithAWebsocketsServer(_ test: ClientCase) async throws {
        var arguments = ["server", "--port", "0", "--subprotocols", "other,chat"] + test.serverArguments
        if test.secure { arguments += ["--cert", Fixtures.path("server.pem"), "--key", Fixtures.path("server-key.pem")] }
        let server = try WebSocketInteropTests.peer(arguments)
        defer { Task { await server.stop() } }
        let port = try await server.listeningPort()
        let url = URL(string: "\(test.secure ? "wss" : "ws")://127.0.0.1:\(port)/")!
        let stack: WebSocket =
            test.secure ? WebSocket { TLS().trust(.certificateAuthorities(file: Fixtures.caFile)).serverName("localhost") } : WebSocket { TCP() }
        let connection = NetworkConnection(to: .url(url)) { stack.subprotocols(["v3", "chat", "other"]).perMessageDeflate(test.deflate) }
        defer { connection.cancel() }

        for _ in 0 ..< 30 {
            try await connection.send(Self.compressible)
            #expect(try await connection.receive().content == Data(Self.compressible.utf8))
        }
        #expect(connection.negotiatedExtensions == test.expected)
        let big = String(repeating: Self.compressible + "\n", count: (1 << 20) / (Self.compressible.utf8.count + 1))
        try await connection.send(big)
        #expect(try await connection.receive().content == Data(big.utf8))
        // Binary that does not compress crosses too.
        let noise = Data(pattern(seed: 7, count: 200_000))
        try await connection.send(noise)
        #expect(try await connection.receive().content == noise)
        // websockets' compressed fragments, and many messages over its compression context.
        try await connection.send("fragments")
        #expect(try await connection.receive().content == Data("fragmented".utf8))
        try await connection.send("many 30")
        for _ in 0 ..< 30 {
            let (content, metadata) = try await connection.receive()
            #expect(metadata.opcode == .text && content == Data(Self.compressible.utf8))
        }
        try await connection.close(code: .protocolCode(.normalClosure), reason: "done")
        #expect(try await connection.receive().metadata.opcode == .close)
        connection.cancel()

        let opened = try await server.jsonLine { $0["event"] as? String == "open" }
        #expect(opened["extensions"] as? String == test.expected)
        // The server picked one of the subprotocols offered, and Braid reports the same.
        let picked = try #require(opened["subprotocol"] as? String)
        #expect(["chat", "other"].contains(picked))
        #expect(connection.selectedSubprotocol == picked)
        let closed = try await server.jsonLine(within: 30) { $0["event"] as? String == "closed" }
        let wire = try #require(closed["wire_bytes"] as? Int), messages = try #require(closed["message_bytes"] as? Int)
        #expect(messages > 1_100_000)
        // Braid's messages arrived compressed, but for the 8-bit windows' stored blocks.
        if test.deflate.clientMaximumWindowBits > 8 {
            #expect(wire < messages / 4, "\(wire) wire bytes for \(messages) message bytes")
        } else {
            #expect(wire > messages, "stored blocks do not shrink")
        }
    }

    /// What a Braid listener accepts with, what the websockets client offers, and the
    /// response's extension value.
    struct ListenerCase: Sendable, CustomTestStringConvertible {
        let name: String
        let deflate: NWProtocolWebSocket.PerMessageDeflate
        let clientArguments: [String]
        let expected: String
        var testDescription: String { name }
    }

    static let listenerCases = [
        ListenerCase(name: "defaults", deflate: deflate(), clientArguments: [], expected: "permessage-deflate"),
        ListenerCase(
            name: "the listener imposes server_no_context_takeover and a 10-bit client window",
            deflate: deflate {
                $0.serverNoContextTakeover = true
                $0.clientMaximumWindowBits = 10
            }, clientArguments: [], expected: "permessage-deflate; server_no_context_takeover; client_max_window_bits=10"),
        ListenerCase(
            name: "websockets asks for client_no_context_takeover and a 9-bit server window", deflate: deflate(),
            clientArguments: ["--client-no-context-takeover", "--server-max-window-bits", "9"],
            expected: "permessage-deflate; client_no_context_takeover; server_max_window_bits=9"),
    ]

    @Test(arguments: listenerCases)
    func websocketsClientCompressesWithABraidListener(_ test: ListenerCase) async throws {
        let server = try await RunningFramedListener.start(
            WebSocket { TCP() }.subprotocols(["chat"]).perMessageDeflate(test.deflate), handler: WebSocketInteropTests.echo)
        defer { server.task.cancel() }
        let arguments = ["client", "--url", "ws://127.0.0.1:\(server.listener.port!.rawValue)/", "--subprotocol", "chat", "--many", "30"]
        let report = try await runClient(try WebSocketInteropTests.peer(arguments + test.clientArguments))
        #expect(report["error"] is NSNull, "\(report)")
        #expect(report["extensions"] as? String == test.expected)
        #expect(report["echoes_ok"] as? Bool == true)
        #expect(report["fragmented_ok"] as? Bool == true)
        #expect(report["many_ok"] as? Bool == true)
        #expect(report["pong_ok"] as? Bool == true)
        #expect(report["close_code"] as? Int == 1001)
        let wire = try #require(report["wire_bytes"] as? Int), messages = try #require(report["message_bytes"] as? Int)
        #expect(messages > 1_000_000)
        #expect(wire < messages / 4, "Braid's echoes arrived compressed: \(wire) wire bytes for \(messages) message bytes")
    }

    @Test func websocketsClientWithoutCompressionGetsUncompressedMessages() async throws {
        let server = try await RunningFramedListener.start(
            WebSocket { TCP() }.perMessageDeflate(NWProtocolWebSocket.PerMessageDeflate()), handler: WebSocketInteropTests.echo)
        defer { server.task.cancel() }
        let arguments = ["client", "--url", "ws://127.0.0.1:\(server.listener.port!.rawValue)/", "--many", "10", "--no-compression"]
        let report = try await runClient(try WebSocketInteropTests.peer(arguments))
        #expect(report["error"] is NSNull, "\(report)")
        #expect(report["extensions"] is NSNull)
        #expect(report["many_ok"] as? Bool == true)
        let wire = try #require(report["wire_bytes"] as? Int), messages = try #require(report["message_bytes"] as? Int)
        #expect(wire > messages)
    }

    @Test func listenerReportsTheSubprotocolItPicked() async throws {
        // The listener prefers v2 but takes the client's first it supports.
        let server = try await RunningFramedListener.start(WebSocket { TCP() }.subprotocols(["v2", "v1"])) { connection in
            // Ready (and the subprotocol known) once the client's first message arrives.
            _ = try await connection.receive()
            try await connection.send(connection.selectedSubprotocol ?? "none")
            for try await _ in connection.messages {}
        }
        defer { server.task.cancel() }
        let client = NetworkConnection(to: .url(URL(string: "ws://127.0.0.1:\(server.listener.port!.rawValue)/")!)) {
            WebSocket { TCP() }.subprotocols(["v0", "v1", "v2"])
        }
        defer { client.cancel() }
        try await client.send("which?")
        let (content, _) = try await client.receive()
        #expect(String(decoding: content, as: UTF8.self) == "v1")
        #expect(client.selectedSubprotocol == "v1")
        #expect(client.negotiatedExtensions == nil)
    }
}
