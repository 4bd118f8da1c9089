import Dispatch
import Foundation
import Testing

@testable import Braid

/// WebSocket in the classic API, as Apple's examples write it: `NWProtocolWebSocket.Options`
/// inserted first in `defaultProtocolStack.applicationProtocols`, `NWConnection(to: .url(...))`,
/// each message's opcode and close code in `NWProtocolWebSocket.Metadata` of its content
/// context; against a new-API listener, and an `NWListener` against a new-API client.
@Suite(.timeLimit(.minutes(3))) struct NWConnectionWebSocketTests {
    static func context(_ opcode: NWProtocolWebSocket.Opcode, code: NWProtocolWebSocket.CloseCode? = nil) -> NWConnection.ContentContext {
        let metadata = NWProtocolWebSocket.Metadata(opcode: opcode)
        if let code { metadata.closeCode = code }
        return NWConnection.ContentContext(identifier: "\(opcode)", metadata: [metadata])
    }

    /// `receiveMessage` with the message's WebSocket metadata.
    static func receive(_ connection: NWConnection) async -> (content: Data?, metadata: NWProtocolWebSocket.Metadata?, error: NWError?) {
        await withCheckedContinuation { continuation in
            connection.receiveMessage { content, context, _, error in
                let metadata = context?.protocolMetadata.lazy.compactMap { $0 as? NWProtocolWebSocket.Metadata }.first
                continuation.resume(returning: (content, metadata, error))
            }
        }
    }

    @Test func classicClientTalksToABraidListenerOverTLS() async throws {
        let server = try await RunningFramedListener.start(WebSocket { testTLSServer() }, handler: WebSocketConnectionTests.echo)
        defer { server.task.cancel() }
        let parameters = NWConnectionTLSTests.parameters(alpn: ["echo"])
        let options = NWProtocolWebSocket.Options()
        options.setSubprotocols(["chat"])
        parameters.defaultProtocolStack.applicationProtocols.insert(options, at: 0)
        let connection = NWConnection(to: .url(URL(string: "wss://localhost:\(server.listener.port!.rawValue)/chat")!), using: parameters)
        defer { connection.cancel() }
        let states = StateRecorder(connection)
        connection.start(queue: DispatchQueue(label: "client"))
        try await states.wait(for: "ready") { $0 == .ready }

        #expect(await connection.sendAsync(Data("hello".utf8), context: Self.context(.text)) == nil)
        let text = await Self.receive(connection)
        #expect(text.error == nil && text.content == Data("hello".utf8) && text.metadata?.opcode == .text)

        #expect(await connection.sendAsync(Data([1, 2, 3])) == nil)
        let binary = await Self.receive(connection)
        #expect(binary.content == Data([1, 2, 3]) && binary.metadata?.opcode == .binary)

        #expect(await connection.sendAsync(Data("hi".utf8), context: Self.context(.ping)) == nil)
        let pong = await Self.receive(connection)
        #expect(pong.content == Data("hi".utf8) && pong.metadata?.opcode == .pong)

        #expect(await connection.sendAsync(nil, context: Self.context(.close, code: .protocolCode(.goingAway))) == nil)
        let close = await Self.receive(connection)
        #expect(close.metadata?.opcode == .close && close.metadata?.closeCode == .protocolCode(.goingAway))
    }

    @Test func classicListenerAnswersANewAPIClientOverTCP() async throws {
        let parameters = NWParameters.tcp
        parameters.defaultProtocolStack.applicationProtocols.insert(NWProtocolWebSocket.Options(), at: 0)
        let listener = try NWListener(using: parameters)
        defer { listener.cancel() }
        let queue = DispatchQueue(label: "listener")
        listener.newConnectionHandler = { connection in
            connection.start(queue: queue)
            @Sendable func echo() {
                connection.receiveMessage { content, context, _, error in
                    guard error == nil, let context else { return }
                    connection.send(content: content, contentContext: context, isComplete: true, completion: .contentProcessed { _ in })
                    echo()
                }
            }
            echo()
        }
        let (ready, report) = AsyncStream.makeStream(of: NWEndpoint.Port?.self)
        listener.stateUpdateHandler = { state in
            if case .ready = state { report.yield(listener.port) }
        }
        listener.start(queue: queue)
        var iterator = ready.makeAsyncIterator()
        let port = try #require(await iterator.next() ?? nil)

        let client = NetworkConnection(to: .url(URL(string: "ws://127.0.0.1:\(port.rawValue)/")!)) { WebSocket { TCP() } }
        defer { client.cancel() }
        try await client.send("over the classic listener")
        let (content, metadata) = try await client.receive()
        #expect(metadata.opcode == .text)
        #expect(String(decoding: content, as: UTF8.self) == "over the classic listener")
    }

    /// The classic options with compression and several subprotocols against a new-API
    /// listener: the connection's WebSocket metadata names the subprotocol the listener
    /// picked, and compressed messages echo back.
    @Test func classicClientCompressesAndReportsTheSelectedSubprotocol() async throws {
        let server = try await RunningFramedListener.start(
            WebSocket { TCP() }.subprotocols(["chat", "v1"]).perMessageDeflate(NWProtocolWebSocket.PerMessageDeflate()),
            handler: WebSocketConnectionTests.echo)
        defer { server.task.cancel() }
        let parameters = NWParameters.tcp
        let options = NWProtocolWebSocket.Options()
        options.setSubprotocols(["v1", "chat"])
        options.perMessageDeflate = NWProtocolWebSocket.PerMessageDeflate()
        parameters.defaultProtocolStack.applicationProtocols.insert(options, at: 0)
        let connection = NWConnection(to: .url(URL(string: "ws://127.0.0.1:\(server.listener.port!.rawValue)/")!), using: parameters)
        defer { connection.cancel() }
        let states = StateRecorder(connection)
        connection.start(queue: DispatchQueue(label: "client"))
        try await states.wait(for: "ready") { $0 == .ready }

        let webSocket = connection.metadata(definition: NWProtocolWebSocket.definition) as? NWProtocolWebSocket.Metadata
        #expect(webSocket?.selectedSubprotocol == "v1")
        #expect(connection.metadata(definition: NWProtocolTLS.definition) == nil)
        let text = String(repeating: "compress me ", count: 10_000)
        #expect(await connection.sendAsync(Data(text.utf8), context: Self.context(.text)) == nil)
        let echoed = await Self.receive(connection)
        #expect(echoed.error == nil && echoed.content == Data(text.utf8) && echoed.metadata?.opcode == .text)
    }
}
