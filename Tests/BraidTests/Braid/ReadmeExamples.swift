import Braid
import Foundation
import Testing

// The README's examples, verbatim apart from file paths and the port, so they compile with
// every build and run against each other here.

/// README: a server.
func readmeServer(port: NWEndpoint.Port, certificate: String, key: String) async throws {
    let listener = NetworkListener(port: port) {
        QUIC(alpn: ["echo"]).identity(certificateChainFile: certificate, privateKeyFile: key)
    }
    try await listener.run { connection in
        try await connection.inboundStreams { stream in
            let (request, _) = try await stream.receive(atLeast: 1, atMost: 65536)
            try await stream.send(request, endOfStream: true)
        }
    }
}

/// README: a client with one stream.
func readmeClient(port: NWEndpoint.Port, caFile: String) async throws -> String {
    let connection = NetworkConnection(to: .hostPort(host: "localhost", port: port)) {
        QUIC(alpn: ["echo"]).trust(.certificateAuthorities(file: caFile))
    }
    defer { connection.cancel() }
    let stream = try await connection.openStream()
    try await stream.send(Data("hello".utf8), endOfStream: true)
    let (reply, _) = try await stream.receive(atLeast: 1, atMost: 1024)
    return String(decoding: reply, as: UTF8.self)
}

/// README: datagrams.
func readmeDatagrams(_ connection: NetworkConnection<QUIC>) async throws -> Data? {
    try await connection.datagrams.send(Data([1, 2, 3]))
    for await datagram in connection.datagrams {
        return datagram
    }
    return nil
}

@Suite struct ReadmeExamples {
    @Test func clientAndServerExamplesTalk() async throws {
        // The server example listens on every address of a fixed port; pick a free one first.
        let probe = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any)) {
            QUIC(alpn: ["echo"]).identity(
                certificateChainFile: Fixtures.path("server.pem"), privateKeyFile: Fixtures.path("server-key.pem"))
        }
        let probing = Task { try await probe.run { _ in } }
        for await state in probe.states where state == .ready { break }
        let port = try #require(probe.port)
        probing.cancel()
        _ = try? await probing.value

        let server = Task {
            try await readmeServer(port: port, certificate: Fixtures.path("server.pem"), key: Fixtures.path("server-key.pem"))
        }
        defer { server.cancel() }
        var reply: String?
        // The listener binds asynchronously: retry the client briefly until it answers.
        for _ in 0..<50 where reply == nil {
            reply = try? await readmeClient(port: port, caFile: Fixtures.caFile)
            if reply == nil { try await Task.sleep(for: .milliseconds(20)) }
        }
        #expect(reply == "hello")

        let echoServer = try await RunningListener.start()
        defer { echoServer.task.cancel() }
        let connection = NetworkConnection(to: echoServer.endpoint) { testClient() }
        defer { connection.cancel() }
        #expect(try await readmeDatagrams(connection) == Data([1, 2, 3]))
    }
}
