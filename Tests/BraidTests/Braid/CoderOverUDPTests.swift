import Foundation
import Testing

@testable import Braid

/// `Coder { UDP() }`: one value per datagram, between a Braid client and a Braid listener
/// over loopback. UDP may drop a datagram under load, so exchanges resend until the reply
/// they wait for comes (as `udpEcho` does), skipping late replies to earlier sends.
@Suite struct CoderOverUDPTests {
    enum GameMessage: Codable, Equatable, Sendable {
        case selectedCharacter(String)
        case move(row: Int, column: Int)
        case resign
    }

    /// What the test listener of `aDatagramThatDoesNotDecodeIsATypedErrorAndTheConnectionGoesOn`
    /// reports back for each datagram it received.
    enum Report: Codable, Equatable, Sendable {
        case decoded(GameMessage)
        case decodingFailed(type: String, reason: String)
        case tooLarge(size: Int, maximum: Int)
    }

    typealias JSONCoder<Sending: Codable, Receiving: Codable> = Coder<Sending, Receiving, NetworkJSONCoder>

    /// Sends `value` until a reply `accept` takes arrives: at most `attempts` tries, each
    /// waiting `interval`. Nil if none does.
    func exchange<Sending: Encodable & Sendable, Receiving: Decodable & Sendable>(
        _ value: Sending, on connection: NetworkConnection<JSONCoder<Sending, Receiving>>, attempts: Int = 25,
        interval: Duration = .milliseconds(200), until accept: (Receiving) -> Bool
    ) async throws -> Receiving? {
        // Backing off as `udpEcho` does (200 ms doubling to 1 s): a full suite's load can hold
        // a reply's task for seconds.
        var wait = interval
        for _ in 0..<attempts {
            try await connection.send(value)
            while let reply = try await receiveValueWithin(wait, on: connection) {
                if accept(reply) { return reply }
            }
            wait = min(wait * 2, max(interval, .seconds(1)))
        }
        return nil
    }

    /// The next value, or nil if none arrives within `interval`. A value the receive took as
    /// the timer ran out is returned, not dropped with the cancelled receive.
    func receiveValueWithin<Sending: Encodable & Sendable, Receiving: Decodable & Sendable>(
        _ interval: Duration, on connection: NetworkConnection<JSONCoder<Sending, Receiving>>
    ) async throws -> Receiving? {
        try await withThrowingTaskGroup(of: Receiving?.self) { group in
            group.addTask { try await connection.receive().content }
            group.addTask {
                try await Task.sleep(for: interval)
                return nil
            }
            let first = try await group.next() ?? nil
            group.cancelAll()
            if let first { return first }
            while let result = await group.nextResult() {
                if case .success(let value?) = result { return value }
            }
            return nil
        }
    }

    /// A Coder JSON client and a Coder JSON listener echo a few values, each one datagram.
    @Test(.timeLimit(.minutes(3))) func echoesCodableValues() async throws {
        let server = try await RunningFramedListener.start(Coder(GameMessage.self, using: .json) { UDP() }) { connection in
            for try await (message, metadata) in connection.messages {
                #expect(metadata.type == CoderFraming.messageType)
                try await connection.send(message)
            }
        }
        defer { server.task.cancel() }
        let connection = NetworkConnection(to: server.endpoint) {
            Coder(GameMessage.self, using: .json) { UDP { IP().version(.v4) } }
        }
        defer { connection.cancel() }
        let values: [GameMessage] = [.selectedCharacter("🐨"), .move(row: 1, column: 2), .resign, .selectedCharacter(String(repeating: "x", count: 60_000))]
        for value in values {
            #expect(try await exchange(value, on: connection) { $0 == value } == value)
        }
        #expect(connection.state == .ready)
        #expect(connection.remoteEndpoint == server.endpoint)
    }

    /// Raw datagrams from a plain `UDP()` client to a Coder listener: one that is not JSON and
    /// one larger than the listener's `maximumMessageSize` each throw their typed error on the
    /// listener's receive, and the receive after each gets the next datagram's value.
    @Test(.timeLimit(.minutes(3))) func aDatagramThatDoesNotDecodeIsATypedErrorAndTheConnectionGoesOn() async throws {
        let stack = Coder(sending: Report.self, receiving: GameMessage.self, using: .json) { UDP() }.maximumMessageSize(1000)
        let server = try await RunningFramedListener.start(stack) { connection in
            while true {
                let report: Report
                do {
                    report = .decoded(try await connection.receive().content)
                } catch NetworkError.messageDecodingFailed(let type, let reason) {
                    report = .decodingFailed(type: type, reason: reason)
                } catch NetworkError.messageTooLarge(let size, let maximum) {
                    report = .tooLarge(size: size, maximum: maximum)
                }
                try await connection.send(report)
            }
        }
        defer { server.task.cancel() }
        let connection = NetworkConnection(to: server.endpoint) { UDP() }
        defer { connection.cancel() }
        func report(for datagram: Data, until accept: (Report) -> Bool) async throws -> Report? {
            var wait = Duration.milliseconds(200)
            for _ in 0..<25 {
                try await connection.send(datagram)
                while let reply = try await receiveWithin(wait, on: connection) {
                    let report = try JSONDecoder().decode(Report.self, from: reply.content)
                    if accept(report) { return report }
                }
                wait = min(wait * 2, .seconds(1))
            }
            return nil
        }
        let failed = try #require(await report(for: Data("not json".utf8)) { if case .decodingFailed = $0 { true } else { false } })
        if case .decodingFailed(let type, let reason) = failed {
            #expect(type.hasSuffix("GameMessage"))
            #expect(!reason.isEmpty)
        }
        let move = try JSONEncoder().encode(GameMessage.move(row: 3, column: 4))
        #expect(try await report(for: move) { $0 != failed } == .decoded(.move(row: 3, column: 4)))
        let large = Data(repeating: UInt8(ascii: " "), count: 1001)
        #expect(try await report(for: large) { if case .tooLarge = $0 { true } else { false } } == .tooLarge(size: 1001, maximum: 1000))
        #expect(try await report(for: JSONEncoder().encode(GameMessage.resign)) { $0 == .decoded(.resign) } == .decoded(.resign))
    }

