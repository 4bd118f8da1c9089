import Dispatch
import Foundation
import Testing

@testable import Braid

/// What a WebSocket listener learns and decides in the upgrade, over loopback: the
/// subprotocol it selected, read on its own connection (new API: `selectedSubprotocol`;
/// classic: the connection's `NWProtocolWebSocket.Metadata`), and an application's own answer
/// to each request (`setClientRequestHandler(_:handler:)`, `clientRequestHandler(_:)`):
/// choosing among the client's subprotocols, seeing its header fields, refusing it.
@Suite(.timeLimit(.minutes(3))) struct WebSocketServerSubprotocolTests {
    /// A classic WebSocket listener over TCP answering requests with `handler`; each
    /// connection's selected subprotocol (read once it is ready) goes to `selected`, and its
    /// messages are echoed.
    private func classicListener(
        selected: Recorder<String?>,
        _ handler: @escaping @Sendable ([String], [(name: String, value: String)]) -> NWProtocolWebSocket.Response
    ) async throws -> (NWListener, NWEndpoint.Port) {
        let parameters = NWParameters.tcp
        let options = NWProtocolWebSocket.Options()
        options.setClientRequestHandler(DispatchQueue(label: "upgrades"), handler: handler)
        parameters.defaultProtocolStack.applicationProtocols.insert(options, at: 0)
        let listener = try NWListener(using: parameters)
        let queue = DispatchQueue(label: "listener")
        listener.newConnectionHandler = { connection in
            connection.stateUpdateHandler = { state in
                guard state == .ready else { return }
                let metadata = connection.metadata(definition: NWProtocolWebSocket.definition) as? NWProtocolWebSocket.Metadata
                selected.append(metadata?.selectedSubprotocol)
            }
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
            if case .failed = state { report.yield(nil) }
        }
        listener.start(queue: queue)
        var iterator = ready.makeAsyncIterator()
        let port = try #require(await iterator.next() ?? nil)
        return (listener, port)
    }

    /// Echoes text messages; with the first (the connection is ready by then), records the
    /// subprotocol the listener's connection reads.
    @Sendable static func echo(_ connection: NetworkConnection<WebSocket>, recordingInto selected: Recorder<String?>) async throws {
        var first = true
        for try await (content, metadata) in connection.messages where metadata.opcode == .text {
            if first { selected.append(connection.selectedSubprotocol) }
            first = false
            try await connection.send(String(decoding: content, as: UTF8.self))
        }
    }

    private func client(_ port: NWEndpoint.Port, offering subprotocols: [String]) -> NetworkConnection<WebSocket> {
        NetworkConnection(to: .url(URL(string: "ws://127.0.0.1:\(port.rawValue)/room")!)) {
            WebSocket { TCP() }.subprotocols(subprotocols).additionalHeaders([(name: "X-Room-Key", value: "amber")])
        }
    }

    /// The client's failure: its reason, which names the status the listener answered.
    private func handshakeFailure(of connection: NetworkConnection<WebSocket>) async throws -> String {
        do {
            try await connection.send("anyone?")
            _ = try await connection.receive()
        } catch let error as NetworkError {
            guard case .webSocketHandshakeFailed(let reason) = error else { return "\(error)" }
            return reason
        }
        Issue.record("the refused upgrade was not reported")
        return ""
    }

    /// The classic handler sees the client's offer in order and its header fields, and picks
    /// the second subprotocol; both ends read that choice, and messages flow.
    @Test func aClassicHandlerChoosesAmongTheClientsSubprotocols() async throws {
        let seen = Recorder<([String], String?)>(), selected = Recorder<String?>()
        let (listener, port) = try await classicListener(selected: selected) { subprotocols, headers in
            seen.append((subprotocols, headers.first { $0.name.lowercased() == "x-room-key" }?.value))
            return NWProtocolWebSocket.Response(
                status: .accept, subprotocol: subprotocols.last, additionalHeaders: [(name: "X-Served-By", value: "braid")])
        }
        defer { listener.cancel() }
        let connection = client(port, offering: ["chat.v1", "chat.v2"])
        defer { connection.cancel() }
        try await connection.send("hello")
        #expect(String(decoding: try await connection.receive().content, as: UTF8.self) == "hello")
        #expect(connection.selectedSubprotocol == "chat.v2")
        let asked = seen.values
        #expect(asked.count == 1 && asked.first?.0 == ["chat.v1", "chat.v2"] && asked.first?.1 == "amber")
        let chosen = try await withDeadline(.seconds(60)) { () -> String?? in
            while selected.values.isEmpty { try await Task.sleep(for: .milliseconds(20)) }
            return selected.values.first
        }
        #expect(chosen == "chat.v2")
    }

    /// A rejected request answers 403: the client fails with that status, and nothing else.
    @Test func aClassicHandlerThatRejectsFailsTheClientWith403() async throws {
        let selected = Recorder<String?>()
        let (listener, port) = try await classicListener(selected: selected) { _, _ in
            NWProtocolWebSocket.Response(status: .reject, subprotocol: nil, additionalHeaders: nil)
        }
        defer { listener.cancel() }
        let connection = client(port, offering: ["chat.v1"])
        defer { connection.cancel() }
        let reason = try await handshakeFailure(of: connection)
        #expect(reason.contains("403"), "\(reason)")
        #expect(selected.values.isEmpty)
    }

    /// A handler naming a subprotocol the client did not offer is the server's error: 500.
    @Test func aSubprotocolTheClientDidNotOfferIsAServerError() async throws {
        let selected = Recorder<String?>()
        let (listener, port) = try await classicListener(selected: selected) { _, _ in
            NWProtocolWebSocket.Response(status: .accept, subprotocol: "mqtt", additionalHeaders: nil)
        }
        defer { listener.cancel() }
        let connection = client(port, offering: ["chat.v1"])
        defer { connection.cancel() }
        let reason = try await handshakeFailure(of: connection)
        #expect(reason.contains("500"), "\(reason)")
    }

    /// The new API's handler, asynchronous, over TLS; the listener's connection reads the
    /// choice as `selectedSubprotocol`.
    @Test func aNewAPIHandlerChoosesAndTheListenersConnectionReadsIt() async throws {
        let selected = Recorder<String?>()
        let server = try await RunningFramedListener.start(
            WebSocket { testTLSServer() }.clientRequestHandler { subprotocols, _ in
                try? await Task.sleep(for: .milliseconds(1))
                return NWProtocolWebSocket.Response(status: .accept, subprotocol: subprotocols.first { $0.hasSuffix(".v2") }, additionalHeaders: nil)
            }
        ) { connection in try await Self.echo(connection, recordingInto: selected) }
        defer { server.task.cancel() }
        let connection = NetworkConnection(to: .url(URL(string: "wss://localhost:\(server.listener.port!.rawValue)/")!)) {
            WebSocket { testTLSClient() }.subprotocols(["chat.v1", "chat.v2"])
        }
        defer { connection.cancel() }
        try await connection.send("over tls")
        #expect(String(decoding: try await connection.receive().content, as: UTF8.self) == "over tls")
        #expect(connection.selectedSubprotocol == "chat.v2")
        #expect(selected.values == ["chat.v2"])
    }

    /// Without a handler, the listener's own `subprotocols` choose, and its connection reads
    /// what they chose (none when nothing matches).
    @Test func theListenersConnectionReadsTheSubprotocolsChoice() async throws {
        let selected = Recorder<String?>()
        let server = try await RunningFramedListener.start(WebSocket { TCP() }.subprotocols(["chat.v1"])) { connection in
            try await Self.echo(connection, recordingInto: selected)
        }
        defer { server.task.cancel() }
        for offer in [["chat.v2", "chat.v1"], ["mqtt"]] {
            let connection = client(server.listener.port!, offering: offer)
            try await connection.send("ping")
            _ = try await connection.receive()
            connection.cancel()
        }
        #expect(selected.values == ["chat.v1", nil])
    }
}
