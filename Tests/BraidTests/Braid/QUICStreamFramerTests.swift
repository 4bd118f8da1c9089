import Foundation
import Testing

@testable import Braid
import BraidCore

/// `TLV` and `Coder` on QUIC streams (`openStream { stream in TLV { stream } }` and
/// `inboundStreams(prepending:)`) between a Braid client and a Braid listener in memory
/// (`MemoryWorld`): messages of many sizes on streams the client opens and on streams the
/// server opens, concurrent streams each framed on their own, hostile lengths (the stream, not
/// the connection, ends), and the stacks a stream does not take.
@Suite struct QUICStreamFramerTests {
    static let sizes = [0, 1, 7, 8, 9, 100, 1000, 1199, 1200, 1500, 16384, 65535, 65536, 65537, 300_000, 1 << 20, 3 << 20]

    static func payloads() -> [Data] {
        sizes.enumerated().map { Data(pattern(seed: UInt64($0.offset), count: $0.element)) }
    }

    /// A connection to `server` trusting the test CA.
    static func client(_ server: RunningListener) -> NetworkConnection<QUIC> {
        NetworkConnection(to: server.endpoint) { testClient() }
    }

    /// Echoes every message of every TLV stream the peer opens, with its type.
    @Sendable static func echoTLVStreams(_ connection: NetworkConnection<QUIC>) async throws {
        try await connection.inboundStreams(prepending: { quicStream in TLV { quicStream } }) { stream in
            for try await (content, metadata) in stream.messages {
                try await stream.send(content, type: metadata.type)
            }
        }
    }

    /// Sends every payload on `stream` (the last one with the end of the stream) while reading
    /// the echo, and checks each echoed message whole, with its type.
    static func exchange(_ payloads: [Data], on stream: QUIC.Stream<TLV>, typeBase: Int = 0) async throws {
        async let sent: Void = {
            for (index, payload) in payloads.enumerated() {
                try await stream.send(payload, type: typeBase + index, endOfStream: index == payloads.count - 1)
            }
        }()
        for (index, payload) in payloads.enumerated() {
            let (content, metadata) = try await stream.receive()
            #expect(metadata.type == typeBase + index)
            #expect(content.count == payload.count)
            #expect(content == payload)
        }
        try await sent
    }

    /// Messages from empty to 3 MiB (many packets each) go out on a stream the client opens
    /// and come back whole, with their types, from the server's inbound stream.
    @Test(.timeLimit(.minutes(10))) func tlvOnAStreamTheClientOpensEchoesWhole() async throws {
        try await MemoryWorld.run { _ in
            let server = try await RunningListener.start(handler: Self.echoTLVStreams)
            defer { server.task.cancel() }
            let connection = Self.client(server)
            defer { connection.cancel() }
            let stream = try await connection.openStream { quicStream in TLV { quicStream } }
            #expect(stream.initiator == .local)
            try await Self.exchange(Self.payloads(), on: stream)
        }
    }

    /// The other way round: the server opens a TLV stream, the client echoes it from
    /// `inboundStreams(prepending:)`, and the server checks every message.
    @Test(.timeLimit(.minutes(10))) func tlvOnAStreamTheServerOpensEchoesWhole() async throws {
        try await MemoryWorld.run { _ in
            let (outcomes, outcome) = AsyncStream.makeStream(of: String.self)
            let server = try await RunningListener.start(handler: { connection in
                do {
                    let stream = try await connection.openStream { quicStream in TLV { quicStream } }
                    try await Self.exchange(Self.payloads(), on: stream, typeBase: 70)
                    outcome.yield("done, initiator \(stream.initiator)")
                } catch {
                    outcome.yield("\(error)")
                }
            })
            defer { server.task.cancel() }
            let connection = Self.client(server)
            defer { connection.cancel() }
            let client = Task { try await Self.echoTLVStreams(connection) }
            defer { client.cancel() }
            var iterator = outcomes.makeAsyncIterator()
            #expect(await iterator.next() == "done, initiator local")
        }
    }

    enum GameMessage: Codable, Equatable, Sendable {
        case selectedCharacter(String)
        case move(row: Int, column: Int)
    }

    /// Game messages from empty strings to 1 MiB ones.
    static let gameMessages: [GameMessage] =
        [.selectedCharacter(""), .move(row: 1, column: 2)]
        + [1, 1500, 70_000, 1 << 20].map { .selectedCharacter(String(repeating: "🐨", count: $0 / 4)) }

