import Foundation
import Testing

@testable import Braid

/// `WebSocket` connections between a Braid client and a Braid listener, over TLS and over TCP,
/// in memory (`MemoryWorld`'s byte streams): messages of many sizes both ways with their
/// opcodes, ping and pong (answered by the application and automatically), the close
/// handshake with its code and reason, and a message over the listener's maximum.
@Suite struct WebSocketConnectionTests {
    enum Lower: String, CaseIterable, Sendable {
        case tls, tcp

        func server(_ change: (WebSocket) -> WebSocket = { $0 }) -> WebSocket {
            switch self {
            case .tls: change(WebSocket { testTLSServer() })
            case .tcp: change(WebSocket { TCP() })
            }
        }

        func client(_ change: (WebSocket) -> WebSocket = { $0 }) -> WebSocket {
            switch self {
            case .tls: change(WebSocket { testTLSClient() })
            case .tcp: change(WebSocket { TCP() })
            }
        }
    }

    /// Echoes every text and binary message with its opcode, answers pings, and ends at the
    /// peer's close.
    @Sendable static func echo(_ connection: NetworkConnection<WebSocket>) async throws {
        for try await (content, metadata) in connection.messages {
            switch metadata.opcode {
            case .text: try await connection.send(String(decoding: content, as: UTF8.self))
            case .binary: try await connection.send(content)
            case .ping: try await connection.pong(content)
            default: break
            }
        }
    }

    @Test(.timeLimit(.minutes(10)), arguments: Lower.allCases)
    func messagesOfManySizesEchoWithTheirOpcodes(_ lower: Lower) async throws {
        try await MemoryWorld.run { world in
            let server = try await RunningFramedListener.start(lower.server(), port: world.port(), handler: Self.echo)
            defer { server.task.cancel() }
            let connection = NetworkConnection(to: server.endpoint) { lower.client() }
            defer { connection.cancel() }
            // Up to 200 KB: 1 MiB messages cross the loopback in WebSocketInteropTests, and a memory
            // world holds one of the machine's turns while it runs.
            let sizes = [0, 1, 125, 126, 65535, 65536, 200_000]
            async let sent: Void = {
                for (index, size) in sizes.enumerated() {
                    if index.isMultiple(of: 2) {
                        try await connection.send(String(repeating: "é", count: size / 2))
                    } else {
                        try await connection.send(Data(pattern(seed: UInt64(index), count: size)))
                    }
                }
            }()
            for (index, size) in sizes.enumerated() {
                let (content, metadata) = try await connection.receive()
                if index.isMultiple(of: 2) {
                    #expect(metadata.opcode == .text)
                    #expect(String(decoding: content, as: UTF8.self) == String(repeating: "é", count: size / 2))
                } else {
                    #expect(metadata.opcode == .binary)
                    #expect(content == Data(pattern(seed: UInt64(index), count: size)))
                }
                #expect(metadata.isComplete)
            }
            try await sent
        }
    }

    @Test(.timeLimit(.minutes(10)), arguments: Lower.allCases)
    func pingIsAnsweredByTheApplicationOrAutomatically(_ lower: Lower) async throws {
        try await MemoryWorld.run { world in
            let server = try await RunningFramedListener.start(lower.server(), port: world.port(), handler: Self.echo)
            defer { server.task.cancel() }
            let connection = NetworkConnection(to: server.endpoint) { lower.client() }
            defer { connection.cancel() }
            try await connection.send(Data("are you there?".utf8)) { NWProtocolWebSocket.Metadata(opcode: .ping) }
            let (content, metadata) = try await connection.receive()
            #expect(metadata.opcode == .pong)
            #expect(content == Data("are you there?".utf8))

            let automatic = try await RunningFramedListener.start(lower.server { $0.autoReplyPing(true) }, port: world.port()) { peer in
                for try await _ in peer.messages {}
            }
            defer { automatic.task.cancel() }
            let second = NetworkConnection(to: automatic.endpoint) { lower.client() }
            defer { second.cancel() }
            try await second.send(Data([7])) { NWProtocolWebSocket.Metadata(opcode: .ping) }
            let pong = try await second.receive()
            #expect(pong.metadata.opcode == .pong)
            #expect(pong.content == Data([7]))
        }
    }

    @Test(.timeLimit(.minutes(10)), arguments: Lower.allCases)
    func closeHandshakeCarriesTheCodeAndReasonBothWays(_ lower: Lower) async throws {
        try await MemoryWorld.run { world in
            let (seen, report) = AsyncStream.makeStream(of: (code: NWProtocolWebSocket.CloseCode?, reason: String).self)
            let server = try await RunningFramedListener.start(lower.server(), port: world.port()) { peer in
                for try await (content, metadata) in peer.messages where metadata.opcode == .close {
                    report.yield((metadata.closeCode, String(decoding: content, as: UTF8.self)))
                }
            }
            defer { server.task.cancel() }
            let connection = NetworkConnection(to: server.endpoint) { lower.client() }
            defer { connection.cancel() }
            try await connection.send("last words")
            try await connection.close(code: .protocolCode(.goingAway), reason: "bye")
            let (content, metadata) = try await connection.receive()
            #expect(metadata.opcode == .close)
            #expect(metadata.closeCode == .protocolCode(.goingAway))
            #expect(metadata.lastMessage)
            #expect(content.isEmpty)
            await #expect(throws: NetworkError.self) { try await connection.receive() }
            var reports = seen.makeAsyncIterator()
            let close = await reports.next()
            #expect(close?.code == .protocolCode(.goingAway))
            #expect(close?.reason == "bye")
        }
    }

