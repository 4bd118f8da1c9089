@testable import Braid
import BraidPerf
import BraidTLS
import Dispatch
import Foundation
import Testing

/// Braid's DTLS client (`NetworkConnection { DTLS { UDP() } }`) against GnuTLS's DTLS echo
/// server (`gnutls-serv --udp --echo`), which runs its own cookie exchange, and OpenSSL's
/// (`openssl s_server -dtls1_2`): messages each way, ALPN, and a certificate Braid must refuse;
/// OpenSSL's DTLS client (`openssl s_client -dtls1_2`) against Braid's listener (GnuTLS's
/// client against it is in `DTLSListenerTests`). Every peer verifies the other's certificate
/// against the test CA.
@Suite(.serialized, .timeLimit(.minutes(2))) struct DTLSInteropTests {
    @Test func braidClientExchangesMessagesWithGnuTLS() async throws {
        let (server, port) = try await Self.startGnuTLSServer(certificate: "server")
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
        let (server, port) = try await Self.startGnuTLSServer(certificate: "untrusted")
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
        let (server, port) = try await Self.startGnuTLSServer(certificate: "server")
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

    /// OpenSSL's DTLS server prints what it receives and sends what it reads from its input:
    /// Braid's messages reach it whole, and its lines reach Braid.
    @Test func braidClientExchangesMessagesWithOpenSSL() async throws {
        let tool = try TLSPeerTools.find("openssl", package: "openssl")
        let port = try freePort(.udp)
        let input = try InputPipe()
        let server = try ChildProcess(tool, [
            "s_server", "-dtls1_2", "-accept", "127.0.0.1:\(port)", "-alpn", "echo", "-quiet", "-naccept", "1",
            "-cert", Fixtures.path("server.pem"), "-key", Fixtures.path("server-key.pem"),
        ], standardInput: input.readEnd)
        // s_server reads its input only once a client is connected, and sends each line it reads
        // as one record (one message here); again every 2 s, as a datagram lost on a busy
        // loopback is not resent (the first to arrive is the one checked).
        input.feed(Array("line from openssl\n".utf8), repeatingEvery: 2)
        defer { input.close() }
        // -quiet prints nothing but what it receives: wait until its socket is bound.
        try await waitForUDPPort(port, of: server)
        let connection = NetworkConnection(to: .hostPort(host: "127.0.0.1", port: NWEndpoint.Port(rawValue: port)!)) {
            DTLS { UDP() }.alpn(["echo"]).serverName("localhost").trust(.certificateAuthorities(file: Fixtures.caFile))
        }
        defer { connection.cancel() }
        do {
            var sent = ""
            for index in 0..<5 {
                let line = "message \(index) from braid\n"
                try await connection.send(Data(line.utf8))
                sent += line
            }
            let deadline = Date().addingTimeInterval(90)
            while server.output != sent && server.isRunning && Date() < deadline { try await Task.sleep(for: .milliseconds(20)) }
            #expect(server.output == sent, "s_server printed \(server.output)\nstderr: \(server.errors)")
            let (received, _) = try await connection.receive()
            #expect(received == Data("line from openssl\n".utf8))
        } catch {
            Issue.record("\(error)\ns_server: \(server.output)\n\(server.errors)")
        }
        await server.stop()
    }

    /// OpenSSL's DTLS client verifies Braid's listener (the test CA, the name, ALPN) and gets
    /// its lines echoed.
    @Test func openSSLClientTalksToABraidListener() async throws {
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
        let input = try InputPipe()
        let client = try ChildProcess(
            try TLSPeerTools.find("openssl", package: "openssl"), [
                "s_client", "-dtls1_2", "-connect", "127.0.0.1:\(listener.port!.rawValue)", "-servername", "localhost",
                "-verify_hostname", "localhost", "-CAfile", Fixtures.caFile, "-verify_return_error", "-alpn", "echo",
            ], standardInput: input.readEnd)
        // Sent again every 2 s until echoed: a datagram lost on a busy loopback is not resent.
        input.feed(Array("hello from openssl\n".utf8), repeatingEvery: 2)
        defer { input.close() }
        let deadline = Date().addingTimeInterval(90)
        // s_client prints the handshake's summary, then what the listener echoed.
        while !client.output.contains("hello from openssl") && client.isRunning && Date() < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(client.output.contains("Verify return code: 0 (ok)"), "\(client.output)\n\(client.errors)")
        #expect(client.output.contains("ALPN protocol: echo"), "\(client.output)\n\(client.errors)")
        #expect(client.output.contains("hello from openssl"), "\(client.output)\n\(client.errors)")
        await client.stop()
    }

    /// Waits until `child` has bound UDP `port` (read from /proc: -quiet servers print nothing).
    private func waitForUDPPort(_ port: UInt16, of child: ChildProcess) async throws {
        let deadline = Date().addingTimeInterval(90)
        let hex = String(format: ":%04X", port)
        while Date() < deadline {
            let table = (try? String(contentsOfFile: "/proc/net/udp", encoding: .utf8)) ?? ""
            // sl local_address rem_address ...: the local address's port, in hex.
            let bound = table.split(separator: "\n").dropFirst().contains { line in
                let fields = line.split(separator: " ", omittingEmptySubsequences: true)
                return fields.count > 1 && fields[1].hasSuffix(hex)
            }
            if child.hasExecuted && bound { return }
            guard child.isRunning else { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw InteropFailure("\(child.commandLine) did not bind UDP \(port)\nstdout: \(child.output)\nstderr: \(child.errors)")
    }

    /// gnutls-serv on a UDP port of 20000-32000, once it says it listens on it (another one if
    /// it finds the port taken).
    static func startGnuTLSServer(certificate: String) async throws -> (ChildProcess, UInt16) {
        let tool = try TLSPeerTools.find("gnutls-serv", package: "gnutls-bin")
        while true {
            let port = try freePort(.udp)
            let server = try ChildProcess(tool, [
                "--udp", "--echo", "-p", "\(port)", "--alpn=echo",
                "--x509certfile", Fixtures.path("\(certificate).pem"), "--x509keyfile", Fixtures.path("\(certificate)-key.pem"),
            ])
            switch try await TLSPeerTools.portOutcome(of: server, { TLSPeerTools.gnutlsServerOutcome(server, port: port) }) {
            case .listening: return (server, port)
            case .taken: await server.stop()
            }
        }
    }
}
