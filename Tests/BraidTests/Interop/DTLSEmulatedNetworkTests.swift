import Braid
import BraidCore
import BraidPerf
import Foundation
import Testing

/// DTLS through `tools/netem/braid_netem.py` (a UDP relay with a fixed seed) between Braid's
/// client and listener: lost and reordered handshake flights are retransmitted until the
/// handshake completes; after it, a lost message is lost (DTLS, like UDP, does not resend),
/// reordered ones arrive in their new order, nothing arrives altered, and the connection
/// keeps working. The same against GnuTLS's server, whose retransmissions Braid's must meet.
@Suite(.serialized, .timeLimit(.minutes(3))) struct DTLSEmulatedNetworkTests {
    @Test(arguments: [
        ["--loss", "0.25"],
        ["--reorder", "0.3", "--reorder-ms", "40", "--loss", "0.1"],
        ["--burst-loss", "0.3", "--burst-length", "3"],
    ])
    func handshakeAndMessagesThroughALossyPath(_ emulatorFlags: [String]) async throws {
        let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any)) {
            DTLS { UDP() }.alpn(["echo"]).peerAuthentication(.none).identity(
                certificateChainFile: Fixtures.path("server.pem"), privateKeyFile: Fixtures.path("server-key.pem"))
        }
        let task = Task {
            try await listener.run { connection in
                for try await (content, _) in connection.messages { try await connection.send(content) }
            }
        }
        defer { task.cancel() }
        try await listener.waitUntilReady()
        let statsFile = FileManager.default.temporaryDirectory.appendingPathComponent("braid-dtls-netem-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: statsFile) }
        let emulator = try PeerProcess.emulator(
            ["--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:\(listener.port!.rawValue)", "--seed", "7", "--stats", statsFile.path]
                + emulatorFlags)
        let relayPort = try await emulator.listeningPort()
        let connection = NetworkConnection(to: .hostPort(host: "127.0.0.1", port: NWEndpoint.Port(rawValue: relayPort)!)) {
            DTLS { UDP() }.alpn(["echo"]).serverName("localhost").trust(.certificateAuthorities(file: Fixtures.caFile))
        }
        defer { connection.cancel() }
        do {
            let received = Locked<[Data]>([])
            let reader = Task {
                for try await (content, _) in connection.messages { received.withLock { $0.append(content) } }
            }
            defer { reader.cancel() }
            // The first send waits for the handshake, which completes through the losses.
            let messages = (0..<100).map { Data("message \($0) ".utf8) + Data(repeating: UInt8($0), count: 200) }
            for message in messages { try await connection.send(message) }
            // Echoes keep coming back until one of a probe's copies makes it both ways.
            let probe = Data("probe".utf8)
            let deadline = ContinuousClock.now + .seconds(60)
            while !received.withLock({ $0.contains(probe) }) && ContinuousClock.now < deadline {
                try await connection.send(probe)
                try await Task.sleep(for: .milliseconds(50))
            }
            let echoes = received.withLock { $0 }
            #expect(echoes.contains(probe), "the connection stopped carrying messages")
            let sent = Set(messages + [probe])
            #expect(echoes.allSatisfy(sent.contains), "a message arrived altered")
            #expect(echoes.contains(where: messages.contains), "no message survived the path")
        } catch {
            Issue.record("\(error)\nnetem: \(emulator.errors)")
        }
        await emulator.stop()
        // The path did what it was asked: datagrams were dropped or held back.
        let stats = try JSONSerialization.jsonObject(with: Data(contentsOf: statsFile)) as? [String: Any]
        let impaired = ["to-server", "to-client"].reduce(0) { total, direction in
            let counters = stats?[direction] as? [String: Int] ?? [:]
            return total + ["dropped_random", "dropped_burst", "reordered"].reduce(0) { $0 + (counters[$1] ?? 0) }
        }
        #expect(impaired > 0, "\(String(describing: stats))")
    }

    /// Braid's client and `gnutls-serv --udp --echo` complete the handshake through a path that
    /// drops a quarter of the datagrams each way, and echoed lines come back intact.
    @Test func handshakeWithGnuTLSThroughALossyPath() async throws {
        let (server, port) = try await DTLSInteropTests.startGnuTLSServer(certificate: "server")
        let emulator = try PeerProcess.emulator(
            ["--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:\(port)", "--seed", "11", "--loss", "0.25"])
        let relayPort = try await emulator.listeningPort()
        let connection = NetworkConnection(to: .hostPort(host: "127.0.0.1", port: NWEndpoint.Port(rawValue: relayPort)!)) {
            DTLS { UDP() }.alpn(["echo"]).serverName("localhost").trust(.certificateAuthorities(file: Fixtures.caFile))
        }
        do {
            let received = Locked<[Data]>([])
            let reader = Task {
                for try await (content, _) in connection.messages { received.withLock { $0.append(content) } }
            }
            defer { reader.cancel() }
            let probe = Data("probe through the loss\n".utf8)
            let deadline = ContinuousClock.now + .seconds(60)
            while !received.withLock({ $0.contains(probe) }) && ContinuousClock.now < deadline {
                try await connection.send(probe)
                try await Task.sleep(for: .milliseconds(50))
            }
            let echoes = received.withLock { $0 }
            #expect(echoes.contains(probe), "no echo came back")
            #expect(echoes.allSatisfy { $0 == probe }, "a message arrived altered")
        } catch {
            Issue.record("\(error)\ngnutls-serv: \(server.output)\n\(server.errors)\nnetem: \(emulator.errors)")
        }
        connection.cancel()
        await emulator.stop()
        await server.stop()
    }
}
