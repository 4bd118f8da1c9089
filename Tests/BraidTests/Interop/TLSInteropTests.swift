import Braid
import BraidCore
import BraidPerf
import BraidTLS
import Foundation
import Synchronization
import Testing

/// Braid's TLS over TCP (`import Braid` only: `NetworkConnection` and `NetworkListener` with
/// `TLS()`) against independent TLS stacks, in both directions: GnuTLS (gnutls-serv,
/// gnutls-cli), OpenSSL (s_server, s_client) and Python's `ssl` (`tls_peer.py`). Each case
/// checks Braid's side and, where the peer prints it, the peer's: the agreed ALPN, 10 MB each
/// way byte for byte, session resumption, and client certificates (accepted, and refused
/// with the right errors when missing).
@Suite(.serialized, .timeLimit(.minutes(10))) struct TLSInteropTests {
    static let tenMegabytes = 10_000_000

    // MARK: ALPN

    /// The peer server prefers "other" but also speaks "echo", which is all Braid offers.
    @Test(arguments: TLSPeer.allCases)
    func braidClientAgreesOnALPN(_ peer: TLSPeer) async throws {
        let server = try await PeerServer.start(peer, alpn: ["other", "echo"])
        defer { server.stop() }
        let connection = NetworkConnection(to: server.endpoint) { braidClient(alpn: ["echo"]) }
        defer { connection.cancel() }
        let line = Array("hello from braid\n".utf8)
        try await server.diagnosed {
            try await connection.send(line)
            if peer == .gnutls {
                // gnutls-serv echoes.
                #expect(Array(try await connection.receive(exactly: line.count).content) == line)
            }
        }
        #expect(connection.negotiatedALPN == "echo")
        await connection.close()
        let view = try await server.finish()
        switch peer {
        case .gnutls: #expect(view.output.contains("- Application protocol: echo"), "\(view.output)")
        case .openssl:
            #expect(view.output.contains("ALPN protocols selected: echo"), "\(view.output)")
            #expect(view.output.contains("hello from braid"), "\(view.output)")
        case .python: #expect(view.connections.first?["alpn"] as? String == "echo", "\(view.output)")
        }
    }

    /// A server without X25519 (Braid's client sends a key share for X25519 alone) asks for
    /// P-256 with a HelloRetryRequest, and the handshake completes on P-256. Not Python's
    /// `ssl`: it cannot restrict a TLS 1.3 server's groups.
    @Test(arguments: [TLSPeer.gnutls, .openssl])
    func braidClientRetriesForAServerWithoutX25519(_ peer: TLSPeer) async throws {
        let server = try await PeerServer.start(peer, onlyP256: true)
        defer { server.stop() }
        let connection = NetworkConnection(to: server.endpoint) { braidClient() }
        defer { connection.cancel() }
        try await server.diagnosed { try await exchangeSmall(peer, on: connection, refused: false) }
        await connection.close()
        let view = try await server.finish()
        switch peer {
        case .gnutls: #expect(view.output.contains("(ECDHE-SECP256R1)"), "\(view.output)")
        case .openssl: #expect(view.output.contains("hello from braid"), "\(view.output)")
        case .python: Issue.record("not a peer of this test")
        }
    }

    /// The peer client offers "other" first, then "echo"; the Braid listener speaks only "echo".
    @Test(arguments: TLSPeer.allCases)
    func peerClientAgreesOnALPN(_ peer: TLSPeer) async throws {
        let inbound = InboundLog()
        let server = try await RunningStreamListener.start(braidServer(), handler: { connection in
            try await inbound.exchange(connection, send: Array(PerfPatternBytes.make(1000)), endOfStream: peer == .python, expect: 1000)
        })
        defer { server.task.cancel() }
        let client = try await PeerClient.run(peer, port: server.port.rawValue, alpn: ["other", "echo"], send: 1000)
        let braidSide = try await inbound.first()
        #expect(braidSide.alpn == "echo")
        #expect(braidSide.received == 1000 && braidSide.intact, "\(braidSide)")
        switch peer {
        case .gnutls: #expect(client.log.contains("- Application protocol: echo"), "\(client.log)")
        case .openssl: #expect(client.log.contains("ALPN protocol: echo"), "\(client.log)")
        case .python: #expect(client.connections.first?["alpn"] as? String == "echo", "\(client.log)")
        }
        #expect(client.status == 0, "\(client.log)")
    }

    // MARK: 10 MB each way

    @Test(arguments: TLSPeer.allCases)
    func braidClientMovesTenMegabytesEachWay(_ peer: TLSPeer) async throws {
        let count = Self.tenMegabytes
        // gnutls-serv echoes text only; the others get the binary pattern.
        let upload = peer == .gnutls ? textPattern(count: count) : Array(PerfPatternBytes.make(count))
        let server = try await PeerServer.start(peer, quiet: true, send: peer == .gnutls ? nil : count, input: peer == .openssl ? upload.count : 0)
        defer { server.stop() }
        let connection = NetworkConnection(to: server.endpoint) { braidClient() }
        defer { connection.cancel() }
        // Python ends its side with close_notify after its bytes, and expects Braid's; gnutls-serv
        // echoes until Braid closes; s_server sends its input and prints what it receives.
        async let sent: Void = send(upload, on: connection, endOfStream: peer == .python)
        let received = try await receive(exactly: count, from: connection)
        try await sent
        #expect(received.count == count)
        #expect(peer == .gnutls ? received == upload : PerfPattern.matches(received, at: 0), "the \(count) bytes from \(peer) differ")
        await connection.close()
        let view = try await server.finish()
        switch peer {
        case .gnutls: break  // the echo already proved the upload arrived intact
        case .openssl:
            let printed = view.bytes  // -quiet: only what Braid sent
            #expect(printed.count == count && printed == upload, "s_server printed \(printed.count) bytes")
        case .python:
            let line = try #require(view.connections.first)
            #expect(line["bytes_received"] as? Int == count)
            #expect(line["intact"] as? Bool == true)
            #expect(line["ok"] as? Bool == true, "\(line)")
        }
    }

    @Test(arguments: TLSPeer.allCases)
    func peerClientMovesTenMegabytesEachWay(_ peer: TLSPeer) async throws {
        let count = Self.tenMegabytes
        let inbound = InboundLog()
        let pattern = Array(PerfPatternBytes.make(count))
        let server = try await RunningStreamListener.start(braidServer(), handler: { connection in
            // Python half-closes after its bytes; the command-line tools never end their input,
            // so the listener stops after `count` bytes and closes.
            try await inbound.exchange(connection, send: pattern, endOfStream: peer == .python, expect: count)
        })
        defer { server.task.cancel() }
        let client = try await PeerClient.run(peer, port: server.port.rawValue, quiet: true, send: count)
        let braidSide = try await inbound.first()
        #expect(braidSide.error == nil, "\(String(describing: braidSide.error))")
        #expect(braidSide.received == count)
        #expect(braidSide.intact)
        #expect(client.status == 0, "\(client.log)")
        switch peer {
        case .gnutls, .openssl:
            let printed = client.outputBytes
            #expect(printed.count == count && PerfPattern.matches(printed, at: 0), "\(peer) printed \(printed.count) bytes")
        case .python:
            let line = try #require(client.connections.first)
            #expect(line["bytes_received"] as? Int == count)
            #expect(line["intact"] as? Bool == true)
        }
    }

    // MARK: Resumption

    /// A second connection with the first one's ticket resumes: Braid says so, and so does the
    /// peer server where it prints it.
    @Test(arguments: TLSPeer.allCases)
    func braidClientResumesWithASessionCache(_ peer: TLSPeer) async throws {
        let server = try await PeerServer.start(peer, send: peer == .python ? 1000 : nil, connections: 2)
        defer { server.stop() }
        let cache = TLS.SessionCache()
        var resumed: [Bool] = []
        for _ in 0..<2 {
            let connection = NetworkConnection(to: server.endpoint) { braidClient().sessionCache(cache) }
            defer { connection.cancel() }
            switch peer {
            case .gnutls:
                let line = Array("resume me\n".utf8)
                try await connection.send(line)
                #expect(Array(try await connection.receive(exactly: line.count).content) == line)
            case .openssl:
                try await connection.send(Array("resume me\n".utf8))
            case .python:
                try await connection.send(Data(), endOfStream: true)
                let received = try await receive(exactly: 1000, from: connection)
                #expect(PerfPattern.matches(received, at: 0))
            }
            // The ticket follows the server's Finished; it is read with whatever comes next.
            let deadline = ContinuousClock.now + .seconds(30)
            while cache.count == 0 && ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(cache.count == 1, "no ticket from \(peer)")
            resumed.append(connection.isResumed)
            await connection.close()
        }
        #expect(resumed == [false, true])
        let view = try await server.finish()
        switch peer {
        // Once each: the second connection.
        case .gnutls: #expect(view.output.components(separatedBy: "*** This is a resumed session").count == 2, "\(view.output)")
        case .openssl: #expect(view.output.components(separatedBy: "Reused session-id").count == 2, "\(view.output)")
        case .python: #expect(view.connections.map { $0["resumed"] as? Bool } == [false, true], "\(view.output)")
        }
    }

    /// The peer client connects twice, offering the first session on the second connection;
    /// the peer says it resumed, and so does Braid's listener.
    @Test(arguments: TLSPeer.allCases)
    func peerClientResumesAgainstABraidListener(_ peer: TLSPeer) async throws {
        let inbound = InboundLog()
        let server = try await RunningStreamListener.start(braidServer(), handler: { connection in
            try await inbound.exchange(connection, send: Array(PerfPatternBytes.make(1000)), endOfStream: peer == .python, expect: 1000)
        })
        defer { server.task.cancel() }
        let client = try await PeerClient.run(peer, port: server.port.rawValue, send: 1000, resume: true)
        #expect(client.status == 0, "\(client.log)")
        switch peer {
        case .gnutls: #expect(client.log.contains("*** This is a resumed session"), "\(client.log)")
        case .openssl:
            #expect(client.firstLog.contains("New, TLSv1.3"), "\(client.firstLog)")
            #expect(client.log.contains("Reused, TLSv1.3"), "\(client.log)")
        case .python: #expect(client.connections.map { $0["resumed"] as? Bool } == [false, true], "\(client.log)")
        }
        let connections = try await inbound.all(count: 2)
        #expect(connections.map(\.resumed) == [false, true])
    }

    // MARK: Client certificates

    /// The peer server requires a client certificate signed by the test CA: Braid's
    /// `.identity(...)` is accepted (the peer names its subject), and without one the
    /// connection fails with the server's certificate_required alert.
    @Test(arguments: TLSPeer.allCases)
    func braidClientPresentsItsCertificate(_ peer: TLSPeer) async throws {
        let server = try await PeerServer.start(peer, send: peer == .python ? 1000 : nil, connections: 2, requireClientCertificate: true)
        defer { server.stop() }
        let client = Fixtures.path("client.pem")
        let clientKey = Fixtures.path("client-key.pem")
        let withIdentity = NetworkConnection(to: server.endpoint) {
            braidClient().identity(certificateChainFile: client, privateKeyFile: clientKey)
        }
        defer { withIdentity.cancel() }
        try await exchangeSmall(peer, on: withIdentity, refused: false)
        #expect(withIdentity.state == .ready)
        await withIdentity.close()

        let without = NetworkConnection(to: server.endpoint) { braidClient() }
        defer { without.cancel() }
        await #expect(throws: NetworkError.handshakeRejectedByPeer(alert: 116)) {
            try await exchangeSmall(peer, on: without, refused: true)
        }
        let view = try await server.finish()
        switch peer {
        case .gnutls: #expect(view.output.contains("CN=Braid Test Client"), "\(view.output)")
        case .openssl: #expect(view.output.contains("subject=CN = Braid Test Client"), "\(view.output)")
        case .python:
            #expect(view.connections.first?["client_certificate"] as? String == "Braid Test Client", "\(view.output)")
            #expect(view.connections.dropFirst().first?["ok"] as? Bool == false, "\(view.output)")
        }
    }

    /// A Braid listener that requires client certificates from the test CA: a peer client with
    /// one gets through; one without is refused, with certificate_required on the peer's side
    /// and `certificateRejected(.missing)` on Braid's.
    @Test(arguments: TLSPeer.allCases)
    func peerClientsWithAndWithoutACertificate(_ peer: TLSPeer) async throws {
        let inbound = InboundLog()
        let stack = braidServer().peerAuthentication(.required).trust(.certificateAuthorities(file: Fixtures.caFile))
        let server = try await RunningStreamListener.start(stack, handler: { connection in
            try await inbound.exchange(connection, send: Array(PerfPatternBytes.make(1000)), endOfStream: peer == .python, expect: 1000)
        })
        defer { server.task.cancel() }

        let accepted = try await PeerClient.run(peer, port: server.port.rawValue, send: 1000, clientCertificate: true)
        #expect(accepted.status == 0, "\(accepted.log)")
        let braidAccepted = try await inbound.first()
        #expect(braidAccepted.error == nil, "\(String(describing: braidAccepted.error))")
        #expect(braidAccepted.received == 1000 && braidAccepted.intact, "\(braidAccepted)")

        let refused = try await PeerClient.run(peer, port: server.port.rawValue, send: 1000)
        #expect(refused.status != 0, "\(refused.log)")
        switch peer {
        case .gnutls: #expect(refused.log.contains("Certificate is required"), "\(refused.log)")
        case .openssl: #expect(refused.log.contains("alert certificate required"), "\(refused.log)")
        case .python: #expect(refused.log.contains("TLSV13_ALERT_CERTIFICATE_REQUIRED"), "\(refused.log)")
        }
        let braidRefused = try await inbound.all(count: 2)[1]
        #expect(braidRefused.error == .certificateRejected(.missing), "\(String(describing: braidRefused.error))")
    }

    // MARK: Helpers

    /// The small exchange each peer server does: gnutls-serv echoes a line, s_server prints
    /// one (and sends nothing: only a refusal's alert comes back, so only then is there
    /// something to receive), tls_peer.py sends 1,000 pattern bytes and close_notify.
    private func exchangeSmall(_ peer: TLSPeer, on connection: NetworkConnection<TLS>, refused: Bool) async throws {
        let line = Array("hello from braid\n".utf8)
        switch peer {
        case .gnutls:
            try await connection.send(line)
            #expect(Array(try await connection.receive(exactly: line.count).content) == line)
        case .openssl:
            try await connection.send(line)
            if refused { _ = try await connection.receive(atLeast: 1, atMost: 1) }
        case .python:
            try await connection.send(Data(), endOfStream: true)
            #expect(PerfPattern.matches(try await receive(exactly: 1000, from: connection), at: 0))
        }
    }
}

