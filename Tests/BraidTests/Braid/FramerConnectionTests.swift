import Foundation
import Testing

@testable import Braid
import BraidCore

/// `TLV` and `Coder` connections between a Braid client and a Braid listener, on TLS and on
/// TCP, in memory (`MemoryWorld`'s byte streams): whole messages of many sizes both ways,
/// concurrent senders and receivers, hostile lengths, messages that do not decode, and the
/// stacks not implemented. Listeners take the world's own ports.
@Suite struct FramerConnectionTests {
    enum Lower: String, CaseIterable, Sendable {
        case tls, tcp

        var server: TLV {
            switch self {
            case .tls: TLV { testTLSServer() }
            case .tcp: TLV { TCP() }
            }
        }

        var client: TLV {
            switch self {
            case .tls: TLV { testTLSClient() }
            case .tcp: TLV { TCP() }
            }
        }
    }

    static let sizes = [0, 1, 7, 8, 9, 100, 1000, 16383, 16384, 16385, 65535, 65536, 65537, 300_000, 1 << 20, 3 << 20]

    /// Messages from empty to 3 MiB go out and come back whole, with their types; the client
    /// sends them all before reading, so the echo's bytes arrive in whatever pieces TCP makes.
    @Test(.timeLimit(.minutes(10)), arguments: Lower.allCases)
    func messagesOfManySizesEchoWhole(_ lower: Lower) async throws {
        try await Self.withEchoConnection(over: lower) { connection in
            let payloads = Self.sizes.enumerated().map { Data(pattern(seed: UInt64($0.offset), count: $0.element)) }
            async let sent: Void = {
                for (index, payload) in payloads.enumerated() { try await connection.send(payload, type: index * 1000) }
            }()
            for (index, payload) in payloads.enumerated() {
                let (content, metadata) = try await connection.receive()
                #expect(metadata.type == index * 1000)
                #expect(content.count == payload.count)
                #expect(content == payload)
            }
            try await sent
        }
    }

    /// A message of the concurrency test: its sequence number, then bytes its sender and
    /// sequence number determine.
    static func payload(sender: Int, sequence: Int) -> Data {
        let size = (sender * 7919 + sequence * 104_729) % 70_000
        return withUnsafeBytes(of: UInt32(sequence).bigEndian) { Data($0) }
            + Data(pattern(seed: UInt64(sender * 1000 + sequence), count: size))
    }

    /// Runs `body` in a memory world, with a client connected over `lower` to a listener that
    /// echoes every message.
    static func withEchoConnection(over lower: Lower, _ body: @escaping @Sendable (NetworkConnection<TLV>) async throws -> Void) async throws {
        try await MemoryWorld.run { world in
            let server = try await RunningFramedListener.start(lower.server, port: world.port(), handler: echoMessages)
            defer { server.task.cancel() }
            let connection = NetworkConnection(to: server.endpoint) { lower.client }
            defer { connection.cancel() }
            try await body(connection)
        }
    }

