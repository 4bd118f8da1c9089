import Braid
import BraidPerf
import Foundation
import HTTPTypes
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The `braid` tool against itself, and its handling of bad input.
@Suite struct BraidToolTests {
    /// Upload and download on four streams, with a key update and a migration halfway.
    @Test func perfBothWaysWithKeyUpdateAndMigration() async throws {
        let server = try PeerProcess.braid(
            ["serve", "--host", "127.0.0.1", "--port", "0", "--cert", Fixtures.path("server.pem"), "--key", Fixtures.path("server-key.pem"), "--json"])
        let port = try await server.listeningPort()
        let client = try PeerProcess.braid([
            "client", "--host", "127.0.0.1", "--port", String(port), "--ca", Fixtures.caFile, "--sni", "localhost", "--json",
            "--alpn", "perf", "--streams", "4", "--download", "2000000", "--upload", "500000", "--key-update", "--migrate", "--verify-pattern",
        ])
        let report = try await runClient(client)
        let line = try await server.jsonLine { $0["event"] as? String == "closed" }
        await server.stop()
        #expect(report["bytes_received"] as? Int == 8_000_000)
        #expect(report["key_update"] as? Bool == true)
        #expect(report["migrated"] as? Bool == true)
        #expect(line["bytes_uploaded"] as? Int == 2_000_000)
        #expect(line["upload_intact"] as? Bool == true)
    }

    /// How `braid serve` is started and stopped: SIGTERM, or SIGINT with the server started
    /// the way a shell starts a background job (SIGINT ignored, which exec keeps).
    enum Shutdown: String, CaseIterable, Sendable {
        case sigterm = "SIGTERM"
        case sigintInBackgroundJob = "SIGINT in a background job"
    }

    /// A signal shuts the server down gracefully: the client sees the server's close with
    /// application code 0 (not its own idle timeout of two minutes), and the server exits 0.
    @Test(arguments: Shutdown.allCases)
    func signalClosesEveryConnectionWithCodeZeroAndExitsZero(_ shutdown: Shutdown) async throws {
        let arguments = [
            "serve", "--host", "127.0.0.1", "--port", "0", "--cert", Fixtures.path("server.pem"), "--key", Fixtures.path("server-key.pem"),
            "--alpn", "echo",
        ]
        let server: ChildProcess
        let signal: Int32
        switch shutdown {
        case .sigterm:
            server = try PeerProcess.braid(arguments)
            signal = SIGTERM
        case .sigintInBackgroundJob:
            server = try ChildProcess("/bin/sh", ["-c", "trap '' INT; exec \"$0\" \"$@\"", try PeerProcess.braidTool] + arguments)
            signal = SIGINT
        }
        let port = try await server.listeningPort()
        let connection = NetworkConnection(to: .hostPort(host: "127.0.0.1", port: NWEndpoint.Port(integerLiteral: port))) {
            testClient().idleTimeout(120_000)
        }
        defer { connection.cancel() }
        let stream = try await connection.openStream()
        try await stream.send(Data("ping".utf8), endOfStream: false)
        #expect(try await stream.receive(atLeast: 4, atMost: 4).content == Data("ping".utf8))

        kill(server.pid, signal)
        let deadline = ContinuousClock.now + .seconds(30)
        while !connection.state.isFinal && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        if case .failed(.peerClosed(code: 0, _)) = connection.state {} else {
            Issue.record("the client's connection is \(connection.state), not closed by the server with code 0")
        }
        let exit = try await server.finish(within: 30)
        #expect(exit.status == 0, "stderr: \(server.errors)")
        #expect(server.errors.contains("braid: \(signal == SIGTERM ? "SIGTERM" : "SIGINT"): closing every connection"), "stderr: \(server.errors)")
    }

    /// A second signal during the graceful shutdown exits at once. The shutdown is held open
    /// by an HTTP/3 request whose body the client does not read (a graceful HTTP/3 shutdown lets
    /// the requests taken finish, and this one cannot while flow control holds it), so the
    /// second signal is sent, after the first one's message, into a shutdown that is certainly
    /// still running.
    @Test func secondSignalExitsAtOnce() async throws {
        let server = try PeerProcess.braid([
            "serve", "--host", "127.0.0.1", "--port", "0", "--cert", Fixtures.path("server.pem"), "--key", Fixtures.path("server-key.pem"),
            "--alpn", "h3",
        ])
        let port = try await server.listeningPort()
        let client = HTTP3Client(quic: testClient(alpn: ["h3"]))
        defer { client.close() }
        let request = HTTPRequest(method: .get, scheme: "https", authority: "127.0.0.1:\(port)", path: "/100000000")
        let (body, response) = try await client.bytes(for: request)
        #expect(response.status == .ok)
        _ = body  // never read: the server cannot finish sending it
        kill(server.pid, SIGTERM)
        let deadline = ContinuousClock.now + .seconds(30)
        while !server.errors.contains("braid: SIGTERM: closing every connection") && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(server.isRunning, "the shutdown ended with a request unfinished; stderr: \(server.errors)")
        kill(server.pid, SIGINT)
        let exit = try await server.finish(within: 30)
        #expect(server.errors.contains("braid: SIGINT again: exiting at once"), "stderr: \(server.errors)")
        #expect(exit.status == 128 + SIGINT, "stderr: \(server.errors)")
    }

    @Test func badArgumentsAndUnreadableFilesExitWithUsageErrors() async throws {
        let badALPN = try PeerProcess.braid(["client", "--host", "127.0.0.1", "--port", "4433", "--alpn", "gopher"])
        #expect(try await badALPN.finish().status == 64)
        #expect(badALPN.errors.contains("--alpn must be perf or echo"))
        let missingCertificate = try PeerProcess.braid(["serve", "--cert", "/nonexistent.pem", "--key", "/nonexistent.pem"])
        #expect(try await missingCertificate.finish().status == 64)
        #expect(missingCertificate.errors.contains("--cert /nonexistent.pem: no such readable file"))
    }

    @Test func aPortWithNoServerFailsWithTheReason() async throws {
        let client = try PeerProcess.braid([
            "client", "--host", "127.0.0.1", "--port", "9", "--alpn", "echo", "--streams", "1", "--bytes", "10",
            "--ca", Fixtures.caFile, "--handshake-timeout", "1",
        ])
        #expect(try await client.finish().status == 1)
        #expect(client.errors.contains("No response from 127.0.0.1:9 within 1.0 seconds"))
    }
}