/// Braid's client stack for these tests: TLS trusting the test CA, "echo" offered.
private func braidClient(alpn: [String] = ["echo"]) -> TLS {
    TLS().alpn(alpn).trust(.certificateAuthorities(file: Fixtures.caFile)).serverName("localhost")
}

/// Braid's listener stack: the "localhost" certificate, "echo" accepted.
private func braidServer() -> TLS {
    TLS().alpn(["echo"]).identity(certificateChainFile: Fixtures.path("server.pem"), privateKeyFile: Fixtures.path("server-key.pem"))
}

enum PerfPatternBytes {
    /// `count` pattern bytes from offset 0.
    static func make(_ count: Int) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(count)
        while out.count < count { out += PerfPattern.slice(at: out.count, count: min(PerfPattern.maxSlice, count - out.count)) }
        return out
    }
}

/// Sends `bytes` in 256 KiB pieces, then the end of stream if asked.
private func send(_ bytes: [UInt8], on connection: NetworkConnection<TLS>, endOfStream: Bool) async throws {
    var offset = 0
    while offset < bytes.count {
        let end = min(offset + 256 * 1024, bytes.count)
        try await connection.send(bytes[offset..<end])
        offset = end
    }
    if endOfStream { try await connection.send(Data(), endOfStream: true) }
}

