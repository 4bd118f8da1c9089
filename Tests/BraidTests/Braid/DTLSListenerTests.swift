import Braid
import BraidTLS
import Foundation
import Synchronization
import BraidPerf
import Testing

/// `NetworkListener { DTLS { UDP() } }` over loopback: Braid's client and GnuTLS's
/// (`gnutls-cli --udp`) against it, peer authentication's server default, and hellos without
/// a cookie, which get no connection.
@Suite(.serialized, .timeLimit(.minutes(2))) struct DTLSListenerTests {
    /// A listener on 127.0.0.1 echoing every message, with the test server certificate; each
    /// connection cancels itself after `cancellingAfter` echoes, if given.
    private func startEchoListener(
        cancellingAfter limit: Int? = nil, _ configure: (DTLS) -> DTLS = { $0.peerAuthentication(.none) }
    ) async throws -> (NetworkListener<DTLS>, Task<Void, any Error>) {
        let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any)) {
            configure(DTLS { UDP() }.alpn(["echo"]).identity(
                certificateChainFile: Fixtures.path("server.pem"), privateKeyFile: Fixtures.path("server-key.pem")))
        }
        let task = Task {
            try await listener.run { connection in
                var echoed = 0
                for try await (content, _) in connection.messages {
                    try await connection.send(content)
                    echoed += 1
                    if echoed == limit { return connection.cancel() }
                }
            }
        }
        try await listener.waitUntilReady()
        return (listener, task)
    }

    @Test func braidClientTalksToABraidListener() async throws {
        let (listener, task) = try await startEchoListener()
        defer { task.cancel() }
        let connection = NetworkConnection(to: .hostPort(host: "127.0.0.1", port: listener.port!)) {
            DTLS { UDP() }.alpn(["echo"]).serverName("localhost").trust(.certificateAuthorities(file: Fixtures.caFile))
        }
        defer { connection.cancel() }
        for index in 0..<5 {
            let message = Data("message \(index)".utf8)
            try await connection.send(message)
            #expect(try await connection.receive().content == message)
        }
    }

    /// Either end of a DTLS session may end it with close_notify. The listener's connection
    /// cancels after echoing one message: the client reads that message, then its next receive
    /// fails with `peerClosed` instead of waiting for a peer that is gone.
    @Test func theClientLearnsThatTheListenerEndedTheSession() async throws {
        let (listener, task) = try await startEchoListener(cancellingAfter: 1)
        defer { task.cancel() }
        let connection = NetworkConnection(to: .hostPort(host: "127.0.0.1", port: listener.port!)) {
            DTLS { UDP() }.alpn(["echo"]).serverName("localhost").trust(.certificateAuthorities(file: Fixtures.caFile))
        }
        defer { connection.cancel() }
        try await connection.send(Data("only".utf8))
        #expect(try await connection.receive().content == Data("only".utf8))
        let ended = TestSignal<String>()
        let receiving = Task {
            do {
                _ = try await connection.receive()
                ended.fulfill("a message")
            } catch {
                ended.fulfill("\(error)")
            }
        }
        defer { receiving.cancel() }
        let outcome = await ended.wait()
        #expect(outcome?.contains("close_notify") == true, "the receive after the server's close_notify ended with: \(outcome ?? "nothing within the deadline")")
    }

    /// The listener's connection ends when its client sends close_notify: its handler's receive
    /// fails with `peerClosed`, so its place is free before any idle timeout.
    @Test func theListenerLearnsThatTheClientEndedTheSession() async throws {
        let ended = TestSignal<String>()
        let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any)) {
            DTLS { UDP() }.alpn(["echo"]).peerAuthentication(.none).identity(
                certificateChainFile: Fixtures.path("server.pem"), privateKeyFile: Fixtures.path("server-key.pem"))
        }
        let task = Task {
            try await listener.run { connection in
                do {
                    for try await (content, _) in connection.messages { try await connection.send(content) }
                    ended.fulfill("the end of the messages")
                } catch {
                    ended.fulfill("\(error)")
                }
            }
        }
        defer { task.cancel() }
        try await listener.waitUntilReady()
        let connection = NetworkConnection(to: .hostPort(host: "127.0.0.1", port: listener.port!)) {
            DTLS { UDP() }.alpn(["echo"]).serverName("localhost").trust(.certificateAuthorities(file: Fixtures.caFile))
        }
        try await connection.send(Data("hello".utf8))
        #expect(try await connection.receive().content == Data("hello".utf8))
        connection.cancel()
        let outcome = await ended.wait()
        #expect(outcome?.contains("close_notify") == true, "the server's receive after the client's close_notify ended with: \(outcome ?? "nothing within the deadline")")
    }

    @Test func gnutlsClientTalksToABraidListener() async throws {
        let (listener, task) = try await startEchoListener()
        defer { task.cancel() }
        let input = try InputPipe()
        let client = try ChildProcess(
            try TLSPeerTools.find("gnutls-cli", package: "gnutls-bin"),
            ["--udp", "-p", "\(listener.port!.rawValue)", "--x509cafile", Fixtures.caFile, "--alpn=echo", "localhost"],
            standardInput: input.readEnd)
        // Sent again every 2 s until echoed: a datagram lost on a busy loopback is not resent.
        input.feed(Array("hello over dtls\n".utf8), repeatingEvery: 2)
        defer { input.close() }
        let deadline = Date().addingTimeInterval(90)
        while !client.output.contains("hello over dtls") && client.isRunning && Date() < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(client.output.contains("Handshake was completed"), "\(client.output)\n\(client.errors)")
        #expect(client.output.contains("hello over dtls"), "\(client.output)\n\(client.errors)")
        await client.stop()
    }

    /// As Apple's, a DTLS listener asks for client certificates unless told otherwise, and
    /// then needs the authorities that sign them.
    @Test func listenerRequiresClientCertificatesByDefault() async throws {
        let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any)) {
            DTLS { UDP() }.identity(certificateChainFile: Fixtures.path("server.pem"), privateKeyFile: Fixtures.path("server-key.pem"))
        }
        await #expect(throws: NetworkError.self) { try await listener.run { _ in } }
    }

    /// A ClientHello without a cookie gets a HelloVerifyRequest and no connection: a spoofed
    /// source costs the listener nothing.
    @Test func helloWithoutACookieGetsNoConnection() async throws {
        let accepted = ManagedCounter()
        let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any)) {
            DTLS { UDP() }.peerAuthentication(.none).identity(
                certificateChainFile: Fixtures.path("server.pem"), privateKeyFile: Fixtures.path("server-key.pem"))
        }
        let task = Task { try await listener.run { _ in accepted.increment() } }
        defer { task.cancel() }
        try await listener.waitUntilReady()
        // A raw ClientHello from a plain UDP connection: the engine's first flight.
        let engine = try DTLSConnection.client(context: DTLSClientContext(configuration: TLSClientConfiguration()), serverName: "localhost")
        _ = try engine.process { _ in }
        let hello = try #require(engine.popDatagram())
        let raw = NetworkConnection(to: .hostPort(host: "127.0.0.1", port: listener.port!)) { UDP() }
        defer { raw.cancel() }
        for _ in 0..<20 { try await raw.send(Data(hello)) }
        let (reply, _) = try await raw.receive()
        #expect(reply.first == 22 && reply.count < hello.count, "a HelloVerifyRequest, smaller than the hello")
        #expect(accepted.value == 0)
    }
}

/// A count handlers bump from any task.
final class ManagedCounter: Sendable {
    private let storage = Mutex(0)
    func increment() { storage.withLock { $0 += 1 } }
    var value: Int { storage.withLock { $0 } }
}
