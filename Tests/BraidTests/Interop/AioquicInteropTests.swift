import BraidPerf
import Foundation
import Testing

/// Which implementation is the client and which the server.
enum InteropDirection: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case aioquicClientToBraidServer = "aioquic client -> braid server"
    case braidClientToAioquicServer = "braid client -> aioquic server"

    var testDescription: String { rawValue }

    /// Starts the server side on a system-chosen loopback port.
    func startServer(_ extra: [String] = []) async throws -> (server: ChildProcess, port: UInt16) {
        let common = ["server", "--host", "127.0.0.1", "--port", "0", "--cert", Fixtures.path("server.pem"), "--key", Fixtures.path("server-key.pem")]
        let server: ChildProcess
        switch self {
        case .aioquicClientToBraidServer: server = try PeerProcess.braid(["serve"] + common.dropFirst() + ["--json"] + extra)
        case .braidClientToAioquicServer: server = try PeerProcess.aioquic(common + ["--log-key-updates"] + extra)
        }
        return (server, try await server.listeningPort())
    }

    /// Starts the client side against `port`; the flags are common to both tools.
    func startClient(port: UInt16, _ arguments: [String]) throws -> ChildProcess {
        let common = ["--host", "127.0.0.1", "--port", String(port), "--ca", Fixtures.caFile, "--sni", "localhost", "--timeout", "60"]
        switch self {
        case .aioquicClientToBraidServer: return try PeerProcess.aioquic(["client"] + common + arguments)
        case .braidClientToAioquicServer: return try PeerProcess.braid(["client"] + common + ["--json"] + arguments)
        }
    }
}

/// Braid against aioquic (PyPI), an independent QUIC implementation, in both directions, with
/// the `braid` tool on one side and `Tests/Interop/peers/aioquic_peer.py` on the other.
@Suite(.serialized) struct AioquicInteropTests {
    private func run(
        _ direction: InteropDirection, server serverFlags: [String] = [], client clientFlags: [String]
    ) async throws -> (report: [String: Any], server: ChildProcess) {
        let (server, port) = try await direction.startServer(serverFlags)
        let client = try direction.startClient(port: port, clientFlags)
        let report = try await runClient(client)
        return (report, server)
    }

    @Test(arguments: InteropDirection.allCases)
    func handshake(_ direction: InteropDirection) async throws {
        let (report, server) = try await run(direction, client: ["--alpn", "echo", "--streams", "0"])
        await server.stop()
        #expect(report["ok"] as? Bool == true)
        #expect((report["handshake_ms"] as? Double ?? 0) > 0)
    }

    @Test(arguments: InteropDirection.allCases)
    func echoOnFiftyStreams(_ direction: InteropDirection) async throws {
        let (report, server) = try await run(direction, client: ["--alpn", "echo", "--streams", "50", "--bytes", "10000"])
        await server.stop()
        #expect(report["streams_ok"] as? Int == 50)
        #expect(report["bytes_received"] as? Int == 500_000)
    }

    @Test(arguments: InteropDirection.allCases)
    func tenMegabyteDownload(_ direction: InteropDirection) async throws {
        let (report, server) = try await run(direction, client: ["--alpn", "perf", "--download", "10000000"])
        await server.stop()
        #expect(report["ok"] as? Bool == true)
        #expect(report["bytes_received"] as? Int == 10_000_000)
    }

    @Test(arguments: InteropDirection.allCases)
    func tenMegabyteUpload(_ direction: InteropDirection) async throws {
        let (report, server) = try await run(direction, client: ["--alpn", "perf", "--download", "0", "--upload", "10000000"])
        let line = try await server.jsonLine { $0["event"] as? String == "closed" }
        await server.stop()
        #expect(report["bytes_sent"] as? Int == 10_000_000)
        #expect(line["upload_intact"] as? Bool == true)
    }

    @Test(arguments: InteropDirection.allCases)
    func twoHundredDatagramsEchoed(_ direction: InteropDirection) async throws {
        let (report, server) = try await run(
            direction, client: ["--alpn", "echo", "--streams", "0", "--datagrams", "200", "--datagram-size", "1000"])
        await server.stop()
        #expect(report["datagrams_sent"] as? Int == 200)
        #expect(report["datagrams_received"] as? Int == 200)
    }

