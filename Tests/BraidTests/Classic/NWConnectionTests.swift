import BraidIO
import BraidPerf
import BraidTLSIO
import Dispatch
import Foundation
import Glibc
import Synchronization
import Testing

@testable import Braid
import BraidCore

/// The classic API (`NWConnection`, `NWListener`, `NWParameters`) over real sockets, written
/// as Network.framework's examples write it.
@Suite(.timeLimit(.minutes(3))) struct NWConnectionTests {
    @Test func tcpEchoThroughNWListenerAndNWConnection() async throws {
        let server = try ClassicEchoServer(.tcp)
        let port = try await server.start()
        defer { server.listener.cancel() }
        let connection = NWConnection(host: "127.0.0.1", port: port, using: .tcp)
        let states = StateRecorder(connection)
        connection.start(queue: DispatchQueue(label: "client"))
        try await states.wait(for: "ready") { $0 == .ready }
        #expect(await connection.sendAsync(Data("hello, classic".utf8)) == nil)
        var echoed = Data()
        while echoed.count < 14 {
            let (content, _, error) = await connection.receiveAsync()
            #expect(error == nil)
            echoed.append(try #require(content))
        }
        #expect(echoed == Data("hello, classic".utf8))
        // The final message ends the stream; the server's echo ends it too.
        #expect(await connection.sendAsync(nil, context: .finalMessage) == nil)
        let end = await connection.receiveAsync()
        #expect(end.isComplete && end.error == nil)
        connection.cancel()
        try await states.wait(for: "cancelled") { $0 == .cancelled }
    }

    /// A ready classic connection has a path with both its endpoints without a path handler;
    /// a listener's connection has one too, naming the client.
    @Test(arguments: ["tcp", "udp"])
    func currentPathHasTheEndpointsOnceReady(_ stack: String) async throws {
        let parameters: NWParameters = stack == "tcp" ? .tcp : .udp
        let accepted = Mutex<NWConnection?>(nil)
        let server = try ClassicEchoServer(parameters) { connection in
            accepted.withLock { $0 = connection }
            ClassicEchoServer.echo(connection)
        }
        let port = try await server.start()
        defer { server.listener.cancel() }
        let connection = NWConnection(host: "127.0.0.1", port: port, using: parameters)
        defer { connection.cancel() }
        #expect(connection.currentPath == nil)
        let states = StateRecorder(connection)
        connection.start(queue: DispatchQueue(label: "client"))
        try await states.wait(for: "ready") { $0 == .ready }
        let path = try #require(connection.currentPath)
        #expect(path.status == .satisfied)
        #expect(path.remoteEndpoint == .hostPort(host: "127.0.0.1", port: port))
        guard case .hostPort(_, let localPort) = try #require(path.localEndpoint) else {
            Issue.record("local endpoint \(String(describing: path.localEndpoint)) is not an address")
            return
        }
        #expect(localPort.rawValue != 0)

        // The server's side, once the first bytes brought it a connection.
        let deadline = ContinuousClock.now + .seconds(60)
        var inbound: NWConnection?
        while inbound == nil && ContinuousClock.now < deadline {
            _ = await connection.sendAsync(Data("path".utf8))
            try await Task.sleep(for: .milliseconds(20))
            inbound = accepted.withLock { $0 }
        }
        let serverSide = try #require(inbound)
        let serverPath = try #require(await waitForPath(of: serverSide))
        #expect(serverPath.remoteEndpoint == .hostPort(host: "127.0.0.1", port: localPort))
    }

    private func waitForPath(of connection: NWConnection) async -> NWPath? {
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            if let path = connection.currentPath { return path }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return nil
    }

    @Test func aListenerServesOneHundredClients() async throws {
        let server = try ClassicEchoServer(.tcp)
        let port = try await server.start()
        defer { server.listener.cancel() }
        let echoed = try await withThrowingTaskGroup(of: Bool.self) { group in
            for index in 0..<100 {
                group.addTask {
                    let connection = NWConnection(host: "127.0.0.1", port: port, using: .tcp)
                    defer { connection.cancel() }
                    connection.start(queue: DispatchQueue(label: "client-\(index)"))
                    let message = Data("client \(index)".utf8)
                    guard await connection.sendAsync(message) == nil else { return false }
                    var received = Data()
                    while received.count < message.count {
                        let (content, _, error) = await connection.receiveAsync()
                        guard error == nil, let content else { return false }
                        received.append(content)
                    }
                    return received == message
                }
            }
            return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(echoed == 100)
    }

    @Test func udpEchoOverTheClassicAPI() async throws {
        let server = try ClassicEchoServer(.udp)
        let port = try await server.start()
        defer { server.listener.cancel() }
        let connection = NWConnection(host: "127.0.0.1", port: port, using: .udp)
        defer { connection.cancel() }
        connection.start(queue: DispatchQueue(label: "client"))
        let message = Data("player_position:100,50".utf8)
        // UDP may drop a datagram: send again until the echo comes, while one receive waits.
        let reply = Task { await connection.receiveMessageAsync() }
        let sender = Task {
            // Until the echo came (the reply cancels this), within a generous deadline.
            let deadline = ContinuousClock.now + .seconds(60)
            while !Task.isCancelled && ContinuousClock.now < deadline {
                _ = await connection.sendAsync(message)
                try? await Task.sleep(for: .milliseconds(200))
            }
        }
        let (content, isComplete, error) = await reply.value
        sender.cancel()
        #expect(error == nil)
        #expect(isComplete)
        #expect(content == message)
    }

    /// Network.framework's `batch`: 64 datagrams sent inside leave in at most two system calls.
    @Test func aBatchOf64DatagramsTakesAtMostTwoSystemCalls() async throws {
        let echo = try await RunningUDPEcho.start()
        defer { echo.task.cancel() }
        let connection = NWConnection(to: echo.endpoint, using: .udp)
        defer { connection.cancel() }
        let states = StateRecorder(connection)
        connection.start(queue: DispatchQueue(label: "client"))
        try await states.wait(for: "ready") { $0 == .ready }
        let transfer = try #require(connection.transfer as? DatagramClassicTransfer<UDP>)
        let before = try #require(await transfer.connection.socketStatistics)
        let completed = Atomic(0)
        connection.batch {
            for index in 0..<64 {
                connection.send(content: Data(repeating: UInt8(index), count: 1200), completion: .contentProcessed { error in
                    if error == nil { completed.add(1, ordering: .relaxed) }
                })
            }
        }
        let deadline = ContinuousClock.now + .seconds(60)
        var after = before
        while ContinuousClock.now < deadline {
            after = try #require(await transfer.connection.socketStatistics)
            if after.datagramsSent - before.datagramsSent >= 64 && completed.load(ordering: .relaxed) == 64 { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(completed.load(ordering: .relaxed) == 64)
        #expect(after.datagramsSent - before.datagramsSent == 64)
        let calls = (after.sendmsgCalls + after.sendmmsgCalls) - (before.sendmsgCalls + before.sendmmsgCalls)
        #expect(calls >= 1 && calls <= 2, "64 batched datagrams took \(calls) send calls")
    }

    @Test func cancellingDuringAPendingReceiveCompletesItWithECANCELED() async throws {
        // A listener that accepts and never sends.
        let silent = try await RunningStreamListener.start(TCP(), handler: { connection in
            for await state in connection.states where state.isFinal { break }
        })
        defer { silent.task.cancel() }
        let connection = NWConnection(to: silent.endpoint, using: .tcp)
        let states = StateRecorder(connection)
        connection.start(queue: DispatchQueue(label: "client"))
        try await states.wait(for: "ready") { $0 == .ready }
        let calls = Atomic(0)
        let result = Task {
            await withCheckedContinuation { continuation in
                connection.receive(minimumIncompleteLength: 1, maximumLength: 100) { _, _, _, error in
                    calls.add(1, ordering: .relaxed)
                    continuation.resume(returning: error)
                }
            }
        }
        // The receive is pending: nothing arrives until the cancel.
        try await Task.sleep(for: .milliseconds(50))
        connection.cancel()
        #expect(await result.value == .posix(.ECANCELED))
        try await states.wait(for: "cancelled") { $0 == .cancelled }
        // Completions run on the queue; one more turn of it shows no second call.
        await withCheckedContinuation { continuation in connection.queue!.async { continuation.resume() } }
        #expect(calls.load(ordering: .relaxed) == 1)
    }

    /// A peer that streams without end cannot make `receiveMessage` gather without bound: past
    /// 16 MiB it completes with `.posix(.EMSGSIZE)`.
    @Test func receiveMessageOnAStreamIsBounded() async throws {
        let flood = try await RunningStreamListener.start(TCP(), handler: { connection in
            let chunk = Data(repeating: 0x41, count: 1 << 20)
            for _ in 0..<20 { try await connection.send(chunk) }
            for await state in connection.states where state.isFinal { break }
        })
        defer { flood.task.cancel() }
        let connection = NWConnection(to: flood.endpoint, using: .tcp)
        defer { connection.cancel() }
        connection.start(queue: DispatchQueue(label: "client"))
        let (content, _, error) = await connection.receiveMessageAsync()
        #expect(content == nil)
        #expect(error == .posix(.EMSGSIZE))
    }

    @Test func aSendBeforeStartCompletesOnceWhenCancelled() async throws {
        let connection = NWConnection(host: "127.0.0.1", port: 9, using: .tcp)
        let calls = Atomic(0)
        let error = await withCheckedContinuation { continuation in
            connection.send(content: Data("never".utf8), completion: .contentProcessed { error in
                calls.add(1, ordering: .relaxed)
                continuation.resume(returning: error)
            })
            connection.cancel()
        }
        #expect(error == .posix(.ECANCELED))
        await withCheckedContinuation { continuation in connection.queue!.async { continuation.resume() } }
        #expect(calls.load(ordering: .relaxed) == 1)
    }

    /// Every handler and completion runs on the connection's serial queue, one at a time.
    @Test func handlersOnASerialQueueNeverRunConcurrently() async throws {
        let server = try ClassicEchoServer(.tcp)
        let port = try await server.start()
        defer { server.listener.cancel() }
        let queue = DispatchQueue(label: "serial")
        let connection = NWConnection(host: "127.0.0.1", port: port, using: .tcp)
        defer { connection.cancel() }
        let running = Atomic(0), overlaps = Atomic(0), offQueue = Atomic(0)
        let enter: @Sendable () -> Void = {
            if running.add(1, ordering: .acquiringAndReleasing).newValue > 1 { overlaps.add(1, ordering: .relaxed) }
            if DispatchQueue.getSpecific(key: Self.queueKey) != "serial" { offQueue.add(1, ordering: .relaxed) }
        }
        let leave: @Sendable () -> Void = { running.subtract(1, ordering: .acquiringAndReleasing) }
        queue.setSpecific(key: Self.queueKey, value: "serial")
        connection.stateUpdateHandler = { _ in enter(); usleep(200); leave() }
        connection.start(queue: queue)
        let done = await withCheckedContinuation { (continuation: CheckedContinuation<Int, Never>) in
            let received = Atomic(0)
            for index in 0..<200 {
                connection.send(content: Data([UInt8(index)]), completion: .contentProcessed { _ in enter(); usleep(100); leave() })
            }
            for _ in 0..<200 {
                connection.receive(minimumIncompleteLength: 1, maximumLength: 1) { _, _, _, _ in
                    enter()
                    usleep(100)
                    leave()
                    if received.add(1, ordering: .relaxed).newValue == 200 { continuation.resume(returning: 200) }
                }
            }
        }
        #expect(done == 200)
        #expect(overlaps.load(ordering: .relaxed) == 0)
        #expect(offQueue.load(ordering: .relaxed) == 0)
    }

    static let queueKey = DispatchSpecificKey<String>()

    /// `restart()` retries a waiting connection at once (the backoff timer here waits an hour).
    @Test func restartRetriesAWaitingConnectionAtOnce() async throws {
        let server = try await RunningStreamListener.start(TCP())
        defer { server.task.cancel() }
        let port = server.port.rawValue
        ClientEstablishment.routeFailuresForTesting.withLock { $0[port] = (ENETUNREACH, 1) }
        ClientEstablishment.retryDelaysForTesting.withLock { $0[port] = [.seconds(3600)] }
        defer {
            _ = ClientEstablishment.routeFailuresForTesting.withLock { $0.removeValue(forKey: port) }
            _ = ClientEstablishment.retryDelaysForTesting.withLock { $0.removeValue(forKey: port) }
        }
        let connection = NWConnection(to: server.endpoint, using: .tcp)
        defer { connection.cancel() }
        let states = StateRecorder(connection)
        connection.start(queue: DispatchQueue(label: "client"))
        let waiting = try await states.wait(for: "waiting") { if case .waiting = $0 { true } else { false } }
        #expect(waiting == .waiting(.posix(.ENETUNREACH)))
        connection.restart()
        try await states.wait(for: "ready") { $0 == .ready }
    }

    /// The classic API and the new one talk to each other.
    @Test func classicAndNewAPIInteroperate() async throws {
        let newListener = try await RunningStreamListener.start(TCP())
        defer { newListener.task.cancel() }
        let classicClient = NWConnection(to: newListener.endpoint, using: .tcp)
        defer { classicClient.cancel() }
        classicClient.start(queue: DispatchQueue(label: "classic-client"))
        #expect(await classicClient.sendAsync(Data("to the new API".utf8), context: .finalMessage) == nil)
        let fromNew = await classicClient.receiveMessageAsync()
        #expect(fromNew.content == Data("to the new API".utf8) && fromNew.isComplete)

        let server = try ClassicEchoServer(.tcp)
        let port = try await server.start()
        defer { server.listener.cancel() }
        let newClient = NetworkConnection(to: .hostPort(host: "127.0.0.1", port: port)) { TCP() }
        defer { newClient.cancel() }
        try await newClient.send(Data("to the classic API".utf8), endOfStream: true)
        #expect(try await receiveAll(newClient) == Array("to the classic API".utf8))
    }

    /// Certificates are verified by default: a server whose CA nobody trusts (not the system
    /// store, nor the test CA some tests put in its place) fails the classic TLS client with the
    /// Security framework's unknown-root code.
    @Test func aTLSClientRejectsAnUntrustedServer() async throws {
        let server = try await RunningStreamListener.start(
            TLS().identity(certificateChainFile: Fixtures.path("untrusted.pem"), privateKeyFile: Fixtures.path("untrusted-key.pem")))
        defer { server.task.cancel() }
        let connection = NWConnection(host: "localhost", port: server.port, using: .tls)
        defer { connection.cancel() }
        let states = StateRecorder(connection)
        connection.start(queue: DispatchQueue(label: "client"))
        let failed = try await states.wait(for: "failed") { if case .failed = $0 { true } else { false } }
        #expect(failed == .failed(.tls(-9812)))
        if case .failed(let error) = failed { #expect(error.debugDescription.contains("errSSLUnknownRootCert")) }
    }

    @Test func optionsLinuxCannotApplyFailTheConnectionClearly() async throws {
        let tcp = NWProtocolTCP.Options()
        tcp.noPush = true
        let connection = NWConnection(host: "127.0.0.1", port: 9, using: NWParameters(tls: nil, tcp: tcp))
        let states = StateRecorder(connection)
        connection.start(queue: DispatchQueue(label: "client"))
        #expect(try await states.wait(for: "failed") { if case .failed = $0 { true } else { false } } == .failed(.posix(.EOPNOTSUPP)))

        let datagramFlow = NWProtocolQUIC.Options(alpn: ["h3"])
        datagramFlow.isDatagram = true
        let quic = NWConnection(host: "127.0.0.1", port: 9, using: NWParameters(quic: datagramFlow))
        let quicStates = StateRecorder(quic)
        quic.start(queue: DispatchQueue(label: "quic"))
        #expect(try await quicStates.wait(for: "failed") { if case .failed = $0 { true } else { false } } == .failed(.posix(.EOPNOTSUPP)))
    }

    @Test func tcpOptionsReachTheSocket() async throws {
        let server = try await RunningStreamListener.start(TCP())
        defer { server.task.cancel() }
        let tcp = NWProtocolTCP.Options()
        tcp.noDelay = true
        tcp.enableKeepalive = true
        tcp.keepaliveIdle = 42
        let connection = NWConnection(to: server.endpoint, using: NWParameters(tls: nil, tcp: tcp))
        defer { connection.cancel() }
        let states = StateRecorder(connection)
        connection.start(queue: DispatchQueue(label: "client"))
        try await states.wait(for: "ready") { $0 == .ready }
        let transfer = try #require(connection.transfer as? StreamClassicTransfer<TCP>)
        let core = transfer.connection.core
        let (noDelay, idle) = try await transfer.connection.loop.submit { _ in
            (core.value.byteStream.socketOptionForTesting(level: Int32(IPPROTO_TCP), name: TCP_NODELAY),
             core.value.byteStream.socketOptionForTesting(level: Int32(IPPROTO_TCP), name: TCP_KEEPIDLE))
        }
        #expect(noDelay == 1)
        #expect(idle == 42)
    }
}

/// Classic TLS connections that succeed: the options' trust is the test CA (set through the
/// options' own storage, so no other test's trust reaches them).
@Suite(.timeLimit(.minutes(3))) struct NWConnectionTLSTests {
    static func parameters(alpn: [String]) -> NWParameters {
        let tls = NWProtocolTLS.Options()
        for name in alpn { sec_protocol_options_add_tls_application_protocol(tls.securityProtocolOptions, name) }
        tls.securityProtocolOptions.update { $0.trustRoots = .certificateAuthorities(file: Fixtures.caFile) }
        return NWParameters(tls: tls)
    }

    @Test func aTLSClientTalksToABraidListenerAndReadsTheAgreedProtocol() async throws {
        let server = try await RunningStreamListener.start(testTLSServer(alpn: ["echo", "other"]))
        defer { server.task.cancel() }
        let connection = NWConnection(host: "localhost", port: server.port, using: Self.parameters(alpn: ["echo"]))
        defer { connection.cancel() }
        let states = StateRecorder(connection)
        #expect(connection.metadata(definition: NWProtocolTLS.definition) == nil)
        connection.start(queue: DispatchQueue(label: "client"))
        try await states.wait(for: "ready") { $0 == .ready }
        let tls = try #require(connection.metadata(definition: NWProtocolTLS.definition) as? NWProtocolTLS.Metadata)
        let alpn = try #require(sec_protocol_metadata_get_negotiated_protocol(tls.securityProtocolMetadata))
        #expect(String(cString: alpn) == "echo")
        // What the handshake agreed and showed: the version, the name asked for, the server's
        // chain and key (what post-connect pinning reads).
        let agreed = tls.securityProtocolMetadata
        #expect(sec_protocol_metadata_get_negotiated_tls_protocol_version(agreed) == .TLSv13)
        #expect(sec_protocol_metadata_get_server_name(agreed).map { String(cString: $0) } == "localhost")
        var presented: [Data] = []
        #expect(sec_protocol_metadata_access_peer_certificate_chain(agreed) { certificate in
            presented.append(SecCertificateCopyData(sec_certificate_copy_ref(certificate).takeRetainedValue()) as Data)
        })
        #expect(presented == [try Fixtures.der("server.pem")])
        let key = try #require(SecCertificateCreateWithData(nil, try Fixtures.der("server.pem") as CFData).flatMap(SecCertificateCopyKey))
        #expect(sec_protocol_metadata_copy_peer_public_key(agreed).map { Data($0) } == SecKeyCopyExternalRepresentation(key, nil) as Data?)
        #expect(connection.metadata(definition: NWProtocolTCP.definition) == nil)
        #expect(await connection.sendAsync(Data("over tls".utf8), context: .finalMessage) == nil)
        let echoed = await connection.receiveMessageAsync()
        #expect(echoed.content == Data("over tls".utf8) && echoed.isComplete && echoed.error == nil)
    }

    /// The classic TLS client against GnuTLS's and OpenSSL's servers: gnutls-serv echoes a
    /// line; s_server sends 3,000 pattern bytes from its input. The client connects to the
    /// address and names the certificate's host with `sec_protocol_options_set_tls_server_name`.
    @Test(arguments: [TLSPeer.gnutls, .openssl])
    func aTLSClientTalksToAnotherStacksServer(_ peer: TLSPeer) async throws {
        let server = try await PeerServer.start(peer, alpn: ["echo"], input: 3000)
        defer { server.stop() }
        let parameters = Self.parameters(alpn: ["echo"])
        if let tls = parameters.defaultProtocolStack.applicationProtocols.first as? NWProtocolTLS.Options {
            sec_protocol_options_set_tls_server_name(tls.securityProtocolOptions, "localhost")
        }
        let connection = NWConnection(to: server.endpoint, using: parameters)
        defer { connection.cancel() }
        let states = StateRecorder(connection)
        connection.start(queue: DispatchQueue(label: "client"))
        _ = try await server.diagnosed { try await states.wait(for: "ready") { $0 == .ready } }
        let line = Data("hello from the classic API\n".utf8)
        #expect(await connection.sendAsync(line) == nil)
        let wanted = peer == .gnutls ? line.count : 3000
        var received = Data()
        while received.count < wanted {
            let (content, isComplete, error) = await connection.receiveAsync()
            #expect(error == nil)
            received.append(content ?? Data())
            if isComplete || error != nil { break }
        }
        if peer == .gnutls {
            #expect(received == line)
        } else {
            #expect(received.count == 3000 && PerfPattern.matches(Array(received), at: 0))
        }
    }
}
