import Foundation

@testable import Braid

/// Echoes what a TLS or TCP connection receives until the peer finishes, then finishes too.
@Sendable func echoBytes<P: StreamProtocol>(_ connection: NetworkConnection<P>) async throws {
    while true {
        let (content, metadata) = try await connection.receive(atLeast: 1, atMost: 256 * 1024)
        try await connection.send(content, endOfStream: metadata.isEndOfStream)
        if metadata.isEndOfStream { return }
    }
}

/// A TLS or TCP listener on 127.0.0.1 with a system-chosen port, running `handler` in a task.
struct RunningStreamListener<P: StreamProtocol> {
    let listener: NetworkListener<P>
    let task: Task<Void, any Error>
    var port: NWEndpoint.Port { listener.port! }
    var endpoint: NWEndpoint { .hostPort(host: "127.0.0.1", port: port) }

    static func start(
        host: NWEndpoint.Host = "127.0.0.1", _ stack: P, configure: (NetworkListener<P>) -> Void = { _ in },
        handler: @escaping @Sendable (NetworkConnection<P>) async throws -> Void = echoBytes
    ) async throws -> RunningStreamListener {
        let listener = NetworkListener(for: .hostPort(host: host, port: .any), using: NetworkParameters(stack: stack))
        configure(listener)
        let task = Task { try await listener.run(handler) }
        try await listener.waitUntilReady()
        return RunningStreamListener(listener: listener, task: task)
    }
}

/// How long the test stacks give a handshake: on a loaded machine (the suite's hundreds of
/// tasks, other processes) a debug build's handshake took past the 10 s default. A test of
/// the timeout itself sets its own.
let testHandshakeTimeout = Duration.seconds(60)

/// A listener's TLS stack with the test server certificate.
func testTLSServer(alpn: [String] = ["echo"]) -> TLS {
    TLS().alpn(alpn).handshakeTimeout(testHandshakeTimeout)
        .identity(certificateChainFile: Fixtures.path("server.pem"), privateKeyFile: Fixtures.path("server-key.pem"))
}

/// A client TLS stack trusting the test CA.
func testTLSClient(alpn: [String] = ["echo"]) -> TLS {
    TLS().alpn(alpn).handshakeTimeout(testHandshakeTimeout).trust(.certificateAuthorities(file: Fixtures.caFile)).serverName("localhost")
}

/// Sends `bytes` in pieces of up to `piece` bytes, then ends the stream.
func sendAll<P: StreamProtocol>(_ bytes: [UInt8], on connection: NetworkConnection<P>, piece: Int = 256 * 1024) async throws {
    var offset = 0
    while offset < bytes.count {
        let end = min(offset + piece, bytes.count)
        try await connection.send(bytes[offset..<end])
        offset = end
    }
    try await connection.send(Data(), endOfStream: true)
}

/// Receives until the peer finishes; returns everything received.
func receiveAll<P: StreamProtocol>(_ connection: NetworkConnection<P>) async throws -> [UInt8] {
    var received: [UInt8] = []
    while true {
        let (content, metadata) = try await connection.receive(atLeast: 1, atMost: 1 << 20)
        received.append(contentsOf: content)
        if metadata.isEndOfStream { return received }
    }
}
