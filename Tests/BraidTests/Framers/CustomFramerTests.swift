import Dispatch
import Foundation
import Testing

@testable import Braid
import BraidCore
import BraidWebSocketIO

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

    // MARK: The wire, and hostile peers

    /// What the framer writes is what travels (its header, not Braid's record above it), and a
    /// message a raw peer writes in pieces, one larger than a read among them, comes out whole.
    @Test func theFramerWritesTheWireAndReadsWhatArrivesInPieces() async throws {
        let big = [UInt8]((0 ..< 200_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })
        let (received, report) = AsyncStream.makeStream(of: [UInt8].self)
        let server = try await RunningStreamListener.start(TCP(), handler: { connection in
            report.yield(Array(try await connection.receive(exactly: 8 + 2).content))
            // Back: a chat message, its header and content in several writes, then a big one.
            for piece in [[0, 0], [0, 3, 0, 0, 0], [5, 0x68], [0x65, 0x6C, 0x6C], [0x6F]] as [[UInt8]] {
                try await connection.send(piece)
            }
            try await connection.send(GameHeader(kind: 2, length: UInt32(big.count)).encoded + Data(big.prefix(100)))
            try await connection.send(big.dropFirst(100))
            _ = try? await connection.receive(atLeast: 1, atMost: 1)
        })
        defer { server.task.cancel() }
        let client = NetworkConnection(to: server.endpoint) { Framer<GameFramer> { TCP() } }
        defer { client.cancel() }
        try await client.send(Data("hi".utf8), metadata: NWProtocolFramer.Message(gameKind: .chat))
        var iterator = received.makeAsyncIterator()
        #expect(await iterator.next() == [UInt8](GameHeader(kind: 3, length: 2).encoded + Data("hi".utf8)))
        let (hello, first) = try await client.receive()
        #expect(first.framer.gameKind == .chat && hello == Data("hello".utf8))
        let (content, second) = try await client.receive()
        #expect(second.framer.gameKind == .move && content == Data(big))
    }

    /// A header announcing more than the maximum message size fails the connection before
    /// the framer's layer holds the announced bytes.
    @Test func aLengthOverTheMaximumFailsTheConnection() async throws {
        let server = try await RunningStreamListener.start(TCP(), handler: { connection in
            try await connection.send(GameHeader(kind: 1, length: .max).encoded + Data(repeating: 1, count: 100))
            _ = try? await connection.receive(atLeast: 1, atMost: 1)
        })
        defer { server.task.cancel() }
        let client = NetworkConnection(to: server.endpoint) { Framer<GameFramer> { TCP() }.maximumMessageSize(1 << 20) }
        defer { client.cancel() }
        do {
            let (content, _) = try await client.receive()
            Issue.record("received \(content.count) bytes past a header over the maximum")
        } catch {
            #expect(error as? NetworkError == .messageTooLarge(size: Int(UInt32.max), maximum: 1 << 20))
        }
    }

    /// A framer's `markFailed(error:)` fails the connection with that error (here during its
    /// own handshake: the peer's greeting is wrong).
    @Test func markFailedFailsTheConnection() async throws {
        // Over TLS with a generous handshake timeout: the framer's handshake counts against it,
        // and a loaded machine must not turn the framer's failure into a timeout.
        let server = try await RunningStreamListener.start(testTLSServer(), handler: { connection in
            try await connection.send([0x00])
            _ = try? await connection.receive(atLeast: 1, atMost: 1)
        })
        defer { server.task.cancel() }
        let client = NetworkConnection(to: .hostPort(host: "localhost", port: server.port)) {
            Framer<FuzzHandshakeFramer> { testTLSClient().handshakeTimeout(.seconds(150)) }
        }
        defer { client.cancel() }
        client.start()
        let failure: NetworkError? = try await withDeadline(.seconds(160)) {
            for await state in client.states {
                if case .failed(let error) = state { return error }
            }
            return nil
        }
        #expect(failure == .system(call: "framer", errno: POSIXErrorCode.EPROTO.rawValue))
    }

    /// The input a framer leaves unconsumed is bounded: a delimiter framer fed a megabyte
    /// without its delimiter fails with `messageTooLarge` at `maximumBufferedInput`, having
    /// held no more than that and one read.
    @Test func unconsumedInputIsBounded() throws {
        let layer = FramerLayer(definition: FuzzLineFramer.definition, maximumMessageSize: 1 << 24, over: PlainByteStreamLayer(), messages: FramerMessages())
        let piece = [UInt8](repeating: 0x41, count: 64 * 1024)
        var failure: (any Error)?
        var fed = 0
        while failure == nil && fed <= 2 * NWProtocolFramer.maximumBufferedInput {
            _ = layer.withInputSpace(minimum: piece.count) { space in
                piece.withUnsafeBytes { space.copyMemory(from: $0) }
                return piece.count
            }
            fed += piece.count
            do {
                _ = try layer.process { _ in Issue.record("a line delivered without its newline") }
            } catch {
                failure = error
            }
            #expect(layer.unconsumedInputCount <= NWProtocolFramer.maximumBufferedInput + piece.count)
        }
        let error = try #require(failure as? NetworkError)
        guard case .messageTooLarge(_, let maximum) = error else {
            Issue.record("failed with \(error)")
            return
        }
        #expect(maximum == NWProtocolFramer.maximumBufferedInput)
    }

    /// A framer with a handshake of its own (`.willMarkReady`), which marks itself ready from a
    /// wakeup it scheduled, through a block given to `async`: the connection is ready only then,
    /// and carries messages.
    @Test func aHandshakeWakeupAndAsyncBlockMakeTheConnectionReady() async throws {
        // The framer's handshake counts against the TLS handshake timeout: a generous one, so a
        // loaded machine cannot fail the connection before the wakeup.
        let server = try await RunningFramedListener.start(Framer<GreetingFramer> { testTLSServer().handshakeTimeout(.seconds(150)) }) { connection in
            while true {
                let (content, _) = try await connection.receive()
                try await connection.send(content)
            }
        }
        defer { server.task.cancel() }
        let client = NetworkConnection(to: .hostPort(host: "localhost", port: server.listener.port!)) {
            Framer<GreetingFramer> { testTLSClient().handshakeTimeout(.seconds(150)) }
        }
        defer { client.cancel() }
        let echoed = try await withDeadline(.seconds(160)) {
            try await client.send(Data("after the greeting".utf8))
            return try await client.receive().content
        }
        #expect(echoed == Data("after the greeting".utf8))
    }

    // MARK: What is not implemented

    /// A framer over a QUIC stream fails on start with `unsupported`, in both dialects, and so
    /// does `prependApplicationProtocol(options:)` inside a framer.
    @Test func unsupportedPartsThrowUnsupported() async throws {
        let client = NetworkConnection(to: .hostPort(host: "127.0.0.1", port: 9)) { Framer<GameFramer> { QUIC(alpn: ["game"]) } }
        defer { client.cancel() }
        client.start()
        let failure: NetworkError? = try await withDeadline(.seconds(60)) {
            for await state in client.states {
                if case .failed(let error) = state { return error }
            }
            return nil
        }
        guard case .unsupported(let what)? = failure else {
            Issue.record("a framer over QUIC ended with \(String(describing: failure))")
            return
        }
        #expect(what.contains("over a QUIC stream"), "\(what)")

        let classic = NWConnection(host: "127.0.0.1", port: 9, using: Self.classicParameters(.quic(alpn: ["game"])))
        defer { classic.cancel() }
        let states = StateRecorder(classic)
        classic.start(queue: DispatchQueue(label: "client"))
        try await states.wait(for: "failed") { $0 == .failed(.posix(.EOPNOTSUPP)) }

        let layer = FramerLayer(definition: PrependingFramer.definition, maximumMessageSize: 1024, over: PlainByteStreamLayer())
        _ = try layer.process { _ in }
        #expect(PrependingFramer.outcome.withLock { $0 } == .unsupported(
            "prependApplicationProtocol(options:) in a framer (add protocols to the stack before the connection starts)"))
    }
}

