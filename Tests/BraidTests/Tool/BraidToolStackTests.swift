import Braid
import BraidPerf
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `braid serve --stack` against `braid client --stack` for every stack: the echo application
/// (streams where the stack has them, datagrams or messages where it has those) and the perf
/// application both ways, every byte checked by the client (echoes always, perf downloads with
/// --verify-pattern) and every upload by the server; each server then shut down with SIGTERM.
@Suite struct BraidToolStackTests {
    /// Seconds a server may take to print `listening`: generous, as a loaded machine starts a
    /// debug build slowly.
    static let startDeadline = 120.0

    static let serverIdentity = ["--cert", Fixtures.path("server.pem"), "--key", Fixtures.path("server-key.pem")]

    static func server(_ stack: ApplicationStack, _ arguments: [String]) throws -> ChildProcess {
        try PeerProcess.braid(
            ["serve", "--stack", stack.rawValue, "--host", "127.0.0.1", "--port", "0", "--json"] + (stack.isSecure ? serverIdentity : []) + arguments)
    }

    static func client(_ stack: ApplicationStack, port: UInt16, _ arguments: [String]) throws -> ChildProcess {
        try PeerProcess.braid(
            ["client", "--stack", stack.rawValue, "--host", "127.0.0.1", "--port", String(port), "--ca", Fixtures.caFile, "--sni", "localhost", "--json"]
                + arguments)
    }

    /// Stops the server with SIGTERM, which must end it gracefully (status 0); returns its lines.
    static func stopGracefully(_ server: ChildProcess) async throws -> [[String: Any]] {
        let exit = try await server.stop(within: 30)
        #expect(exit.status == 0, "stderr: \(server.errors)")
        #expect(server.errors.contains("braid: SIGTERM: closing every connection"), "stderr: \(server.errors)")
        return server.jsonLines.filter { $0["event"] as? String == "closed" }
    }

    @Test(arguments: ApplicationStack.allCases)
    func echoComesBackIntact(_ stack: ApplicationStack) async throws {
        let server = try Self.server(stack, stack.negotiatesApplication ? [] : ["--alpn", "echo"])
        let port = try await server.listeningPort(within: Self.startDeadline)
        let streams = stack.carriesByteStreams ? 2 : 0, bytes = 150_000
        let datagrams = stack.carriesMessages ? 300 : 0, datagramSize = 900
        var arguments = ["--alpn", "echo", "--streams", String(streams), "--bytes", String(bytes)]
        if datagrams > 0 { arguments += ["--datagrams", String(datagrams), "--datagram-size", String(datagramSize)] }
        let report = try await runClient(try Self.client(stack, port: port, arguments))
        let lines = try await Self.stopGracefully(server)
        let expected = streams * bytes + datagrams * datagramSize
        #expect(report["stack"] as? String == stack.rawValue)
        #expect(report["ok"] as? Bool == true, "failures: \(report["failures"] ?? "")")
        #expect(report["bytes_sent"] as? Int == expected)
        #expect(report["bytes_received"] as? Int == expected)
        #expect(report["streams_ok"] as? Int == streams)
        #expect(report["datagrams_received"] as? Int == datagrams)
        if stack != .quic {
            // What the server echoed, as its lines report it: bytes on TLS and TCP, messages
            // (pieces of a stream, its empty end, and datagrams) on the others.
            #expect(lines.allSatisfy { $0["stack"] as? String == stack.rawValue && $0["error"] == nil }, "\(lines)")
            if stack.carriesMessages {
                let echoed = lines.reduce(0) { $0 + ($1["messages_echoed"] as? Int ?? 0) }
                #expect(echoed >= datagrams + 2 * streams, "\(lines)")
            } else {
                #expect(lines.reduce(0) { $0 + ($1["bytes_echoed"] as? Int ?? 0) } == streams * bytes, "\(lines)")
            }
        }
    }

    @Test(arguments: ApplicationStack.allCases.filter(\.carriesByteStreams))
    func perfDownloadsAndUploadsEveryByte(_ stack: ApplicationStack) async throws {
        let server = try Self.server(stack, stack.negotiatesApplication ? [] : ["--alpn", "perf"])
        let port = try await server.listeningPort(within: Self.startDeadline)
        let report = try await runClient(
            try Self.client(stack, port: port, ["--alpn", "perf", "--streams", "2", "--download", "400000", "--upload", "120000", "--verify-pattern"]))
        let lines = try await Self.stopGracefully(server)
        #expect(report["ok"] as? Bool == true, "failures: \(report["failures"] ?? "")")
        #expect(report["alpn"] as? String == "perf")
        #expect(report["bytes_received"] as? Int == 800_000)
        #expect(report["bytes_sent"] as? Int == 240_000)
        #expect(report["streams_ok"] as? Int == 2)
        #expect(lines.reduce(0) { $0 + ($1["bytes_uploaded"] as? Int ?? 0) } == 240_000, "\(lines)")
        #expect(lines.allSatisfy { $0["upload_intact"] as? Bool == true }, "\(lines)")
    }