    /// A plain UDP listener answers a Coder client with a datagram that is not JSON, then a
    /// good one: the client's receive throws `messageDecodingFailed` naming the type, and its
    /// next receive returns the good value.
    @Test(.timeLimit(.minutes(3))) func aCoderClientReceivingADatagramThatDoesNotDecodeGoesOn() async throws {
        let server = try await RunningUDPEcho.start { connection in
            // Answers the first datagram only (the client may resend it).
            _ = try await connection.receive()
            try await connection.send(Data("{\"not\": \"a game message\"}".utf8))
            try await connection.send(try JSONEncoder().encode(GameMessage.move(row: 5, column: 6)))
            for try await _ in connection.messages {}
        }
        defer { server.task.cancel() }
        let connection = NetworkConnection(to: server.endpoint) { Coder(GameMessage.self, using: .json) { UDP() } }
        defer { connection.cancel() }
        // One receive waits throughout (a receive cancelled on a timeout could take the bad
        // datagram with it) while the request is resent until the server answers; if it never
        // does, the connection is cancelled and the receive fails.
        let sender = Task {
            for _ in 0..<25 {
                try await connection.send(.resign)
                try await Task.sleep(for: .milliseconds(200))
            }
            connection.cancel()
        }
        defer { sender.cancel() }
        do {
            let unexpected = try await connection.receive().content
            Issue.record("the datagram that is not a GameMessage decoded as \(unexpected)")
            return
        } catch NetworkError.messageDecodingFailed(let type, let reason) {
            #expect(type.hasSuffix("GameMessage"))
            #expect(!reason.isEmpty)
        }
        sender.cancel()
        #expect(try await connection.receive().content == .move(row: 5, column: 6))
        #expect(connection.state == .ready)
    }

    /// Apple's general form with different types each way: the listener's
    /// `Coder(receiving:sending:)` mirrors the client's `Coder(sending:receiving:)`.
    @Test(.timeLimit(.minutes(3))) func differentTypesEachWay() async throws {
        struct Request: Codable, Sendable { var id: Int; var numbers: [Int] }
        struct Reply: Codable, Sendable, Equatable { var id: Int; var sum: Int }
        let server = try await RunningFramedListener.start(
            Coder(receiving: Request.self, sending: Reply.self, using: .json) { UDP() }
        ) { connection in
            for try await (request, _) in connection.messages {
                try await connection.send(Reply(id: request.id, sum: request.numbers.reduce(0, +)))
            }
        }
        defer { server.task.cancel() }
        let connection = NetworkConnection(to: server.endpoint) {
            Coder(sending: Request.self, receiving: Reply.self, using: .json) { UDP() }
        }
        defer { connection.cancel() }
        for (id, count) in [0, 1, 100, 5000].enumerated() {
            let expected = Reply(id: id, sum: (0..<count).reduce(0, +))
            #expect(try await exchange(Request(id: id, numbers: Array(0..<count)), on: connection) { $0.id == id } == expected)
        }
    }

    /// A value that encodes larger than a UDP datagram carries is `datagramTooLarge`, and the
    /// connection goes on.
    @Test(.timeLimit(.minutes(3))) func aValueLargerThanADatagramIsATypedError() async throws {
        let server = try await RunningFramedListener.start(Coder(String.self, using: .json) { UDP() }) { connection in
            for try await (message, _) in connection.messages { try await connection.send(message) }
        }
        defer { server.task.cancel() }
        let connection = NetworkConnection(to: server.endpoint) { Coder(String.self, using: .json) { UDP() } }
        defer { connection.cancel() }
        // JSON adds the two quotes.
        await #expect(throws: NetworkError.datagramTooLarge(size: 70_002, maximum: 65_507)) {
            try await connection.send(String(repeating: "a", count: 70_000))
        }
        #expect(try await exchange("after", on: connection) { $0 == "after" } == "after")
    }
}