    /// Echoes every value of every Coder stream the peer opens.
    @Sendable static func echoGameStreams(_ connection: NetworkConnection<QUIC>) async throws {
        try await connection.inboundStreams(prepending: { quicStream in Coder(GameMessage.self, using: .json) { quicStream } }) { stream in
            for try await (message, _) in stream.messages { try await stream.send(message) }
        }
    }

    /// Sends every game message on `stream` while reading the echo back.
    static func exchangeGameMessages(on stream: QUIC.Stream<Coder<GameMessage, GameMessage, NetworkJSONCoder>>) async throws {
        async let sent: Void = {
            for (index, message) in gameMessages.enumerated() {
                try await stream.send(message, endOfStream: index == gameMessages.count - 1)
            }
        }()
        for message in gameMessages {
            let (received, metadata) = try await stream.receive()
            #expect(received == message)
            #expect(metadata.type == CoderFraming.messageType)
        }
        try await sent
    }

    /// Coder values on a stream the client opens, echoed by the server's inbound stream.
    @Test(.timeLimit(.minutes(10))) func coderOnAStreamTheClientOpensEchoes() async throws {
        try await MemoryWorld.run { _ in
            let server = try await RunningListener.start(handler: Self.echoGameStreams)
            defer { server.task.cancel() }
            let connection = Self.client(server)
            defer { connection.cancel() }
            let stream = try await connection.openStream { quicStream in Coder(GameMessage.self, using: .json) { quicStream } }
            try await Self.exchangeGameMessages(on: stream)
        }
    }

    /// Coder values on a stream the server opens, echoed by the client's inbound stream.
    @Test(.timeLimit(.minutes(10))) func coderOnAStreamTheServerOpensEchoes() async throws {
        try await MemoryWorld.run { _ in
            let (outcomes, outcome) = AsyncStream.makeStream(of: String.self)
            let server = try await RunningListener.start(handler: { connection in
                do {
                    let stream = try await connection.openStream { quicStream in Coder(GameMessage.self, using: .json) { quicStream } }
                    try await Self.exchangeGameMessages(on: stream)
                    outcome.yield("done")
                } catch {
                    outcome.yield("\(error)")
                }
            })
            defer { server.task.cancel() }
            let connection = Self.client(server)
            defer { connection.cancel() }
            let client = Task { try await Self.echoGameStreams(connection) }
            defer { client.cancel() }
            var iterator = outcomes.makeAsyncIterator()
            #expect(await iterator.next() == "done")
        }
    }

    /// A message that does not decode is a typed error naming the type, and the stream goes
    /// on: the next receive returns the next value.
    @Test(.timeLimit(.minutes(10))) func aMessageThatDoesNotDecodeOnAStreamIsATypedErrorAndTheStreamGoesOn() async throws {
        try await MemoryWorld.run { _ in
            let server = try await RunningListener.start(handler: { connection in
                try await connection.inboundStreams(prepending: { quicStream in TLV { quicStream } }) { stream in
                    _ = try await stream.receive()
                    try await stream.send(Data("not json".utf8), type: 0)
                    try await stream.send(try JSONEncoder().encode(GameMessage.move(row: 3, column: 4)), type: 0)
                    for try await _ in stream.messages {}
                }
            })
            defer { server.task.cancel() }
            let connection = Self.client(server)
            defer { connection.cancel() }
            let stream = try await connection.openStream { quicStream in Coder(GameMessage.self, using: .json) { quicStream } }
            try await stream.send(.selectedCharacter("🐨"))
            do {
                _ = try await stream.receive()
                Issue.record("garbage decoded")
            } catch NetworkError.messageDecodingFailed(let type, let reason) {
                #expect(type.hasSuffix("GameMessage"))
                #expect(!reason.isEmpty)
            }
            #expect(try await stream.receive().content == .move(row: 3, column: 4))
        }
    }