/// Receives exactly `count` bytes (fewer if the peer ends first).
private func receive(exactly count: Int, from connection: NetworkConnection<TLS>) async throws -> [UInt8] {
    var received: [UInt8] = []
    received.reserveCapacity(count)
    while received.count < count {
        let (content, metadata) = try await connection.receive(atLeast: 1, atMost: min(1 << 20, count - received.count))
        received += content
        if metadata.isEndOfStream { break }
    }
    return received
}

/// Output that mixes text with received binary bytes, readable for `contains`: bytes that are
/// not ASCII become "?". (Not `String(decoding:as:)`, whose repairs throw internally, and
/// swift-testing captures a backtrace for every throw: seconds for 10 MB.)
func printable(_ bytes: [UInt8]) -> String {
    String(unsafeUninitializedCapacity: bytes.count) { buffer in
        for (index, byte) in bytes.enumerated() { buffer[index] = byte < 0x80 ? byte : UInt8(ascii: "?") }
        return bytes.count
    }
}

/// What the Braid listener saw of each inbound connection, in order of arrival.
final class InboundLog: Sendable {
    struct Entry: Sendable {
        var alpn: String?
        var resumed = false
        var received = 0
        var intact = true
        var error: NetworkError?
        var finished = false
    }

    private let entries = Locked<[Int: Entry]>([:])
    private let arrivals = Atomic(0)

