import Foundation
import Testing

@testable import Braid

/// `Coder { UDP() }`: one value per datagram, between a Braid client and a Braid listener in
/// memory (`MemoryWorld`). The in-memory network loses no datagram, so each exchange is one
/// send and one receive.
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

    /// A Coder JSON client and a Coder JSON listener echo a few values, each one datagram.
    @Test(.timeLimit(.minutes(10))) func echoesCodableValues() async throws {
        try await MemoryWorld.run { _ in
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
                try await connection.send(value)
                #expect(try await connection.receive().content == value)
            }
            #expect(connection.state == .ready)
            #expect(connection.remoteEndpoint == server.endpoint)
        }
    }

    /// Raw datagrams from a plain `UDP()` client to a Coder listener: one that is not JSON and
    /// one larger than the listener's `maximumMessageSize` each throw their typed error on the
    /// listener's receive, and the receive after each gets the next datagram's value.
    @Test(.timeLimit(.minutes(10))) func aDatagramThatDoesNotDecodeIsATypedErrorAndTheConnectionGoesOn() async throws {
        try await MemoryWorld.run { _ in
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
            @Sendable func report(for datagram: Data) async throws -> Report {
                try await connection.send(datagram)
                return try JSONDecoder().decode(Report.self, from: try await connection.receive().content)
            }
            let failed = try await report(for: Data("not json".utf8))
            guard case .decodingFailed(let type, let reason) = failed else {
                Issue.record("a datagram that is not JSON was reported as \(failed)")
                return
            }
            #expect(type.hasSuffix("GameMessage"))
            #expect(!reason.isEmpty)
            let move = try JSONEncoder().encode(GameMessage.move(row: 3, column: 4))
            #expect(try await report(for: move) == .decoded(.move(row: 3, column: 4)))
            let large = Data(repeating: UInt8(ascii: " "), count: 1001)
            #expect(try await report(for: large) == .tooLarge(size: 1001, maximum: 1000))
            #expect(try await report(for: JSONEncoder().encode(GameMessage.resign)) == .decoded(.resign))
        }
    }

    /// A plain UDP listener answers a Coder client with a datagram that is not JSON, then a
    /// good one: the client's receive throws `messageDecodingFailed` naming the type, and its
    /// next receive returns the good value.
    @Test(.timeLimit(.minutes(10))) func aCoderClientReceivingADatagramThatDoesNotDecodeGoesOn() async throws {
        try await MemoryWorld.run { _ in
            let server = try await RunningUDPEcho.start { connection in
                _ = try await connection.receive()
                try await connection.send(Data("{\"not\": \"a game message\"}".utf8))
                try await connection.send(try JSONEncoder().encode(GameMessage.move(row: 5, column: 6)))
                for try await _ in connection.messages {}
            }
            defer { server.task.cancel() }
            let connection = NetworkConnection(to: server.endpoint) { Coder(GameMessage.self, using: .json) { UDP() } }
            defer { connection.cancel() }
            try await connection.send(.resign)
            do {
                let unexpected = try await connection.receive().content
                Issue.record("the datagram that is not a GameMessage decoded as \(unexpected)")
                return
            } catch NetworkError.messageDecodingFailed(let type, let reason) {
                #expect(type.hasSuffix("GameMessage"))
                #expect(!reason.isEmpty)
            }
            #expect(try await connection.receive().content == .move(row: 5, column: 6))
            #expect(connection.state == .ready)
        }
    }

    /// Apple's general form with different types each way: the listener's
    /// `Coder(receiving:sending:)` mirrors the client's `Coder(sending:receiving:)`.
    @Test(.timeLimit(.minutes(10))) func differentTypesEachWay() async throws {
        struct Request: Codable, Sendable { var id: Int; var numbers: [Int] }
        struct Reply: Codable, Sendable, Equatable { var id: Int; var sum: Int }
        try await MemoryWorld.run { _ in
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
                try await connection.send(Request(id: id, numbers: Array(0..<count)))
                #expect(try await connection.receive().content == Reply(id: id, sum: (0..<count).reduce(0, +)))
            }
        }
    }

    /// A value that encodes larger than a UDP datagram carries is `datagramTooLarge`, and the
    /// connection goes on.
    @Test(.timeLimit(.minutes(10))) func aValueLargerThanADatagramIsATypedError() async throws {
        try await MemoryWorld.run { _ in
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
            try await connection.send("after")
            #expect(try await connection.receive().content == "after")
        }
    }
}
