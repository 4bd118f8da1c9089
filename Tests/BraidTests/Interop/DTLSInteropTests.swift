@testable import Braid
import BraidPerf
import BraidTLS
import Dispatch
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

    /// The classic API: `NWParameters(dtls:)` with the same `sec_protocol_options_*` calls as
    /// TLS, on an `NWConnection`, one message per send and per receive.
    @Test func classicDTLSConnectionExchangesMessagesWithGnuTLS() async throws {
        let (server, port) = try await startGnuTLSServer(certificate: "server")
        let tls = NWProtocolTLS.Options()
        sec_protocol_options_add_tls_application_protocol(tls.securityProtocolOptions, "echo")
        sec_protocol_options_set_tls_server_name(tls.securityProtocolOptions, "localhost")
        tls.securityProtocolOptions.update { $0.trustRoots = .certificateAuthorities(file: Fixtures.caFile) }
        let connection = NWConnection(host: "127.0.0.1", port: NWEndpoint.Port(rawValue: port)!, using: NWParameters(dtls: tls))
        let states = StateRecorder(connection)
        connection.start(queue: DispatchQueue(label: "dtls client"))
        try await states.wait(for: "ready") { $0 == .ready }
        for index in 0..<3 {
            let message = Data("classic \(index)\n".utf8)
            #expect(await connection.sendAsync(message) == nil)
            let echoed = await connection.receiveMessageAsync()
            #expect(echoed.content == message && echoed.isComplete && echoed.error == nil)
        }
        connection.cancel()
        await server.stop()
    }

    @Test func classicDTLSRefusesWhatItCannotHonour() async throws {
        let tls = NWProtocolTLS.Options()
        sec_protocol_options_set_min_tls_protocol_version(tls.securityProtocolOptions, .TLSv13)
        let connection = NWConnection(host: "127.0.0.1", port: 9, using: NWParameters(dtls: tls))
        let states = StateRecorder(connection)
        connection.start(queue: DispatchQueue(label: "dtls client"))
        try await states.wait(for: "failed") { if case .failed = $0 { true } else { false } }
        connection.cancel()
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
        // It says so on stderr (unbuffered) once its sockets are bound.
        while !server.errors.contains("listening on IPv4") {
            guard server.isRunning, Date() < deadline else {
                throw InteropFailure("gnutls-serv did not start\nstdout: \(server.output)\nstderr: \(server.errors)")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        return (server, port)
    }
}
