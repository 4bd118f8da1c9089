import Dispatch
import Foundation
import Testing

@testable import Braid
import BraidCore

/// A listener given no address takes IPv4 and IPv6 clients on one port (a dual-stack socket),
/// and reports an IPv4 client as a plain IPv4 endpoint, never as ::ffff:127.0.0.1. Real
/// sockets: what is checked is the kernel's dual-stack behaviour.
@Suite(.timeLimit(.minutes(3))) struct DualStackListenerTests {
    static let clientHosts: [NWEndpoint.Host] = ["127.0.0.1", "::1"]

    /// Starts `listener`, recording each connection's endpoint in `peers` before `handler` runs.
    static func start<P: NetworkProtocol>(
        _ listener: NetworkListener<P>, peers: EndpointLog,
        _ handler: @escaping @Sendable (NetworkConnection<P>) async throws -> Void
    ) async throws -> (port: NWEndpoint.Port, task: Task<Void, any Error>) {
        let task = Task {
            try await listener.run { connection in
                peers.append(connection.endpoint)
                try await handler(connection)
            }
        }
        try await listener.waitUntilReady()
        let port = try #require(listener.port)
        return (port, task)
    }

    @Test(arguments: ["tcp", "tls"]) func aByteStreamListenerWithoutAHostTakesBothFamilies(_ kind: String) async throws {
        let peers = EndpointLog()
        if kind == "tcp" {
            let (port, task) = try await Self.start(NetworkListener { TCP() }, peers: peers, echoBytes)
            defer { task.cancel() }
            for host in Self.clientHosts {
                let connection = NetworkConnection(to: .hostPort(host: host, port: port)) { TCP() }
                try await connection.send(Data("from \(host)".utf8), endOfStream: true)
                #expect(try await receiveAll(connection) == Array("from \(host)".utf8))
            }
        } else {
            let (port, task) = try await Self.start(NetworkListener { testTLSServer() }, peers: peers, echoBytes)
            defer { task.cancel() }
            for host in Self.clientHosts {
                let connection = NetworkConnection(to: .hostPort(host: host, port: port)) { testTLSClient() }
                try await connection.send(Data("from \(host)".utf8), endOfStream: true)
                #expect(try await receiveAll(connection) == Array("from \(host)".utf8))
            }
        }
        #expect(peers.hosts == ["127.0.0.1", "::1"])
    }

    @Test func aUDPListenerWithoutAHostTakesBothFamiliesAndAnswersFromTheRightAddress() async throws {
        let peers = EndpointLog()
        let (port, task) = try await Self.start(NetworkListener { UDP() }, peers: peers) { connection in
            for try await (content, _) in connection.messages { try await connection.send(content) }
        }
        defer { task.cancel() }
        for host in Self.clientHosts {
            let connection = NetworkConnection(to: .hostPort(host: host, port: port)) { UDP() }
            let message = Data("datagram from \(host)".utf8)
            // UDP may drop a datagram: send again until the echo comes.
            let sender = Task {
                while !Task.isCancelled {
                    try await connection.send(message)
                    try await Task.sleep(for: .milliseconds(200))
                }
            }
            let (echoed, metadata) = try await connection.receive()
            sender.cancel()
            #expect(echoed == message)
            // The reply came from the address the client sent to, in its own family.
            #expect(metadata.remoteEndpoint == NWEndpoint.hostPort(host: host, port: port))
        }
        #expect(peers.hosts == ["127.0.0.1", "::1"])
    }

    @Test func aQUICListenerWithoutAHostTakesBothFamilies() async throws {
        let peers = EndpointLog()
        let listener = NetworkListener {
            testServer()
        }
        let (port, task) = try await Self.start(listener, peers: peers, echo)
        defer { task.cancel() }
        for host in Self.clientHosts {
            let connection = NetworkConnection(to: .hostPort(host: host, port: port)) { testClient() }
            #expect(try await echoOnConcurrentStreams(connection, count: 4) == 4)
        }
        #expect(peers.hosts == ["127.0.0.1", "::1"])
    }

    @Test(arguments: ["tcp", "udp"]) func aClassicListenerWithoutAHostTakesBothFamilies(_ kind: String) async throws {
        let server = try ClassicEchoServer(kind == "tcp" ? .tcp : .udp)
        let port = try await server.start()
        defer { server.listener.cancel() }
        for host in Self.clientHosts {
            let connection = NWConnection(host: host, port: port, using: kind == "tcp" ? .tcp : .udp)
            defer { connection.cancel() }
            connection.start(queue: DispatchQueue(label: "client"))
            let message = Data("classic from \(host)".utf8)
            let reply = Task {
                if kind == "tcp" {
                    let (content, isComplete, error) = await connection.receiveAsync(minimum: message.count)
                    return (content, isComplete, error)
                }
                return await connection.receiveMessageAsync()
            }
            let sender = Task {
                while !Task.isCancelled {
                    _ = await connection.sendAsync(message)
                    // TCP delivers the one send; UDP may drop it, so send again until the echo comes.
                    if kind == "tcp" { return }
                    try? await Task.sleep(for: .milliseconds(200))
                }
            }
            let (content, _, error) = await reply.value
            sender.cancel()
            #expect(error == nil)
            #expect(content == message)
        }
    }
}
