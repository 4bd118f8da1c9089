import BraidPerf
import Testing

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