    /// Sends `bytes` (then close_notify if `endOfStream`) while receiving pattern bytes until
    /// the peer ends or `expect` have come; records what happened. Rethrows nothing: a failure
    /// is the entry's `error`.
    func exchange(_ connection: NetworkConnection<TLS>, send bytes: [UInt8], endOfStream: Bool, expect: Int? = nil) async throws {
        let index = arrivals.add(1, ordering: .relaxed).oldValue
        entries.withLock { $0[index] = Entry() }
        @Sendable func update(_ change: (inout Entry) -> Void) { entries.withLock { change(&$0[index]!) } }
        do {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await send(bytes, on: connection, endOfStream: endOfStream) }
                group.addTask {
                    var received = 0
                    while expect.map({ received < $0 }) ?? true {
                        let (content, metadata) = try await connection.receive(
                            atLeast: 1, atMost: min(1 << 20, expect.map { $0 - received } ?? 1 << 20))
                        let intact = PerfPattern.matches(content, at: received)
                        received += content.count
                        update {
                            $0.alpn = connection.negotiatedALPN
                            $0.resumed = connection.isResumed
                            $0.received = received
                            $0.intact = $0.intact && intact
                        }
                        if metadata.isEndOfStream { break }
                    }
                }
                try await group.waitForAll()
            }
        } catch let error as NetworkError {
            update { $0.error = error }
        }
        update {
            $0.alpn = connection.negotiatedALPN
            $0.resumed = connection.isResumed
            $0.finished = true
        }
    }

    /// The first connection, once its exchange has ended.
    func first() async throws -> Entry { try await all(count: 1)[0] }

    /// The first `count` connections, once their exchanges have ended (waiting generously:
    /// the peer has finished, but the listener's tasks may still wait for a thread).
    func all(count: Int) async throws -> [Entry] {
        func done() -> Bool { entries.withLock { entries in (0..<count).allSatisfy { entries[$0]?.finished == true } } }
        let deadline = ContinuousClock.now + .seconds(60)
        while !done() && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        return try (0..<count).map { index in
            try #require(entries.withLock { $0[index] }.flatMap { $0.finished ? $0 : nil }, "connection \(index) did not arrive or end")
        }
    }
}

