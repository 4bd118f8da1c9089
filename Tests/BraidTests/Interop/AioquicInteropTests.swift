import BraidPerf
import Foundation
import Testing

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

    /// The perf draft does not define the response bytes; other perf servers send zeros. By
    /// default `braid client` counts and times them; `--verify-pattern` asks for Braid's pattern.
    @Test func aPerfServerThatSendsZerosIsMeasuredUnlessThePatternIsRequired() async throws {
        let direction = InteropDirection.braidClientToAioquicServer
        let (server, port) = try await direction.startServer(["--zeros"])
        let common = ["client", "--host", "127.0.0.1", "--port", String(port), "--ca", Fixtures.caFile, "--sni", "localhost", "--json",
                      "--alpn", "perf", "--download", "1000000"]
        let counted = try await runClient(try PeerProcess.braid(common))
        #expect(counted["ok"] as? Bool == true)
        #expect(counted["bytes_received"] as? Int == 1_000_000)
        let verifying = try PeerProcess.braid(common + ["--verify-pattern"])
        let exit = try await verifying.finish(within: 60)
        await server.stop()
        #expect(exit.status == 2)
        let report = try #require(verifying.jsonLines.last)
        #expect(report["ok"] as? Bool == false)
        #expect("\(report["failures"] ?? "")".contains("differs from the pattern"), "\(report)")
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