    /// A second connection with the first one's ticket sends its request in 0-RTT, and both
    /// ends say the early data was accepted.
    @Test(arguments: InteropDirection.allCases)
    func resumptionWithZeroRTTAccepted(_ direction: InteropDirection) async throws {
        let sessionFile = FileManager.default.temporaryDirectory.appendingPathComponent("braid-session-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: sessionFile) }
        let (server, port) = try await direction.startServer()
        let flags = ["--alpn", "perf", "--download", "100000", "--session-file", sessionFile]
        let first = try await runClient(try direction.startClient(port: port, flags))
        let second = try await runClient(try direction.startClient(port: port, flags))
        _ = try await server.jsonLine { $0["early_data"] as? Bool == true }
        await server.stop()
        #expect(first["early_data"] as? Bool == false)
        #expect(second["early_data"] as? Bool == true)
        #expect(second["bytes_received"] as? Int == 100_000)
    }

    /// The client updates its keys halfway through a 10 MB download; the transfer completes
    /// and the server saw the new key phase.
    @Test(arguments: InteropDirection.allCases)
    func keyUpdateDuringTransfer(_ direction: InteropDirection) async throws {
        let (report, server) = try await run(direction, client: ["--alpn", "perf", "--download", "10000000", "--key-update"])
        #expect(report["key_update"] as? Bool == true)
        #expect(report["bytes_received"] as? Int == 10_000_000)
        if direction == .braidClientToAioquicServer {
            let line = try await server.jsonLine { $0["event"] as? String == "closed" }
            #expect((line["key_updates_remote"] as? Int ?? 0) >= 1)
        }
        await server.stop()
    }

    @Test(arguments: InteropDirection.allCases)
    func retry(_ direction: InteropDirection) async throws {
        let (report, server) = try await run(direction, server: ["--retry"], client: ["--alpn", "echo", "--streams", "4", "--bytes", "10000"])
        await server.stop()
        #expect(report["streams_ok"] as? Int == 4)
        if direction == .aioquicClientToBraidServer { #expect(report["retry"] as? Bool == true) }
    }

    @Test(arguments: InteropDirection.allCases)
    func closeWithApplicationErrorIsSeenByTheServer(_ direction: InteropDirection) async throws {
        let (report, server) = try await run(
            direction, client: ["--alpn", "echo", "--streams", "1", "--bytes", "100", "--close-code", "42", "--close-reason", "bye"])
        let line = try await server.jsonLine { $0["event"] as? String == "closed" }
        await server.stop()
        #expect(report["ok"] as? Bool == true)
        #expect(line["error_code"] as? Int == 42)
        #expect(line["reason"] as? String == "bye")
    }
}

/// The interop-runner style cases through `tools/netem/braid_netem.py` (a UDP relay with a
/// fixed seed) between the two implementations.
@Suite(.serialized) struct EmulatedNetworkInteropTests {
    private func run(
        _ direction: InteropDirection, emulator emulatorFlags: [String], client clientFlags: [String]
    ) async throws -> [String: Any] {
        let (server, port) = try await direction.startServer()
        let emulator = try PeerProcess.emulator(
            ["--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:\(port)", "--seed", "7"] + emulatorFlags)
        let relayPort = try await emulator.listeningPort()
        let client = try direction.startClient(port: relayPort, clientFlags)
        let report = try await runClient(client, within: 120)
        await emulator.stop()
        await server.stop()
        return report
    }

    @Test(arguments: InteropDirection.allCases)
    func transferUnderTwoPercentLoss(_ direction: InteropDirection) async throws {
        let report = try await run(direction, emulator: ["--loss", "0.02"], client: ["--alpn", "perf", "--download", "5000000"])
        #expect(report["bytes_received"] as? Int == 5_000_000)
        #expect(report["ok"] as? Bool == true)
    }

    @Test(arguments: InteropDirection.allCases)
    func handshakeUnderThirtyPercentBurstyLoss(_ direction: InteropDirection) async throws {
        let report = try await run(
            direction, emulator: ["--burst-loss", "0.3", "--burst-length", "3"],
            client: ["--alpn", "echo", "--streams", "1", "--bytes", "1000", "--handshake-timeout", "50"].filter {
                direction == .braidClientToAioquicServer || !["--handshake-timeout", "50"].contains($0)
            })
        #expect(report["ok"] as? Bool == true)
        #expect(report["streams_ok"] as? Int == 1)
    }

    @Test(arguments: InteropDirection.allCases)
    func transferWithCorruption(_ direction: InteropDirection) async throws {
        let report = try await run(direction, emulator: ["--corrupt", "0.01"], client: ["--alpn", "perf", "--download", "5000000"])
        #expect(report["bytes_received"] as? Int == 5_000_000)
        #expect(report["ok"] as? Bool == true)
    }

    /// Nothing gets through for 2 s shortly after the transfer starts; it resumes and completes.
    @Test(arguments: InteropDirection.allCases)
    func twoSecondBlackholeMidTransfer(_ direction: InteropDirection) async throws {
        let report = try await run(
            direction, emulator: ["--blackhole", "0.3:2", "--rate-mbit", "40"], client: ["--alpn", "perf", "--download", "5000000"])
        #expect(report["bytes_received"] as? Int == 5_000_000)
        #expect(report["ok"] as? Bool == true)
        // The blackhole fell inside the transfer: it could not have finished sooner.
        #expect((report["seconds"] as? Double ?? 0) > 2)
    }
}

/// The `braid` tool against itself, and its handling of bad input.
@Suite struct BraidToolTests {
    /// Upload and download on four streams, with a key update and a migration halfway.
    @Test func perfBothWaysWithKeyUpdateAndMigration() async throws {
        let server = try PeerProcess.braid(
            ["serve", "--host", "127.0.0.1", "--port", "0", "--cert", Fixtures.path("server.pem"), "--key", Fixtures.path("server-key.pem"), "--json"])
        let port = try await server.listeningPort()
        let client = try PeerProcess.braid([
            "client", "--host", "127.0.0.1", "--port", String(port), "--ca", Fixtures.caFile, "--sni", "localhost", "--json",
            "--alpn", "perf", "--streams", "4", "--download", "2000000", "--upload", "500000", "--key-update", "--migrate",
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