    /// Eight tasks send 40 messages each while four tasks receive on the same connection:
    /// every message arrives whole (its content matches its type and sequence number) exactly
    /// once.
    @Test(.timeLimit(.minutes(10)), arguments: Lower.allCases)
    func concurrentSendersAndReceiversGetWholeMessages(_ lower: Lower) async throws {
        try await Self.withEchoConnection(over: lower) { connection in
            let senders = 8, perSender = 40, receivers = 4
            let keys = try await withThrowingTaskGroup(of: [String].self) { group in
                for sender in 0..<senders {
                    group.addTask {
                        for sequence in 0..<perSender { try await connection.send(Self.payload(sender: sender, sequence: sequence), type: sender) }
                        return []
                    }
                }
                for _ in 0..<receivers {
                    group.addTask {
                        var keys: [String] = []
                        for _ in 0..<(senders * perSender / receivers) {
                            let (content, metadata) = try await connection.receive()
                            let sequence = Int(content.prefix(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
                            #expect(content == Self.payload(sender: Int(metadata.type), sequence: sequence))
                            keys.append("\(metadata.type)/\(sequence)")
                        }
                        return keys
                    }
                }
                return try await group.reduce(into: []) { $0 += $1 }
            }
            let counts = Dictionary(keys.map { ($0, 1) }, uniquingKeysWith: +)
            #expect(counts.count == senders * perSender)
            #expect(counts.values.allSatisfy { $0 == 1 })
        }
    }

    /// Receives cancelled while they wait, one feeding the decoder (waiting for bytes) and one
    /// queued behind it, throw `cancelled` and take nothing: the receives after them get every
    /// message whole and in order.
    /// Types are `Int`s, as Apple's are: the whole 32-bit range of the wire's type field goes
    /// and comes back, and a type outside it throws without sending anything.
    @Test(.timeLimit(.minutes(10))) func typesOutsideTheWiresRangeAreRefusedAndNothingIsSent() async throws {
        try await Self.withEchoConnection(over: .tcp) { connection in
            for type in [-1, Int(UInt32.max) + 1, Int.min] {
                await #expect(throws: NetworkError.messageTypeOutOfRange(type: type)) {
                    try await connection.send(Data("refused".utf8), type: type)
                }
            }
            try await connection.send(Data("largest".utf8), type: Int(UInt32.max))
            let (content, metadata) = try await connection.receive()
            #expect(content == Data("largest".utf8))
            #expect(metadata.type == Int(UInt32.max))
        }
    }

    @Test(.timeLimit(.minutes(10))) func cancelledReceivesLoseNoMessage() async throws {
        try await Self.withEchoConnection(over: .tcp) { connection in
            func expectCancelled(_ task: Task<(content: Data, metadata: TLV.Metadata), any Error>) async {
                await #expect(throws: NetworkError.cancelled) { try await task.value }
            }

            // The first waits for bytes (feeding); the second queues behind it and is cancelled.
            // (The pauses are the wall clock's: they let a task reach its receive, which virtual
            // time does not measure.)
            let feeding = Task { try await connection.receive() }
            try await Task.sleep(for: .milliseconds(100))
            let queued = Task { try await connection.receive() }
            try await Task.sleep(for: .milliseconds(100))
            queued.cancel()
            await expectCancelled(queued)
            try await connection.send(Data("one".utf8), type: 1)
            #expect(try await feeding.value.content == Data("one".utf8))

            // A feeding receive cancelled before any byte of the next message arrives.
            let cancelledFeeding = Task { try await connection.receive() }
            try await Task.sleep(for: .milliseconds(100))
            cancelledFeeding.cancel()
            await expectCancelled(cancelledFeeding)
            for (index, text) in ["two", "three"].enumerated() { try await connection.send(Data(text.utf8), type: index + 2) }
            for (index, text) in ["two", "three"].enumerated() {
                let (content, metadata) = try await connection.receive()
                #expect(content == Data(text.utf8))
                #expect(metadata.type == UInt32(index + 2))
            }
        }
    }

    /// A raw TCP server announces a 4 GiB message: the TLV client's receive throws
    /// `messageTooLarge`, the connection fails with it, and the server sees it close.
    @Test(.timeLimit(.minutes(10))) func aHostileLengthFailsTheClientAndClosesTheConnection() async throws {
        try await MemoryWorld.run { world in
            // What the server saw, awaited (within the time limit) rather than polled for a fixed
            // time: under a full suite's load the server's task may run seconds later.
            let (serverSaw, seen) = AsyncStream<String>.makeStream()
            let server = try await RunningFramedListener.start(TCP(), port: world.port(), handler: { connection in
                try await connection.send(Data([0, 0, 0, 9, 0xFF, 0xFF, 0xFF, 0xFF]) + Data(repeating: 1, count: 100))
                do {
                    let (content, metadata) = try await connection.receive(atLeast: 1, atMost: 1024)
                    seen.yield("\(content.count) bytes, end \(metadata.isEndOfStream)")
                } catch {
                    seen.yield("\(error)")
                }
            })
            defer { server.task.cancel() }
            let connection = NetworkConnection(to: server.endpoint) { TLV { TCP() } }
            defer { connection.cancel() }
            let expected = NetworkError.messageTooLarge(size: Int(UInt32.max), maximum: 16 << 20)
            await #expect(throws: expected) { try await connection.receive() }
            // Later receives keep saying why.
            await #expect(throws: expected) { try await connection.receive() }
            for await state in connection.states {
                if case .failed = state { break }
            }
            #expect(connection.state == .failed(expected))
            var iterator = serverSaw.makeAsyncIterator()
            let saw = try #require(await iterator.next())
            #expect(saw == "0 bytes, end true" || saw.contains("reset"))
        }
    }

    /// A raw TCP client sends a header one byte above the listener's configured maximum: the
    /// listener's receive throws `messageTooLarge` and the client sees the connection close.
    @Test(.timeLimit(.minutes(10))) func aHostileLengthFromARawClientIsRejectedByTheListener() async throws {
        try await MemoryWorld.run { world in
            let serverError = TestSignal<any Error>()
            let server = try await RunningFramedListener.start(TLV { TCP() }.maximumMessageSize(1024), port: world.port()) { connection in
                do {
                    _ = try await connection.receive()
                } catch {
                    serverError.fulfill(error)
                }
            }
            defer { server.task.cancel() }
            let raw = NetworkConnection(to: server.endpoint) { TCP() }
            defer { raw.cancel() }
            try await raw.send(Data([0, 0, 0, 3, 0, 0, 4, 1]) + Data(repeating: 2, count: 10))
            var ended = false
            do {
                ended = try await raw.receive(atLeast: 1, atMost: 1024).metadata.isEndOfStream
            } catch NetworkError.connectionReset {
                ended = true
            }
            #expect(ended)
            // The client can see the end before the listener's handler has run its catch.
            let error = await serverError.wait() as? NetworkError
            #expect(error == .messageTooLarge(size: 1025, maximum: 1024))
        }
    }

    enum GameMessage: Codable, Equatable, Sendable {
        case selectedCharacter(String)
        case move(row: Int, column: Int)
    }

    /// A TLV server sends a type-0 message that is not JSON, then a good one: the Coder
    /// client's first receive throws `messageDecodingFailed` naming the type, and the next
    /// receive returns the good value (the connection stays usable).
    @Test(.timeLimit(.minutes(10)), arguments: Lower.allCases)
    func aMessageThatDoesNotDecodeIsATypedErrorAndTheConnectionGoesOn(_ lower: Lower) async throws {
        try await MemoryWorld.run { world in
            let server = try await RunningFramedListener.start(lower.server, port: world.port()) { connection in
                _ = try await connection.receive()
                try await connection.send(Data("not json".utf8), type: 0)
                try await connection.send(try JSONEncoder().encode(GameMessage.move(row: 1, column: 2)), type: 0)
                for try await _ in connection.messages {}
            }
            defer { server.task.cancel() }
            let connection: NetworkConnection<Coder<GameMessage, GameMessage, NetworkJSONCoder>>
            switch lower {
            case .tls: connection = NetworkConnection(to: server.endpoint) { Coder(GameMessage.self, using: .json) { testTLSClient() } }
            case .tcp: connection = NetworkConnection(to: server.endpoint) { Coder(GameMessage.self, using: .json) { TCP() } }
            }
            defer { connection.cancel() }
            try await connection.send(.selectedCharacter("🐨"))
            do {
                _ = try await connection.receive()
                Issue.record("garbage decoded")
            } catch NetworkError.messageDecodingFailed(let type, let reason) {
                #expect(type.hasSuffix("GameMessage"))
                #expect(!reason.isEmpty)
            }
            #expect(try await connection.receive().content == .move(row: 1, column: 2))
            #expect(connection.state == .ready)
        }
    }

    /// Apple's general form with different types each way, in property lists over TCP: the
    /// server's `Coder(receiving:sending:)` mirrors the client's `Coder(sending:receiving:)`.
    @Test(.timeLimit(.minutes(10))) func propertyListCoderWithDifferentTypesEachWay() async throws {
        try await MemoryWorld.run { world in
            struct Request: Codable, Sendable { var numbers: [Int] }
            struct Reply: Codable, Sendable, Equatable { var sum: Int; var count: Int }
            let server = try await RunningFramedListener.start(
                Coder(receiving: Request.self, sending: Reply.self, using: .propertyList) { TCP() }, port: world.port()
            ) { connection in
                for try await (request, _) in connection.messages {
                    try await connection.send(Reply(sum: request.numbers.reduce(0, +), count: request.numbers.count))
                }
            }
            defer { server.task.cancel() }
            let connection = NetworkConnection(to: server.endpoint) {
                Coder(sending: Request.self, receiving: Reply.self, using: .propertyList) { TCP() }
            }
            defer { connection.cancel() }
            for count in [0, 1, 1000, 100_000] {
                try await connection.send(Request(numbers: Array(0..<count)))
                let (reply, metadata) = try await connection.receive()
                #expect(reply == Reply(sum: (0..<count).reduce(0, +), count: count))
                #expect(metadata.type == CoderFraming.messageType)
            }
        }
    }

    /// `messages` ends when the peer closes between messages.
    @Test(.timeLimit(.minutes(10))) func messagesEndWhenThePeerCloses() async throws {
        try await MemoryWorld.run { world in
            let server = try await RunningFramedListener.start(TLV { TCP() }, port: world.port()) { connection in
                for index in 0..<3 { try await connection.send(Data([UInt8(index)]), type: 5) }
            }
            defer { server.task.cancel() }
            let connection = NetworkConnection(to: server.endpoint) { TLV { TCP() } }
            defer { connection.cancel() }
            var received: [Data] = []
            for try await (content, metadata) in connection.messages {
                #expect(metadata.type == 5)
                received.append(content)
            }
            #expect(received == [Data([0]), Data([1]), Data([2])])
        }
    }

    /// Every kind of collection a TLV send takes arrives whole and in order: contiguous ones
    /// (`Data`, a `Data` slice not starting at 0, arrays and array slices) small and large, and
    /// ones without contiguous storage (a lazy map, a range's bytes), which take the generic path.
    @Test(.timeLimit(.minutes(10)), arguments: Lower.allCases)
    func everyKindOfCollectionIsSentWhole(_ lower: Lower) async throws {
        try await Self.withEchoConnection(over: lower) { connection in
            let small = pattern(seed: 11, count: 300), large = pattern(seed: 12, count: 20_000)
            let wide = Data(pattern(seed: 13, count: 1000))
            let expected: [[UInt8]] = [
                small, Array(wide[100..<400]), small, Array(small[10..<200]), large, Array(large[5..<19_000]),
                small.map { $0 ^ 0x5a }, (0..<256).map { UInt8($0) }, large.map { $0 ^ 0xa5 },
            ]
            try await connection.send(Data(small), type: 0)
            try await connection.send(wide[100..<400], type: 1)
            try await connection.send(small, type: 2)
            try await connection.send(small[10..<200], type: 3)
            try await connection.send(Data(large), type: 4)
            try await connection.send(large[5..<19_000], type: 5)
            try await connection.send(small.lazy.map { $0 ^ 0x5a }, type: 6)
            try await connection.send((0..<256).lazy.map { UInt8($0) }, type: 7)
            try await connection.send(large.lazy.map { $0 ^ 0xa5 }, type: 8)
            for (index, bytes) in expected.enumerated() {
                let (content, metadata) = try await connection.receive()
                #expect(metadata.type == index)
                #expect(Array(content) == bytes)
            }
        }
    }

    /// TLV over UDP is not implemented (TLV frames a byte stream; `Coder { UDP() }` sends one
    /// value per datagram): a connection and a listener fail with `unsupported`, saying so.
    @Test func tlvOverUDPIsUnsupported() async throws {
        try await MemoryWorld.run { world in
            let what = "TLV over UDP (not implemented: TLV frames a byte stream, over TLS, TCP or a QUIC stream; "
                + "for one message per datagram use Coder { UDP() }, or UDP() itself)"
            let connection = NetworkConnection(to: world.nobody()) { TLV { UDP() } }
            defer { connection.cancel() }
            await #expect(throws: NetworkError.unsupported(what)) {
                try await connection.send(Data("hello".utf8), type: 1)
            }
            let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: world.port())) { TLV { UDP { IP().version(.v4) } } }
            await #expect(throws: NetworkError.unsupported(what + " (listener)")) {
                try await listener.run { _ in }
            }
        }
    }
}