/// Tries to prepend a protocol when it starts, and keeps what that threw.
final class PrependingFramer: NWProtocolFramerImplementation {
    static let definition = NWProtocolFramer.Definition(implementation: PrependingFramer.self)
    static var label: String { "Prepending" }
    static let outcome = Locked<NetworkError?>(nil)
    required init(framer: NWProtocolFramer.Instance) {}
    func start(framer: NWProtocolFramer.Instance) -> NWProtocolFramer.StartResult {
        do {
            try framer.prependApplicationProtocol(options: NWProtocolTLS.Options())
        } catch {
            Self.outcome.withLock { $0 = error as? NetworkError }
        }
        return .ready
    }
    func wakeup(framer: NWProtocolFramer.Instance) {}
    func stop(framer: NWProtocolFramer.Instance) -> Bool { true }
    func cleanup(framer: NWProtocolFramer.Instance) {}
    func handleInput(framer: NWProtocolFramer.Instance) -> Int { 0 }
    func handleOutput(framer: NWProtocolFramer.Instance, message: NWProtocolFramer.Message, messageLength: Int, isComplete: Bool) {}
}

extension FuzzHandshakeFramer: FramerProtocol {}
extension FuzzLineFramer: FramerProtocol {}

/// Greets the peer (one byte) in `start` and waits for its greeting; then marks itself ready
/// from a wakeup 20 ms later, through an `async` block. Messages: a one-byte length, then the
/// content (at most 255 bytes).
final class GreetingFramer: NWProtocolFramerImplementation, FramerProtocol {
    static let definition = NWProtocolFramer.Definition(implementation: GreetingFramer.self)
    static var label: String { "Greeting" }
    private var greeted = false

    required init(framer: NWProtocolFramer.Instance) {}

    func start(framer: NWProtocolFramer.Instance) -> NWProtocolFramer.StartResult {
        framer.writeOutput(data: [0x47])
        return .willMarkReady
    }

    func wakeup(framer: NWProtocolFramer.Instance) {
        framer.async { framer.markReady() }
    }

    func stop(framer: NWProtocolFramer.Instance) -> Bool { true }
    func cleanup(framer: NWProtocolFramer.Instance) {}

    func handleInput(framer: NWProtocolFramer.Instance) -> Int {
        if !greeted {
            var greeting: UInt8?
            guard framer.parseInput(minimumIncompleteLength: 1, maximumLength: 1, parse: { buffer, _ in
                greeting = buffer?.first
                return 1
            }), greeting == 0x47 else {
                framer.markFailed(error: .posix(.EPROTO))
                return 0
            }
            greeted = true
            framer.scheduleWakeup(wakeupTime: .milliseconds(20))
        }
        while true {
            var length: Int?
            _ = framer.parseInput(minimumIncompleteLength: 1, maximumLength: 1) { buffer, _ in
                length = buffer.map { Int($0[0]) }
                return length == nil ? 0 : 1
            }
            guard let length else { return 1 }
            if !framer.deliverInputNoCopy(length: length, message: NWProtocolFramer.Message(instance: framer), isComplete: true) {
                return 0
            }
        }
    }

    func handleOutput(framer: NWProtocolFramer.Instance, message: NWProtocolFramer.Message, messageLength: Int, isComplete: Bool) {
        framer.writeOutput(data: [UInt8(min(messageLength, 255))])
        try? framer.writeOutputNoCopy(length: min(messageLength, 255))
    }
}