    @Test(.timeLimit(.minutes(10)), arguments: Lower.allCases)
    func messageOverTheListenersMaximumClosesWith1009(_ lower: Lower) async throws {
        try await MemoryWorld.run { world in
            let (failures, report) = AsyncStream.makeStream(of: NetworkError?.self)
            let server = try await RunningFramedListener.start(lower.server { $0.maximumMessageSize(1000) }, port: world.port()) { peer in
                do {
                    for try await _ in peer.messages {}
                    report.yield(nil)
                } catch {
                    report.yield(error as? NetworkError)
                }
            }
            defer { server.task.cancel() }
            let connection = NetworkConnection(to: server.endpoint) { lower.client() }
            defer { connection.cancel() }
            try await connection.send(Data(count: 1000))
            try await connection.send(Data(count: 1001))
            let (_, metadata) = try await connection.receive()
            #expect(metadata.opcode == .close)
            #expect(metadata.closeCode == .protocolCode(.messageTooBig))
            var reports = failures.makeAsyncIterator()
            let failure = await reports.next()
            #expect(failure == .messageTooLarge(size: 1001, maximum: 1000))
        }
    }

    /// With `skipHandshake` on both ends, frames flow from the first byte.
    @Test(.timeLimit(.minutes(10)), arguments: Lower.allCases)
    func skipHandshakeOnBothEndsFramesAtOnce(_ lower: Lower) async throws {
        try await MemoryWorld.run { world in
            let server = try await RunningFramedListener.start(lower.server { $0.skipHandshake(true) }, port: world.port(), handler: Self.echo)
            defer { server.task.cancel() }
            let connection = NetworkConnection(to: server.endpoint) { lower.client { $0.skipHandshake(true) } }
            defer { connection.cancel() }
            try await connection.send("no upgrade")
            let (content, metadata) = try await connection.receive()
            #expect(metadata.opcode == .text)
            #expect(content == Data("no upgrade".utf8))
        }
    }

    /// A server that answers the upgrade with 404 fails the client with the status it sent.
    @Test(.timeLimit(.minutes(10))) func refusedUpgradeFailsWithTheServersStatus() async throws {
        try await MemoryWorld.run { world in
            let server = try await RunningStreamListener.start(TCP(), configure: { _ in }) { connection in
                var head = Data()
                while !head.suffix(4).elementsEqual(Array("\r\n\r\n".utf8)) {
                    head += try await connection.receive(atLeast: 1, atMost: 1).content
                }
                try await connection.send(Data("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n".utf8))
            }
            defer { server.task.cancel() }
            _ = world
            let connection = NetworkConnection(to: .url(URL(string: "ws://127.0.0.1:\(server.port.rawValue)/missing")!)) { WebSocket { TCP() } }
            defer { connection.cancel() }
            do {
                try await connection.send("anyone?")
                _ = try await connection.receive()
                Issue.record("the refused upgrade was not reported")
            } catch let error as NetworkError {
                guard case .webSocketHandshakeFailed(let reason) = error else {
                    Issue.record("failed with \(error), not the refused upgrade")
                    return
                }
                #expect(reason.contains("404 Not Found"), "\(reason)")
            }
        }
    }

    @Test func upgradeNamesTheURLsHostPathAndQuery() throws {
        let url = NWEndpoint.url(URL(string: "wss://chat.example.com/room/1?user=ann")!)
        #expect(url.port == 443)
        #expect(WebSocketLayering.hostHeader(url, secure: true) == "chat.example.com")
        #expect(WebSocketLayering.requestTarget(url) == "/room/1?user=ann")
        let plain = NWEndpoint.url(URL(string: "ws://127.0.0.1:8080")!)
        #expect(plain.port == 8080)
        #expect(WebSocketLayering.hostHeader(plain, secure: false) == "127.0.0.1:8080")
        #expect(WebSocketLayering.requestTarget(plain) == "/")
        #expect(WebSocketLayering.hostHeader(.hostPort(host: "::1", port: 80), secure: false) == "[::1]")
    }

    @Test(.timeLimit(.minutes(10))) func webSocketOverAStreamTypeBraidCannotRunIsUnsupported() async throws {
        try await MemoryWorld.run { world in
            // Only TLS and TCP carry WebSocket; a stream type of the caller's fails on start.
            struct Custom: StreamProtocol {}
            let connection = NetworkConnection(to: .hostPort(host: "127.0.0.1", port: world.port())) { WebSocket { Custom() } }
            defer { connection.cancel() }
            await #expect(throws: NetworkError.self) { try await connection.send("x") }
        }
    }
}
