import Braid
import BraidPerf
import BraidTLS
import Foundation
import Testing

/// Braid's DTLS client (`NetworkConnection { DTLS { UDP() } }`) against GnuTLS's DTLS echo
/// server (`gnutls-serv --udp --echo`), which runs its own cookie exchange: messages each way,
/// ALPN, and a certificate Braid must refuse.
@Suite(.serialized, .timeLimit(.minutes(2))) struct DTLSInteropTests {
    @Test func braidClientExchangesMessagesWithGnuTLS() async throws {
        let (server, port) = try await startGnuTLSServer(certificate: "server")
        let connection = NetworkConnection(to: .hostPort(host: "127.0.0.1", port: NWEndpoint.Port(rawValue: port)!)) {
            DTLS { UDP() }.alpn(["echo"]).serverName("localhost").trust(.certificateAuthorities(file: Fixtures.caFile))
        }
        do {
            for index in 0..<5 {
                let message = Data("message \(index) from braid\n".utf8)
                try await connection.send(message)
                let (echoed, _) = try await connection.receive()
                #expect(echoed == message)
            }
            // More than one datagram carries is refused, and the connection goes on.
            do {
                try await connection.send(Data(count: 5000))
                Issue.record("a 5,000-byte DTLS message was accepted")
            } catch NetworkError.datagramTooLarge(let size, let maximum) {
                #expect(size == 5000)
                #expect(maximum > 1000 && maximum < 1200)
            }
            try await connection.send(Data("still there\n".utf8))
            #expect(try await connection.receive().content == Data("still there\n".utf8))
        } catch {
            Issue.record("\(error)\ngnutls-serv: \(server.output)\n\(server.errors)")
        }
        connection.cancel()
        await server.stop()
    }

    @Test func braidClientRefusesAnUntrustedGnuTLSServer() async throws {
        let (server, port) = try await startGnuTLSServer(certificate: "untrusted")
        let connection = NetworkConnection(to: .hostPort(host: "127.0.0.1", port: NWEndpoint.Port(rawValue: port)!)) {
            DTLS { UDP() }.serverName("localhost").trust(.certificateAuthorities(file: Fixtures.caFile))
        }
        await #expect(throws: NetworkError.certificateRejected(.untrusted)) {
            try await connection.send(Data("never sent\n".utf8))
            _ = try await connection.receive()
        }
        connection.cancel()
        await server.stop()
    }

    /// Whether an IPv4 UDP socket is bound to `port` (/proc/net/udp).
    private static func udpPortIsBound(_ port: UInt16) -> Bool {
        guard let table = try? String(contentsOfFile: "/proc/net/udp", encoding: .utf8) else { return false }
        let suffix = ":" + String(format: "%04X", port)
        return table.split(separator: "\n").dropFirst().contains { line in
            line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first?.hasSuffix(suffix) == true
        }
    }

    /// gnutls-serv on a UDP port that was free a moment ago, once it says it listens.
    private func startGnuTLSServer(certificate: String) async throws -> (ChildProcess, UInt16) {
        let tool = try TLSPeerTools.find("gnutls-serv", package: "gnutls-bin")
        let port = try freeUDPPort()
        let server = try ChildProcess(tool, [
            "--udp", "--echo", "-p", "\(port)", "--alpn=echo",
            "--x509certfile", Fixtures.path("\(certificate).pem"), "--x509keyfile", Fixtures.path("\(certificate)-key.pem"),
        ])
        let deadline = Date().addingTimeInterval(30)
        // Its stdout goes to a file, buffered: the socket table says when it listens.
        while !Self.udpPortIsBound(port) {
            guard server.isRunning, Date() < deadline else {
                throw InteropFailure("gnutls-serv did not start\nstdout: \(server.output)\nstderr: \(server.errors)")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        return (server, port)
    }
}
