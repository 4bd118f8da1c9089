import BraidPerf
import Testing

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