    /// SIGTERM with a connection open ends the connection within a minute (the client reads
    /// the end of its stream, or the connection's failure, instead of waiting forever) and
    /// exits 0.
    @Test(.timeLimit(.minutes(3)), arguments: [ApplicationStack.tcp, .tls, .ws])
    func signalEndsOpenConnectionsAndExitsZero(_ stack: ApplicationStack) async throws {
        let server = try Self.server(stack, stack.negotiatesApplication ? [] : ["--alpn", "echo"])
        let port = NWEndpoint.Port(integerLiteral: try await server.listeningPort(within: Self.startDeadline))
        let endpoint = NWEndpoint.hostPort(host: "127.0.0.1", port: port)
        let ended: Bool
        switch stack {
        case .tls:
            let connection = NetworkConnection(to: endpoint) {
                TLS().alpn(["echo"]).serverName("localhost").trust(.certificateAuthorities(file: Fixtures.caFile))
            }
            defer { connection.cancel() }
            try await connection.send(Data("ping".utf8))
            #expect(try await connection.receive(exactly: 4).content == Data("ping".utf8))
            kill(server.pid, SIGTERM)
            ended = await Self.streamEnds { try await connection.receive(atLeast: 1, atMost: 100).metadata.isEndOfStream }
        case .ws:
            let connection = NetworkConnection(to: endpoint) { WebSocket { TCP() }.subprotocols(["echo"]) }
            defer { connection.cancel() }
            try await connection.send(Data("ping".utf8))
            #expect(try await connection.receive().content == Data("ping".utf8))
            kill(server.pid, SIGTERM)
            ended = await Self.streamEnds { try await connection.receive().metadata.opcode == .close }
        default:
            let connection = NetworkConnection(to: endpoint) { TCP() }
            defer { connection.cancel() }
            try await connection.send(Data("ping".utf8))
            #expect(try await connection.receive(exactly: 4).content == Data("ping".utf8))
            kill(server.pid, SIGTERM)
            ended = await Self.streamEnds { try await connection.receive(atLeast: 1, atMost: 100).metadata.isEndOfStream }
        }
        #expect(ended)
        let exit = try await server.finish(within: 30)
        #expect(exit.status == 0, "stderr: \(server.errors)")
        #expect(server.errors.contains("braid: SIGTERM: closing every connection"), "stderr: \(server.errors)")
    }

    /// Receives until `receive` reports the end (true) or throws (the connection ended): true
    /// if that happens within 60 seconds.
    static func streamEnds(_ receive: @escaping @Sendable () async throws -> Bool) async -> Bool {
        await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                do {
                    while try await !receive() {}
                } catch {}
                return true
            }
            group.addTask {
                try? await Task.sleep(for: .seconds(60))
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
    }

    /// Over UDP and DTLS only datagrams travel: perf and byte echo are refused with the reason,
    /// and a server that would serve perf there is refused too; a stack without certificates
    /// refuses --cert.
    @Test func whatAStackCannotCarryIsRefusedWithTheReason() async throws {
        for stack in [ApplicationStack.udp, .dtls] {
            let perf = try Self.client(stack, port: 9, ["--alpn", "perf", "--download", "10"])
            #expect(try await perf.finish().status == 64)
            #expect(perf.errors.contains("--stack \(stack) carries datagrams only"), "stderr: \(perf.errors)")
            let server = try Self.server(stack, ["--alpn", "perf"])
            #expect(try await server.finish().status == 64)
            #expect(server.errors.contains("it serves echo (perf needs a byte stream)"), "stderr: \(server.errors)")
        }
        let datagramsOverTCP = try Self.client(.tcp, port: 9, ["--alpn", "echo", "--datagrams", "10"])
        #expect(try await datagramsOverTCP.finish().status == 64)
        #expect(datagramsOverTCP.errors.contains("--stack tcp carries no datagrams"), "stderr: \(datagramsOverTCP.errors)")
        let certificateOverTCP = try Self.server(.tcp, Self.serverIdentity)
        #expect(try await certificateOverTCP.finish().status == 64)
        #expect(certificateOverTCP.errors.contains("--stack tcp has no certificates"), "stderr: \(certificateOverTCP.errors)")
        let twoApplicationsOverWebSocket = try Self.server(.ws, ["--alpn", "perf,echo"])
        #expect(try await twoApplicationsOverWebSocket.finish().status == 64)
        #expect(twoApplicationsOverWebSocket.errors.contains("--stack ws serves one application"), "stderr: \(twoApplicationsOverWebSocket.errors)")
    }
}