/// A peer server on a system-chosen loopback port.
struct PeerServer {
    let peer: TLSPeer
    let process: ChildProcess
    let input: InputPipe?
    let port: UInt16
    /// The connections the test makes to it.
    let connections: Int
    var endpoint: NWEndpoint { .hostPort(host: "127.0.0.1", port: NWEndpoint.Port(integerLiteral: port)) }

    /// Runs `body`; a failure comes back with the peer's state beside it (whether it still
    /// runs, what it printed), so a refused connection says whether the peer had gone.
    func diagnosed<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch {
            let sockets = (try? String(contentsOfFile: "/proc/net/tcp", encoding: .utf8))?
                .split(separator: "\n").filter { $0.contains(String(format: ":%04X ", port)) }.joined(separator: "\n") ?? ""
            throw InteropFailure(
                "\(error)\n\(process.commandLine) on port \(port): \(process.isRunning ? "running" : "exited")\n"
                    + "its descriptors: \(TLSPeerTools.describeDescriptors(of: process.pid))\n"
                    + "/proc/net/tcp lines for the port:\n\(sockets)\n"
                    + "stdout: \(process.output.suffix(2000))\nstderr: \(process.errors.suffix(2000))")
        }
    }

    /// `send`: bytes tls_peer.py sends each connection. `input`: pattern bytes s_server reads
    /// from its standard input and sends (its input stays open, or it would close the
    /// connection). `quiet`: s_server prints only what it receives.
    static func start(
        _ peer: TLSPeer, alpn: [String] = ["echo"], quiet: Bool = false, send: Int? = nil, input: Int = 0, connections: Int = 1,
        requireClientCertificate: Bool = false, onlyP256: Bool = false
    ) async throws -> PeerServer {
        let certificate = Fixtures.path("server.pem")
        let key = Fixtures.path("server-key.pem")
        let tool = try peer.serverTool
        // The tools are told their port (gnutls-serv does not say which one the system chose
        // for port 0, nor does a quiet s_server) and say whether they listen on it or found it
        // taken; tls_peer.py binds port 0 and prints the port it got.
        while true {
            let port = TLSPeerTools.candidatePort()
            var pipe: InputPipe?
            let process: ChildProcess
            let outcome: () -> TLSPeerTools.PortOutcome?
            switch peer {
            case .gnutls:
                var arguments = ["--echo", "--crlf", "-p", String(port), "--x509certfile", certificate, "--x509keyfile", key]
                arguments += alpn.flatMap { ["--alpn", $0] }
                if requireClientCertificate { arguments += ["--require-client-cert", "--verify-client-cert", "--x509cafile", Fixtures.caFile] }
                if onlyP256 { arguments += ["--priority", "NORMAL:-GROUP-ALL:+GROUP-SECP256R1"] }
                process = try ChildProcess(tool, arguments)
                outcome = { TLSPeerTools.gnutlsServerOutcome(process, port: port) }
            case .openssl:
                // A quiet s_server prints nothing until a client sends: its socket is looked
                // for instead, on a port nothing listened on before it started.
                if quiet && TLSPeerTools.isListening(tcpPort: port, anyAddress: true) { continue }
                var arguments = ["s_server", "-accept", "127.0.0.1:\(port)", "-cert", certificate, "-key", key, "-alpn", alpn.joined(separator: ","),
                                 "-naccept", String(connections)]
                if quiet { arguments.append("-quiet") }
                if requireClientCertificate { arguments += ["-Verify", "1", "-CAfile", Fixtures.caFile, "-verify_return_error"] }
                if onlyP256 { arguments += ["-groups", "P-256"] }
                let stdin = try InputPipe()
                pipe = stdin
                let child = try ChildProcess(tool, arguments, standardInput: stdin.readEnd)
                process = child
                stdin.feed(PerfPatternBytes.make(input))
                outcome = {
                    // s_server exits (status 0) when its bind fails.
                    if child.errors.contains("Address already in use") { return .taken }
                    let listening = quiet
                        ? child.hasExecuted && TLSPeerTools.isListening(tcpPort: port, anyAddress: false)
                        : child.output.split(separator: "\n").contains { $0 == "ACCEPT" || $0.hasPrefix("ACCEPT ") }
                    return listening ? .listening : nil
                }
            case .python:
                precondition(!onlyP256, "Python's ssl module cannot restrict a TLS 1.3 server's key exchange groups")
                var arguments = [TLSPeerTools.tlsPeerScript, "server", "--host", "127.0.0.1", "--port", "0", "--cert", certificate, "--key", key,
                                 "--alpn", alpn.joined(separator: ","), "--send", String(send ?? 0)]
                if requireClientCertificate { arguments += ["--ca", Fixtures.caFile, "--require-client-cert"] }
                let child = try ChildProcess(tool, arguments)
                process = child
                outcome = { pythonServerPort(child) != nil ? .listening : nil }
            }
            switch try await TLSPeerTools.portOutcome(of: process, outcome) {
            case .listening:
                let actual = peer == .python ? pythonServerPort(process)! : port
                return PeerServer(peer: peer, process: process, input: pipe, port: actual, connections: connections)
            case .taken:
                pipe?.close()
                await process.stop()
            }
        }
    }

    /// The port in tls_peer.py's first line, `listening <port>`, once printed.
    static func pythonServerPort(_ process: ChildProcess) -> UInt16? {
        guard let line = process.output.split(separator: "\n").first(where: { $0.hasPrefix("listening ") }) else { return nil }
        return UInt16(line.dropFirst("listening ".count))
    }

    /// What the server printed, once its connections have ended (s_server exits after
    /// `connections`; tls_peer.py prints a line as each ends; gnutls-serv, stopped, prints
    /// what it buffered as it exits).
    func finish() async throws -> (output: String, bytes: [UInt8], connections: [[String: Any]]) {
        switch peer {
        case .openssl: _ = try? await process.finish(within: 60)
        case .python:
            let deadline = ContinuousClock.now + .seconds(60)
            while closedLines().count < connections && process.isRunning && ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
        case .gnutls: break
        }
        stop()
        _ = try? await process.finish(within: 30)
        let bytes = process.outputBytes
        // Only tls_peer.py prints JSON (parsing s_server's 10 MB line by line, each failing,
        // would cost seconds: swift-testing captures a backtrace for every thrown error).
        let lines = peer == .python ? closedLines() : []
        return (printable(bytes), bytes, lines)
    }

    /// tls_peer.py's lines for the connections that have ended.
    private func closedLines() -> [[String: Any]] { process.jsonLines.filter { $0["event"] as? String == "closed" } }

    func stop() {
        if process.isRunning { kill(process.pid, SIGTERM) }
        input?.close()
    }
}

