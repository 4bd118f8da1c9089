import Dispatch
import Foundation
import Testing

@testable import Braid
import BraidCore

/// DTLS in the classic dialect: `NWListener` over `NWParameters(dtls:)` presenting a local
/// identity from a PKCS #12 file, classic and new-API clients and listeners in every pairing,
/// and verify blocks on classic DTLS clients (accept, refuse, pin by public key; listeners'
/// blocks are in `ListenerVerifyBlockTests`).
@Suite(.timeLimit(.minutes(3))) struct ClassicDTLSTests {
    /// Classic DTLS options presenting server.p12's identity.
    private func listenerOptions() throws -> NWProtocolTLS.Options {
        let options = NWProtocolTLS.Options()
        sec_protocol_options_add_tls_application_protocol(options.securityProtocolOptions, "echo")
        sec_protocol_options_set_local_identity(
            options.securityProtocolOptions, try #require(sec_identity_create(try LocalIdentityTests.identity("server"))))
        return options
    }

    /// Classic DTLS client options trusting the test CA (as the system store, in tests).
    private func clientOptions() -> NWProtocolTLS.Options {
        let options = NWProtocolTLS.Options()
        sec_protocol_options_add_tls_application_protocol(options.securityProtocolOptions, "echo")
        options.securityProtocolOptions.update { $0.trustRoots = .certificateAuthorities(file: Fixtures.caFile) }
        return options
    }

    /// Sends `count` messages on a ready classic connection, each echoed back whole.
    private func exchange(_ connection: NWConnection, count: Int, tag: String) async {
        for index in 0..<count {
            let message = Data("\(tag) \(index)".utf8)
            #expect(await connection.sendAsync(message) == nil)
            let echoed = await connection.receiveMessageAsync()
            #expect(echoed.content == message && echoed.isComplete && echoed.error == nil)
        }
    }

    /// A classic DTLS listener whose options carry an imported identity, echoing.
    private func classicListener() async throws -> (ClassicEchoServer, NWEndpoint.Port) {
        let server = try ClassicEchoServer(NWParameters(dtls: try listenerOptions()))
        return (server, try await server.start())
    }

    /// A new-API DTLS listener on 127.0.0.1 with `certificate`, echoing each message.
    private func newAPIListener(certificate: String = "server") async throws -> (NetworkListener<DTLS>, Task<Void, any Error>) {
        let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any)) {
            DTLS { UDP() }.alpn(["echo"]).peerAuthentication(.none).identity(
                certificateChainFile: Fixtures.path("\(certificate).pem"), privateKeyFile: Fixtures.path("\(certificate)-key.pem"))
        }
        let task = Task {
            try await listener.run { connection in
                for try await (content, _) in connection.messages { try await connection.send(content) }
            }
        }
        try await listener.waitUntilReady()
        return (listener, task)
    }

    @Test func classicClientTalksToAClassicListener() async throws {
        let (server, port) = try await classicListener()
        defer { server.listener.cancel() }
        let connection = NWConnection(host: "localhost", port: port, using: NWParameters(dtls: clientOptions()))
        defer { connection.cancel() }
        let states = StateRecorder(connection)
        connection.start(queue: DispatchQueue(label: "dtls client"))
        try await states.wait(for: "ready") { $0 == .ready }
        await exchange(connection, count: 5, tag: "classic to classic")
    }

    @Test func newAPIClientTalksToAClassicListener() async throws {
        let (server, port) = try await classicListener()
        defer { server.listener.cancel() }
        let connection = NetworkConnection(to: .hostPort(host: "localhost", port: port)) {
            DTLS { UDP() }.alpn(["echo"]).trust(.certificateAuthorities(file: Fixtures.caFile))
        }
        defer { connection.cancel() }
        for index in 0..<5 {
            let message = Data("new to classic \(index)".utf8)
            try await connection.send(message)
            #expect(try await connection.receive().content == message)
        }
    }

    @Test func classicClientTalksToANewAPIListener() async throws {
        let (listener, task) = try await newAPIListener()
        defer { task.cancel() }
        let connection = NWConnection(host: "localhost", port: listener.port!, using: NWParameters(dtls: clientOptions()))
        defer { connection.cancel() }
        let states = StateRecorder(connection)
        connection.start(queue: DispatchQueue(label: "dtls client"))
        try await states.wait(for: "ready") { $0 == .ready }
        await exchange(connection, count: 5, tag: "classic to new")
    }

    /// Without an identity a classic DTLS listener fails with EINVAL, as a TLS one does.
    @Test func aDTLSListenerWithoutAnIdentityFailsClearly() async throws {
        let listener = try NWListener(using: .dtls)
        let (states, continuation) = AsyncStream<NWListener.State>.makeStream()
        listener.stateUpdateHandler = { continuation.yield($0) }
        listener.newConnectionHandler = { $0.cancel() }
        listener.start(queue: DispatchQueue(label: "listener"))
        defer { listener.cancel() }
        let failure = try await withDeadline(.seconds(60)) {
            for await state in states { if case .failed(let error) = state { return error } }
            return nil
        }
        #expect(failure == .posix(.EINVAL))
    }

    /// A classic DTLS client presents its imported identity to a listener that requires
    /// client certificates from the test CA.
    @Test func aClassicClientPresentsItsIdentity() async throws {
        let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any)) {
            DTLS { UDP() }.alpn(["echo"]).peerAuthentication(.required).trust(.certificateAuthorities(file: Fixtures.caFile))
                .identity(certificateChainFile: Fixtures.path("server.pem"), privateKeyFile: Fixtures.path("server-key.pem"))
        }
        let task = Task {
            try await listener.run { connection in
                for try await (content, _) in connection.messages { try await connection.send(content) }
            }
        }
        defer { task.cancel() }
        try await listener.waitUntilReady()
        let options = clientOptions()
        sec_protocol_options_set_local_identity(
            options.securityProtocolOptions, try #require(sec_identity_create(try LocalIdentityTests.identity("client"))))
        let connection = NWConnection(host: "localhost", port: listener.port!, using: NWParameters(dtls: options))
        defer { connection.cancel() }
        let states = StateRecorder(connection)
        connection.start(queue: DispatchQueue(label: "dtls client"))
        try await states.wait(for: "ready") { $0 == .ready }
        // The listener requires a certificate: messages flowing mean it took this one.
        await exchange(connection, count: 2, tag: "mutual")
    }

    // MARK: Verify blocks

    /// A classic DTLS client to `port` whose options carry `block` instead of Braid's checks.
    private func connect(to port: NWEndpoint.Port, _ block: @escaping sec_protocol_verify_t) -> (NWConnection, StateRecorder) {
        let options = NWProtocolTLS.Options()
        sec_protocol_options_add_tls_application_protocol(options.securityProtocolOptions, "echo")
        sec_protocol_options_set_verify_block(options.securityProtocolOptions, block, DispatchQueue(label: "verify"))
        let connection = NWConnection(host: "localhost", port: port, using: NWParameters(dtls: options))
        let states = StateRecorder(connection)
        connection.start(queue: DispatchQueue(label: "dtls client"))
        return (connection, states)
    }

    /// The server's certificate comes from an authority nobody trusts; a block pinning that
    /// exact certificate accepts it, and messages flow.
    @Test func aBlockPinningTheServersCertificateAccepts() async throws {
        let (listener, task) = try await newAPIListener(certificate: "untrusted")
        defer { task.cancel() }
        let pinned = try Fixtures.der("untrusted.pem")
        let (connection, states) = connect(to: listener.port!) { _, trust, complete in
            let trust = sec_trust_copy_ref(trust).takeRetainedValue()
            guard let leaf = SecTrustGetCertificateAtIndex(trust, 0) else { return complete(false) }
            complete(SecCertificateCopyData(leaf) as Data == pinned)
        }
        defer { connection.cancel() }
        try await states.wait(for: "ready") { $0 == .ready }
        await exchange(connection, count: 3, tag: "pinned")
    }

    /// A block refusing the server fails the connection with errSSLBadCert; it never becomes
    /// ready, and the listener's connection hears a bad_certificate alert.
    @Test func aBlockThatRefusesFailsTheConnection() async throws {
        let refused = Locked<NetworkError?>(nil)
        let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any)) {
            DTLS { UDP() }.alpn(["echo"]).peerAuthentication(.none).identity(
                certificateChainFile: Fixtures.path("server.pem"), privateKeyFile: Fixtures.path("server-key.pem"))
        }
        let task = Task {
            try await listener.run { connection in
                do { _ = try await connection.receive() } catch let error as NetworkError { refused.withLock { $0 = error } }
            }
        }
        defer { task.cancel() }
        try await listener.waitUntilReady()
        let asked = Locked(false)
        let (connection, states) = connect(to: listener.port!) { _, _, complete in
            asked.withLock { $0 = true }
            complete(false)
        }
        defer { connection.cancel() }
        let seen = Locked<[NWConnection.State]>([])
        let failed = try await states.wait(for: "failed") { state in
            seen.withLock { $0.append(state) }
            if case .failed = state { return true } else { return false }
        }
        #expect(failed == .failed(.tls(-9808)))
        #expect(!seen.withLock { $0 }.contains(.ready))
        #expect(asked.withLock { $0 })
        let alert = try await withDeadline(.seconds(60)) {
            while refused.withLock({ $0 }) == nil { try await Task.sleep(for: .milliseconds(20)) }
            return refused.withLock { $0 }
        }
        #expect(alert.map { "\($0)" }?.contains("bad certificate") == true || alert.map { "\($0)" }?.contains("bad_certificate") == true,
                "\(String(describing: alert))")
    }

    /// Pinning by public key, as Apple's pinning material does: the block compares the peer's
    /// key with the one expected. The server's own key accepts; another key refuses.
    @Test func aBlockPinningThePublicKey() async throws {
        let (listener, task) = try await newAPIListener()
        defer { task.cancel() }
        func key(of certificate: String) throws -> Data? {
            let parsed = try #require(SecCertificateCreateWithData(nil, try Fixtures.der(certificate) as CFData))
            return SecCertificateCopyKey(parsed).flatMap { SecKeyCopyExternalRepresentation($0, nil) as Data? }
        }
        for (certificate, accepts) in [("server.pem", true), ("example.pem", false)] {
            let expected = try #require(try key(of: certificate))
            let (connection, states) = connect(to: listener.port!) { metadata, _, complete in
                complete(sec_protocol_metadata_copy_peer_public_key(metadata).map { Data($0) } == expected)
            }
            if accepts {
                try await states.wait(for: "ready") { $0 == .ready }
                await exchange(connection, count: 2, tag: "key pinned")
            } else {
                let failed = try await states.wait(for: "failed") { if case .failed = $0 { true } else { false } }
                #expect(failed == .failed(.tls(-9808)))
            }
            connection.cancel()
        }
    }

    /// Until the block answers the connection is not ready and no message reaches a receive;
    /// then both happen.
    @Test func nothingOfThePeerArrivesBeforeTheVerdict() async throws {
        let (listener, task) = try await newAPIListener()
        defer { task.cancel() }
        let (asked, answer) = AsyncStream.makeStream(of: sec_protocol_verify_complete_t.self)
        let (connection, states) = connect(to: listener.port!) { _, _, complete in answer.yield(complete) }
        defer { connection.cancel() }
        var iterator = asked.makeAsyncIterator()
        let complete = try #require(await iterator.next())
        #expect(connection.state == .preparing)
        complete(true)
        try await states.wait(for: "ready") { $0 == .ready }
        await exchange(connection, count: 2, tag: "after the verdict")
    }

    /// A judge that never answers leaves the connection preparing until the handshake timeout,
    /// which then fails it with `noResponse`: a silent verdict does not wedge it. (The timeout
    /// leaves the handshake itself ample time on a loaded machine.)
    @Test func aVerdictThatNeverComesMeetsTheHandshakeTimeout() async throws {
        let (listener, task) = try await newAPIListener()
        defer { task.cancel() }
        let (asked, judged) = AsyncStream.makeStream(of: Void.self)
        let connection = NetworkConnection(to: .hostPort(host: "localhost", port: listener.port!)) {
            DTLS { UDP() }.alpn(["echo"]).handshakeTimeout(.seconds(30)).verified(by: TLSPeerVerifier { _, _ in judged.yield() })
        }
        defer { connection.cancel() }
        // A send that ends before the judge is asked ends the wait too (and the test fails).
        let sending = Task {
            defer { judged.finish() }
            try await connection.send(Data("never judged".utf8))
        }
        var iterator = asked.makeAsyncIterator()
        #expect(await iterator.next() != nil, "the connection ended before the judge was asked")
        #expect(connection.state == .preparing)
        do {
            try await sending.value
            Issue.record("a send went out before the verdict")
        } catch NetworkError.noResponse(_, let timeout) {
            #expect(timeout == .seconds(30))
        }
    }
}
