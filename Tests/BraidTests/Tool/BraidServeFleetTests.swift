import BraidPerf
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `braid serve --cid-format` and `--fleet-keys`: the IDs a client is given carry the server
/// ID the flag names (decoded by `fleet_client.py`, written from the specification), and
/// SIGHUP reads the key file again, keeping the keys when the file does not parse.
@Suite(.timeLimit(.minutes(3))) struct BraidServeFleetTests {
    static let key = "00112233445566778899aabbccddeeff"

    static func secretLine() -> String {
        (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined() + "\n"
    }

    /// Waits (at most 30 s) until the server's standard error contains `text`.
    static func waitForError(_ server: ChildProcess, containing text: String) async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while !server.errors.contains(text) {
            guard ContinuousClock.now < deadline else { throw ApplicationFailure("no \"\(text)\" from braid serve: \(server.errors)") }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    @Test func serveIssuesIDsInTheFormatItIsGivenAndReloadsItsKeysOnSIGHUP() async throws {
        let keyFile = FileManager.default.temporaryDirectory.appendingPathComponent("braid-fleet-keys-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: keyFile) }
        try Self.secretLine().write(toFile: keyFile, atomically: true, encoding: .utf8)
        let server = try PeerProcess.braid([
            "serve", "--host", "127.0.0.1", "--port", "0", "--cert", Fixtures.path("server.pem"), "--key", Fixtures.path("server-key.pem"),
            "--cid-format", "quic-lb:2:c0ffee:5:\(Self.key)", "--fleet-keys", keyFile,
        ])
        let port = try await server.listeningPort()
        let script = PeerProcess.repository.appendingPathComponent("Tests/Interop/peers/fleet_client.py").path
        let client = try ChildProcess(
            try PeerProcess.aioquicPython,
            [
                script, "--host", "127.0.0.1", "--port", "\(port)", "--ca", Fixtures.caFile, "--sni", "localhost", "--format", "quic-lb",
                "--server-id-length", "3", "--nonce-length", "5", "--key", Self.key, "--migrations", "2",
            ])
        try await client.finish(within: 60)
        let report = try #require(
            try JSONSerialization.jsonObject(with: Data(client.output.utf8)) as? [String: Any], "\(client.output) \(client.errors)")
        #expect(report["error"] is NSNull, "\(report)")
        let serverIDs = try #require(report["server_ids"] as? [String])
        #expect(serverIDs.count >= 3 && serverIDs.allSatisfy { $0 == "c0ffee" }, "\(report)")

        try "not a secret\n".write(toFile: keyFile, atomically: true, encoding: .utf8)
        kill(server.pid, SIGHUP)
        try await Self.waitForError(server, containing: "fleet keys kept as they were")
        try Self.secretLine().write(toFile: keyFile, atomically: true, encoding: .utf8)
        kill(server.pid, SIGHUP)
        try await Self.waitForError(server, containing: "fleet keys read again")
        #expect(server.isRunning, "a SIGHUP reloads the keys; it does not end the server")
        let exit = try await server.stop(within: 20)
        #expect(exit.status == 0, "\(server.errors)")
    }

    @Test func fleetFlagsAreRefusedOnOtherStacksAndWhenMalformed() async throws {
        for arguments in [["--stack", "tcp", "--cid-format", "katran:v1:5"], ["--cid-format", "quic-lb:1:zz:4"], ["--cid-format", "katran:v4:1"]] {
            let server = try PeerProcess.braid(["serve", "--port", "0"] + arguments)
            let exit = try await server.finish(within: 30)
            #expect(exit.status != 0, "\(arguments)")
            #expect(server.errors.contains("--cid-format"), "\(arguments): \(server.errors)")
        }
    }
}
