import BraidPerf
import BraidQUIC
import Dispatch
import Foundation
import Testing

@testable import Braid
import BraidCore

/// QUIC on the classic API: an `NWConnection` with QUIC parameters is one bidirectional stream
/// of a QUIC connection, as on Apple's platforms; a final context with `isComplete` ends the
/// stream with FIN.
@Suite(.timeLimit(.minutes(3))) struct NWConnectionQUICTests {
    /// QUIC parameters trusting the test CA, for the test certificate's name.
    static func parameters(alpn: [String] = ["echo"]) -> NWParameters {
        let quic = NWProtocolQUIC.Options(alpn: alpn)
        quic.idleTimeout = testIdleTimeoutMilliseconds
        sec_protocol_options_set_tls_server_name(quic.securityProtocolOptions, "localhost")
        quic.securityProtocolOptions.update { $0.trustRoots = .certificateAuthorities(file: Fixtures.caFile) }
        return NWParameters(quic: quic)
    }

    /// Sends `message` in two contents, the second final, and reads the whole echo.
    private func echo(_ message: Data, through connection: NWConnection) async throws -> Data? {
        let half = message.count / 2
        #expect(await connection.sendAsync(message.prefix(half)) == nil)
        #expect(await connection.sendAsync(message.dropFirst(half), context: .finalMessage) == nil)
        let (content, isComplete, error) = await connection.receiveMessageAsync()
        #expect(error == nil)
        #expect(isComplete)
        return content
    }

    @Test func aStreamEchoedByABraidListener() async throws {
        let server = try await RunningListener.start()
        defer { server.task.cancel() }
        let connection = NWConnection(host: "127.0.0.1", port: try #require(server.listener.port), using: Self.parameters())
        defer { connection.cancel() }
        let states = StateRecorder(connection)
        connection.start(queue: DispatchQueue(label: "client"))
        try await states.wait(for: "ready") { $0 == .ready }
        let message = Data((0..<100_000).map { UInt8(truncatingIfNeeded: $0 * 7) })
        #expect(try await echo(message, through: connection) == message)
        connection.cancel()
        try await states.wait(for: "cancelled") { $0 == .cancelled }
    }

    /// Each classic connection opens a connection of its own and its first stream; a server
    /// application sees one stream per connection.
    @Test func severalConnectionsEachGetTheirStream() async throws {
        let server = try await RunningListener.start()
        defer { server.task.cancel() }
        let port = try #require(server.listener.port)
        let echoed = try await withThrowingTaskGroup(of: Bool.self) { group in
            for index in 0..<8 {
                group.addTask {
                    let connection = NWConnection(host: "127.0.0.1", port: port, using: Self.parameters())
                    defer { connection.cancel() }
                    connection.start(queue: DispatchQueue(label: "client-\(index)"))
                    let message = Data("stream of client \(index)".utf8)
                    return try await echo(message, through: connection) == message
                }
            }
            return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(echoed == 8)
    }

    /// Against aioquic, an independent QUIC implementation, which echoes each stream a
    /// client opens (FIN included).
    @Test func aStreamEchoedByAioquic() async throws {
        let (server, port) = try await InteropDirection.braidClientToAioquicServer.startServer()
        let connection = NWConnection(host: "127.0.0.1", port: NWEndpoint.Port(rawValue: port)!, using: Self.parameters())
        let states = StateRecorder(connection)
        connection.start(queue: DispatchQueue(label: "client"))
        let message = Data((0..<50_000).map { UInt8(truncatingIfNeeded: $0) })
        let echoed = try await echo(message, through: connection)
        connection.cancel()
        await server.stop()
        #expect(echoed == message)
        try await states.wait(for: "cancelled") { $0 == .cancelled }
    }

    /// The options reach the new API's QUIC stack; a datagram flow as a connection is refused.
    @Test func theOptionsBecomeTheQUICStack() throws {
        let options = NWProtocolQUIC.Options(alpn: ["echo"])
        sec_protocol_options_add_tls_application_protocol(options.securityProtocolOptions, "h3")
        options.idleTimeout = 5_000
        options.initialMaxData = 1 << 20
        options.initialMaxStreamDataBidirectionalLocal = 1 << 16
        options.initialMaxStreamDataBidirectionalRemote = 1 << 17
        options.initialMaxStreamDataUnidirectional = 1 << 18
        options.initialMaxStreamsBidirectional = 7
        options.initialMaxStreamsUnidirectional = 3
        options.maxDatagramFrameSize = 1_200
        let quic = try #require(try NWParameters(quic: options).stackBinding() as? QUIC)
        #expect(quic.alpn == ["echo", "h3"])
        #expect(quic.transport.idleTimeout == .milliseconds(5_000))
        #expect(quic.transport.initialMaxData == 1 << 20)
        #expect(quic.transport.initialMaxStreamDataBidirectionalLocal == 1 << 16)
        #expect(quic.transport.initialMaxStreamDataBidirectionalRemote == 1 << 17)
        #expect(quic.transport.initialMaxStreamDataUnidirectional == 1 << 18)
        #expect(quic.transport.initialMaxBidirectionalStreams == 7)
        #expect(quic.transport.initialMaxUnidirectionalStreams == 3)
        #expect(quic.transport.maxDatagramFrameSize == 1_200)
        // Unset values read back as the defaults.
        #expect(NWProtocolQUIC.Options().initialMaxStreamsBidirectional == 100)
        let copy = try #require(NWParameters(quic: options).copy().defaultProtocolStack.transportProtocol as? NWProtocolQUIC.Options)
        #expect(copy.initialMaxStreamsUnidirectional == 3 && copy.alpn == ["echo"])
        options.isDatagram = true
        #expect(throws: NetworkError.self) { try NWParameters(quic: options).stackBinding() }
    }

    /// QUIC parameters for a listener, with the test certificate as an identity imported from
    /// PKCS #12, as an application gives one.
    static func listenerParameters() throws -> NWParameters {
        let quic = NWProtocolQUIC.Options(alpn: ["echo"])
        quic.idleTimeout = testIdleTimeoutMilliseconds
        let identity = try #require(sec_identity_create(try LocalIdentityTests.identity("server")))
        sec_protocol_options_set_local_identity(quic.securityProtocolOptions, identity)
        return NWParameters(quic: quic)
    }

    /// A verify block or cipher suites on QUIC options are refused, not ignored: QUIC does not
    /// run them yet, and a check the application thinks it made must not silently not happen.
    @Test func aVerifyBlockOnQUICIsRefused() throws {
        let quic = NWProtocolQUIC.Options(alpn: ["echo"])
        sec_protocol_options_set_verify_block(quic.securityProtocolOptions, { _, _, complete in complete(true) }, .global())
        #expect(throws: NetworkError.self) { try NWParameters(quic: quic).stackBinding() }
    }

    /// A classic QUIC listener, written as the TCP echo server is: each classic client's
    /// stream is one `NWConnection` on the server, echoed with its FIN.
    @Test func aClassicListenerEchoesClassicClients() async throws {
        let server = try ClassicEchoServer(try Self.listenerParameters())
        let port = try await server.start()
        defer { server.listener.cancel() }
        let echoed = try await withThrowingTaskGroup(of: Bool.self) { group in
            for index in 0..<4 {
                group.addTask {
                    let connection = NWConnection(host: "127.0.0.1", port: port, using: Self.parameters())
                    defer { connection.cancel() }
                    connection.start(queue: DispatchQueue(label: "client-\(index)"))
                    let message = Data(repeating: UInt8(index), count: 20_000 + index)
                    return try await echo(message, through: connection) == message
                }
            }
            return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(echoed == 4)
    }

    /// As Apple's `NWListener` with QUIC: every stream a client opens on one QUIC connection
    /// reaches `newConnectionHandler` as a connection of its own.
    @Test func eachStreamOfOneConnectionIsAClassicConnection() async throws {
        let handed = Locked(0)
        let server = try ClassicEchoServer(try Self.listenerParameters()) { connection in
            handed.withLock { $0 += 1 }
            ClassicEchoServer.echo(connection)
        }
        let port = try await server.start()
        defer { server.listener.cancel() }
        try await withNetworkConnection(to: .hostPort(host: "127.0.0.1", port: port)) { testClient() } _: { connection in
            let intact = try await echoOnConcurrentStreams(connection, count: 5)
            #expect(intact == 5)
        }
        #expect(handed.withLock { $0 } == 5)
    }

    /// Cancelling a listener's stream connection ends that stream alone: its pending receive
    /// completes with ECANCELED, the client's stream is reset, and the QUIC connection serves
    /// the next stream.
    @Test func cancellingAnInboundStreamEndsThatStreamOnly() async throws {
        let pending = AsyncStream<NWError?>.makeStream()
        let server = try ClassicEchoServer(try Self.listenerParameters()) { connection in
            connection.receive(minimumIncompleteLength: 1, maximumLength: 65536) { content, _, isComplete, _ in
                guard content == Data("cancel me".utf8) else {
                    connection.send(content: content, contentContext: isComplete ? .finalMessage : .defaultMessage, isComplete: true,
                                    completion: .contentProcessed { _ in })
                    if !isComplete { ClassicEchoServer.echo(connection) }
                    return
                }
                connection.receive(minimumIncompleteLength: 1, maximumLength: 65536) { _, _, _, error in
                    pending.continuation.yield(error)
                }
                connection.cancel()
            }
        }
        let port = try await server.start()
        defer { server.listener.cancel() }
        try await withNetworkConnection(to: .hostPort(host: "127.0.0.1", port: port)) { testClient() } _: { connection in
            let doomed = try await connection.openStream()
            try await doomed.send(Data("cancel me".utf8))
            var errors = pending.stream.makeAsyncIterator()
            #expect(await errors.next() == .posix(.ECANCELED))
            await #expect(throws: NetworkError.self) {
                while true { _ = try await doomed.receive(atLeast: 1, atMost: 65536) }
            }
            #expect(try await echoOnConcurrentStreams(connection, count: 1) == 1)
        }
    }
}