    /// Sixteen streams at once, each with its own messages (sizes and types of its own): each
    /// stream's echo is its own messages, whole and in order.
    @Test(.timeLimit(.minutes(10))) func concurrentStreamsAreFramedIndependently() async throws {
        try await MemoryWorld.run { _ in
            let server = try await RunningListener.start(handler: Self.echoTLVStreams)
            defer { server.task.cancel() }
            let connection = Self.client(server)
            defer { connection.cancel() }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<16 {
                    group.addTask {
                        let payloads = (0..<20).map { message in
                            Data(pattern(seed: UInt64(index * 100 + message), count: (index * 7919 + message * 4099) % 40_000))
                        }
                        let stream = try await connection.openStream { quicStream in TLV { quicStream } }
                        try await Self.exchange(payloads, on: stream, typeBase: index << 16)
                    }
                }
                try await group.waitForAll()
            }
        }
    }

    /// A raw stream announces a message one byte over the server's maximum: the server's
    /// receive throws `messageTooLarge` (and so do its later calls on the stream), the stream
    /// is reset and stopped with `QUICStream.messageTooLargeErrorCode`, and the connection and
    /// a framed stream opened afterwards go on.
    @Test(.timeLimit(.minutes(10))) func aHostileLengthEndsTheStreamNotTheConnection() async throws {
        try await MemoryWorld.run { world in
            let serverSaw = Locked<[String]>([])
            let server = try await RunningListener.start(handler: { connection in
                try await connection.inboundStreams(prepending: { quicStream in TLV { quicStream }.maximumMessageSize(1024) }) { stream in
                    do {
                        let (content, metadata) = try await stream.receive()
                        // A well-framed stream: echo it.
                        try await stream.send(content, type: metadata.type, endOfStream: true)
                    } catch {
                        serverSaw.withLock { $0.append("receive: \(error)") }
                        do { _ = try await stream.receive() } catch { serverSaw.withLock { $0.append("again: \(error)") } }
                        do { try await stream.send(Data([1]), type: 1) } catch { serverSaw.withLock { $0.append("send: \(error)") } }
                    }
                }
            })
            defer { server.task.cancel() }
            let connection = Self.client(server)
            defer { connection.cancel() }
            let raw = try await connection.openStream()
            try await raw.send(Data([0, 0, 0, 3, 0, 0, 4, 1]) + Data(repeating: 2, count: 100))
            // The server resets its side: the raw stream's receive says so, with the code.
            await #expect(throws: NetworkError.streamReset(code: QUICStream.messageTooLargeErrorCode)) {
                _ = try await raw.receive(atLeast: 1, atMost: 1024)
            }
            // And it stopped the raw stream's sending: a send fails once STOP_SENDING is here.
            var sendError: NetworkError?
            for _ in 0..<200 where sendError == nil {
                do {
                    try await raw.send(Data(repeating: 3, count: 1000))
                    try await world.sleep(for: .milliseconds(10))
                } catch let error as NetworkError {
                    sendError = error
                }
            }
            // ngtcp2 0.12.1 reports a peer's STOP_SENDING without its code when the peer reset the
            // stream with the same code.
            #expect(sendError == .streamStopped(code: QUICStream.messageTooLargeErrorCode) || sendError == .streamStopped(code: nil))
            let tooLarge = NetworkError.messageTooLarge(size: 1025, maximum: 1024)
            _ = try await world.eventually { serverSaw.withLock { $0.count } >= 3 }
            #expect(serverSaw.withLock { $0 } == ["receive: \(tooLarge)", "again: \(tooLarge)", "send: \(tooLarge)"])
            // The connection goes on.
            let framed = try await connection.openStream { quicStream in TLV { quicStream } }
            try await framed.send(Data("still here".utf8), type: 9)
            let (content, metadata) = try await framed.receive()
            #expect(content == Data("still here".utf8))
            #expect(metadata.type == 9)
            #expect(connection.state == .ready)
        }
    }

    /// The client's side: a framed stream whose peer (a raw stream) announces 4 GiB gets
    /// `messageTooLarge` against the default 16 MiB maximum, and the peer sees the reset.
    @Test(.timeLimit(.minutes(10))) func aHostileLengthFromTheServerEndsTheClientsStream() async throws {
        try await MemoryWorld.run { _ in
            // What the server saw, awaited (within the time limit) rather than polled for a fixed
            // time: under a full suite's load the server's task may run seconds later.
            let (serverSaw, seen) = AsyncStream<String>.makeStream()
            let server = try await RunningListener.start(handler: { connection in
                try await connection.inboundStreams { stream in
                    _ = try await stream.receive(exactly: TLVFraming.headerSize + 2)
                    try await stream.send(Data([0, 0, 0, 9, 0xFF, 0xFF, 0xFF, 0xFF]) + Data(repeating: 1, count: 100))
                    do {
                        let (content, metadata) = try await stream.receive(atLeast: 1, atMost: 1024)
                        seen.yield("\(content.count) bytes, end \(metadata.isEndOfStream)")
                    } catch {
                        seen.yield("\(error)")
                    }
                }
            })
            defer { server.task.cancel() }
            let connection = Self.client(server)
            defer { connection.cancel() }
            let stream = try await connection.openStream { quicStream in TLV { quicStream } }
            try await stream.send(Data("hi".utf8), type: 1)
            let expected = NetworkError.messageTooLarge(size: Int(UInt32.max), maximum: 16 << 20)
            await #expect(throws: expected) { try await stream.receive() }
            var iterator = serverSaw.makeAsyncIterator()
            #expect(await iterator.next() == "\(NetworkError.streamReset(code: QUICStream.messageTooLargeErrorCode))")
            #expect(connection.state == .ready)
        }
    }

    /// A unidirectional framed stream carries messages one way; the receiving side cannot
    /// send on it, the end of the stream ends `messages`, and the sender cannot send after it.
    @Test(.timeLimit(.minutes(10))) func aUnidirectionalStreamCarriesMessagesOneWay() async throws {
        try await MemoryWorld.run { world in
            let (outcomes, outcome) = AsyncStream.makeStream(of: String.self)
            let server = try await RunningListener.start(handler: { connection in
                try await connection.inboundStreams(prepending: { quicStream in TLV { quicStream } }) { stream in
                    var received: [String] = []
                    do {
                        for try await (content, metadata) in stream.messages { received.append("\(metadata.type):\(content.count)") }
                    } catch {
                        received.append("\(error)")
                    }
                    do {
                        try await stream.send(Data([1]), type: 1)
                        received.append("sent")
                    } catch {
                        received.append("\(error)")
                    }
                    outcome.yield(received.joined(separator: " "))
                }
            })
            defer { server.task.cancel() }
            let connection = Self.client(server)
            defer { connection.cancel() }
            let stream = try await connection.openStream(directionality: .unidirectional) { quicStream in TLV { quicStream } }
            await #expect(throws: NetworkError.streamNotReadable) { try await stream.receive() }
            try await stream.send(Data(count: 5), type: 1)
            try await stream.send(Data(count: 70_000), type: 2, endOfStream: true)
            var iterator = outcomes.makeAsyncIterator()
            let result = await iterator.next()
            #expect(result == "1:5 2:70000 \(NetworkError.streamNotWritable)")
            // The stream finished and closes once the server has everything: a later send says it
            // is finished, not stopped.
            try await world.sleep(for: .milliseconds(50))
            await #expect(throws: NetworkError.streamNotWritable) { try await stream.send(Data([1]), type: 3) }
        }
    }

    /// A stream takes only a framer over its own `QUICStream`: other stacks throw
    /// `unsupported` before a stream is opened, and a framer over a `QUICStream` is not a
    /// connection's stack.
    @Test(.timeLimit(.minutes(10))) func stacksAStreamDoesNotTakeAreUnsupported() async throws {
        try await MemoryWorld.run { _ in
            let server = try await RunningListener.start()
            defer { server.task.cancel() }
            let connection = Self.client(server)
            defer { connection.cancel() }
            do {
                _ = try await connection.openStream { _ in TLV { TCP() } }
                Issue.record("a stream took TLV over TCP")
            } catch NetworkError.unsupported(let what) {
                #expect(what.contains("TLV prepended to a QUIC stream"))
            }
            await #expect(throws: NetworkError.self) {
                try await connection.inboundStreams(prepending: { _ in TCP() }) { _ in }
            }
            // The connection is fine, and a plain stream still echoes.
            #expect(try await echoOnConcurrentStreams(connection, count: 1) == 1)

            let misplaced = NetworkConnection(to: server.endpoint) { TLV { QUICStream() } }
            defer { misplaced.cancel() }
            do {
                try await misplaced.send(Data(), type: 0)
                Issue.record("a connection ran TLV over a QUICStream")
            } catch NetworkError.unsupported(let what) {
                #expect(what.contains("openStream { stream in TLV { stream } }"))
            }
        }
    }
}
