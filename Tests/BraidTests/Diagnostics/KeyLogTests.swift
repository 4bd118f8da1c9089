import BraidPerf
import Foundation
import Testing

/// `SSLKEYLOGFILE`: a process started with it writes its TLS and QUIC secrets there in the NSS
/// key log format (GnuTLS does it for every session, QUIC's included), so Wireshark can decrypt
/// a capture. Without it nothing is written. A process reads the variable once, so the clients
/// here are `braid` processes.
@Suite struct KeyLogTests {
    @Test func aQUICClientStartedWithSSLKEYLOGFILEWritesItsSecrets() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("braid-keylog-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let keyLog = directory.appendingPathComponent("keys.txt").path

        let server = try PeerProcess.braid(
            ["serve", "--host", "127.0.0.1", "--port", "0", "--cert", Fixtures.path("server.pem"), "--key", Fixtures.path("server-key.pem")])
        let port = try await server.listeningPort()
        func download(environment: [String]) async throws -> ChildProcess.Exit {
            let client = try ChildProcess("/usr/bin/env", environment + [
                try PeerProcess.braidTool, "client", "--host", "127.0.0.1", "--port", String(port), "--ca", Fixtures.caFile,
                "--sni", "localhost", "--alpn", "perf", "--download", "1000",
            ])
            return try await client.finish(within: 60)
        }
        let logged = try await download(environment: ["SSLKEYLOGFILE=\(keyLog)"])
        let unlogged = try await download(environment: ["-u", "SSLKEYLOGFILE"])
        await server.stop()
        #expect(logged.status == 0)
        #expect(unlogged.status == 0)

        // One line per secret of the one connection: label, the ClientHello's random, the secret.
        let lines = try String(contentsOfFile: keyLog, encoding: .utf8).split(separator: "\n").map { $0.split(separator: " ") }
        let labels = Set(lines.compactMap { $0.first.map(String.init) })
        #expect(labels.isSuperset(of: ["CLIENT_HANDSHAKE_TRAFFIC_SECRET", "SERVER_HANDSHAKE_TRAFFIC_SECRET",
                                       "CLIENT_TRAFFIC_SECRET_0", "SERVER_TRAFFIC_SECRET_0"]))
        let hex = CharacterSet(charactersIn: "0123456789abcdef")
        for line in lines {
            #expect(line.count == 3)
            #expect(line.count == 3 && line[1].count == 64 && line[1].unicodeScalars.allSatisfy(hex.contains))
            #expect(line.count == 3 && line[2].count >= 64 && line[2].unicodeScalars.allSatisfy(hex.contains))
        }
        #expect(Set(lines.map { $0.count > 1 ? $0[1] : "" }).count == 1, "the secrets of one connection share its client random")
    }
}
