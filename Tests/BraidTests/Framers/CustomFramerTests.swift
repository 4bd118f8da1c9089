import Dispatch
import Foundation
import Testing

@testable import Braid

/// Custom framers (`NWProtocolFramer`) over loopback TCP and TLS, in both dialects: the
/// TicTacToe-shaped `GameFramer` carries messages of several kinds and sizes (empty, small,
/// one larger than a read), each kind read back from the framer's message.
@Suite(.timeLimit(.minutes(3))) struct CustomFramerTests {
    /// Kinds and sizes: empty, one byte, a few hundred, and 300 KiB (several reads and records).
    static let messages: [(kind: GameMessageKind, content: Data)] = [
        (.join, Data("alice".utf8)),
        (.move, Data()),
        (.chat, Data([7])),
        (.move, Data((0 ..< 700).map { UInt8($0 % 251) })),
        (.chat, Data((0 ..< 300 * 1024).map { UInt8(truncatingIfNeeded: $0 * 31 + 5) })),
        (.join, Data("bob".utf8)),
    ]

    /// Echoes each message with its kind until the peer finishes.
    @Sendable static func echo(_ connection: NetworkConnection<Framer<GameFramer>>) async throws {
        while true {
            let (content, metadata) = try await connection.receive()
            try await connection.send(content, metadata: NWProtocolFramer.Message(gameKind: metadata.framer.gameKind))
        }
    }

    /// Sends every message, then reads each echo and checks it.
    static func exchange(_ client: NetworkConnection<Framer<GameFramer>>) async throws {
        for (kind, content) in messages {
            try await client.send(content, metadata: NWProtocolFramer.Message(gameKind: kind))
        }
        for (kind, content) in messages {
            let (received, metadata) = try await client.receive()
            #expect(metadata.framer.gameKind == kind)
            #expect(received == content, "a \(kind) message of \(content.count) bytes came back as \(received.count)")
        }
    }

    @Test func newAPIOverTCP() async throws {
        let server = try await RunningFramedListener.start(Framer<GameFramer> { TCP() }, handler: Self.echo)
        defer { server.task.cancel() }
        let client = NetworkConnection(to: server.endpoint) { Framer<GameFramer> { TCP() } }
        defer { client.cancel() }
        try await Self.exchange(client)
    }

    @Test func newAPIOverTLS() async throws {
        let server = try await RunningFramedListener.start(Framer(using: GameFramer.self) { testTLSServer() }, handler: Self.echo)
        defer { server.task.cancel() }
        let client = NetworkConnection(to: .hostPort(host: "localhost", port: server.listener.port!)) {
            Framer(using: GameFramer.self) { testTLSClient() }
        }
        defer { client.cancel() }
        try await Self.exchange(client)
    }

    // MARK: Classic

    static func classicParameters(_ parameters: NWParameters) -> NWParameters {
        parameters.defaultProtocolStack.applicationProtocols.insert(NWProtocolFramer.Options(definition: GameFramer.definition), at: 0)
        return parameters
    }

    /// A classic listener echoing each message with its framer message, as Apple's samples
    /// read and send messages.
    static func classicEchoServer(_ parameters: NWParameters) throws -> ClassicEchoServer {
        try ClassicEchoServer(classicParameters(parameters)) { connection in
            @Sendable func next() {
                connection.receiveMessage { content, context, _, error in
                    guard error == nil, let context,
                        let message = context.protocolMetadata(definition: GameFramer.definition) as? NWProtocolFramer.Message
                    else { return }
                    let reply = NWProtocolFramer.Message(gameKind: message.gameKind)
                    let replyContext = NWConnection.ContentContext(identifier: "reply", metadata: [reply])
                    connection.send(content: content, contentContext: replyContext, isComplete: true, completion: .idempotent)
                    next()
                }
            }
            next()
        }
    }

    /// Sends every message through `connection` with its kind in a content context, then
    /// reads each back with the kind from the received context.
    static func classicExchange(_ connection: NWConnection) async throws {
        for (kind, content) in messages {
            let context = NWConnection.ContentContext(identifier: "\(kind)", metadata: [NWProtocolFramer.Message(gameKind: kind)])
            #expect(await connection.sendAsync(content, context: context) == nil)
        }
        for (kind, content) in messages {
            let (received, context, error) = await connection.receiveMessageWithContext()
            #expect(error == nil)
            let message = context?.protocolMetadata(definition: GameFramer.definition) as? NWProtocolFramer.Message
            #expect(message?.gameKind == kind)
            #expect((received ?? Data()) == content, "a \(kind) message of \(content.count) bytes came back as \(received?.count ?? 0)")
        }
    }

    @Test func classicOverTCP() async throws {
        let server = try Self.classicEchoServer(.tcp)
        let port = try await server.start()
        defer { server.listener.cancel() }
        let connection = NWConnection(host: "127.0.0.1", port: port, using: Self.classicParameters(.tcp))
        defer { connection.cancel() }
        let states = StateRecorder(connection)
        connection.start(queue: DispatchQueue(label: "client"))
        try await states.wait(for: "ready") { $0 == .ready }
        try await Self.classicExchange(connection)
    }

    @Test func classicOverTLS() async throws {
        let serverOptions = NWProtocolTLS.Options()
        sec_protocol_options_set_local_identity(
            serverOptions.securityProtocolOptions, try #require(sec_identity_create(try LocalIdentityTests.identity("server"))))
        let server = try Self.classicEchoServer(NWParameters(tls: serverOptions))
        let port = try await server.start()
        defer { server.listener.cancel() }
        let connection = NWConnection(host: "localhost", port: port, using: Self.classicParameters(NWConnectionTLSTests.parameters(alpn: [])))
        defer { connection.cancel() }
        let states = StateRecorder(connection)
        connection.start(queue: DispatchQueue(label: "client"))
        try await states.wait(for: "ready") { $0 == .ready }
        try await Self.classicExchange(connection)
    }

    /// The dialects meet: a classic client and a new-API listener run one framer definition.
    @Test func classicClientTalksToANewAPIListener() async throws {
        let server = try await RunningFramedListener.start(Framer<GameFramer> { TCP() }, handler: Self.echo)
        defer { server.task.cancel() }
        let connection = NWConnection(host: "127.0.0.1", port: server.listener.port!, using: Self.classicParameters(.tcp))
        defer { connection.cancel() }
        let states = StateRecorder(connection)
        connection.start(queue: DispatchQueue(label: "client"))
        try await states.wait(for: "ready") { $0 == .ready }
        try await Self.classicExchange(connection)
    }
}