/// A peer client run to completion against a Braid listener.
struct PeerClient {
    let status: Int32
    /// Standard output: received data for gnutls-cli and s_client, JSON lines for tls_peer.py.
    let outputBytes: [UInt8]
    /// Everything the client said about the connection(s) (stdout, stderr, gnutls-cli's log).
    let log: String
    /// s_client with `resume`: the first connection's log.
    let firstLog: String
    let connections: [[String: Any]]

    /// `send`: pattern bytes the client sends (from its standard input for the tools).
    /// `quiet`: the tools print only what they receive. `resume`: two connections, the second
    /// offering the first one's session.
    static func run(
        _ peer: TLSPeer, port: UInt16, alpn: [String] = ["echo"], quiet: Bool = false, send: Int = 0, resume: Bool = false,
        clientCertificate: Bool = false
    ) async throws -> PeerClient {
        let tool = try peer.clientTool
        let certificate = clientCertificate ? (Fixtures.path("client.pem"), Fixtures.path("client-key.pem")) : nil
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("braid-tls-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        switch peer {
        case .gnutls:
            let logFile = scratch.appendingPathComponent("log").path
            var arguments = ["--port", String(port), "--x509cafile", Fixtures.caFile, "--sni-hostname", "localhost",
                             "--verify-hostname", "localhost", "--logfile", logFile]
            arguments += alpn.flatMap { ["--alpn", $0] }
            if let (certificate, key) = certificate { arguments += ["--x509certfile", certificate, "--x509keyfile", key] }
            if resume { arguments.append("--resume") }
            arguments.append("127.0.0.1")
            let (status, output, errors) = try await runWithInput(tool, arguments, input: send)
            let log = ((try? String(contentsOfFile: logFile, encoding: .utf8)) ?? "") + errors
            return PeerClient(status: status, outputBytes: output, log: log, firstLog: log, connections: [])
        case .openssl:
            let session = scratch.appendingPathComponent("session.pem").path
            var common = ["s_client", "-connect", "127.0.0.1:\(port)", "-servername", "localhost", "-CAfile", Fixtures.caFile,
                          "-verify_return_error", "-alpn", alpn.joined(separator: ",")]
            if quiet { common.append("-quiet") }
            if let (certificate, key) = certificate { common += ["-cert", certificate, "-key", key] }
            if resume {
                let first = try await runWithInput(tool, common + ["-sess_out", session], input: send)
                let second = try await runWithInput(tool, common + ["-sess_in", session], input: send)
                return PeerClient(
                    status: first.status == 0 ? second.status : first.status, outputBytes: second.output,
                    log: text(second.output) + second.errors, firstLog: text(first.output) + first.errors, connections: [])
            }
            let (status, output, errors) = try await runWithInput(tool, common, input: send)
            return PeerClient(status: status, outputBytes: output, log: text(output) + errors, firstLog: text(output) + errors, connections: [])
        case .python:
            var arguments = [TLSPeerTools.tlsPeerScript, "client", "--host", "127.0.0.1", "--port", String(port), "--ca", Fixtures.caFile,
                             "--sni", "localhost", "--alpn", alpn.joined(separator: ","), "--send", String(send),
                             "--connections", resume ? "2" : "1", "--timeout", "120"]
            if let (certificate, key) = certificate { arguments += ["--cert", certificate, "--key", key] }
            let child = try ChildProcess(tool, arguments)
            let exit = try await child.finish(within: 180)
            return PeerClient(
                status: exit.status, outputBytes: child.outputBytes, log: child.output + child.errors, firstLog: child.output,
                connections: child.jsonLines)
        }
    }

    /// Runs a command-line client whose standard input is `input` pattern bytes and then stays
    /// open until it exits (at its end of input, gnutls-cli and s_client would end the
    /// connection before the listener's bytes have all come).
    private static func runWithInput(_ tool: String, _ arguments: [String], input: Int) async throws -> (status: Int32, output: [UInt8], errors: String) {
        let stdin = try InputPipe()
        let child = try ChildProcess(tool, arguments, standardInput: stdin.readEnd)
        stdin.feed(PerfPatternBytes.make(input))
        defer { stdin.close() }
        let exit = try await child.finish(within: 180)
        return (exit.status, child.outputBytes, child.errors)
    }

    private static func text(_ bytes: [UInt8]) -> String { printable(bytes) }
}
