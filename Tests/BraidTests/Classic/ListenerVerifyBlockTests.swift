import Dispatch
import Foundation
import Testing

@testable import Braid
import BraidCore
import BraidTLSIO
import Synchronization

/// Verify blocks on DTLS and TLS listeners, over loopback: the block judges each client's
/// certificate in place of the authorities; a certificate it accepts carries messages both
/// ways, one it refuses fails the listener's connection with errSSLBadCert (`.tls(-9808)`) and
/// the client with the bad_certificate alert it hears. The classic API (`NWListener` with
/// `sec_protocol_options_set_verify_block`) and the new one (`NetworkListener` with the
/// judge the classic block becomes) alike.
@Suite(.timeLimit(.minutes(3))) struct ListenerVerifyBlockTests {
    /// The test client certificates: signed by the test CA, and by an authority nobody trusts.
    private static let trustedClient = "client", untrustedClient = "untrusted-client"

    // MARK: Listeners

    /// A classic listener (`dtls`: over UDP, else TLS over TCP) presenting server.p12, whose
    /// verify block accepts exactly `accepted`'s certificate and records what it was shown.
    /// Each connection's states go to `serverStates`; its messages are echoed.
    private func classicListener(
        dtls: Bool, accepting accepted: String, asked: Recorder<Data>, serverStates: Recorder<NWConnection.State>
    ) async throws -> (NWListener, NWEndpoint.Port) {
        let options = NWProtocolTLS.Options()
        sec_protocol_options_add_tls_application_protocol(options.securityProtocolOptions, "echo")
        sec_protocol_options_set_local_identity(
            options.securityProtocolOptions, try #require(sec_identity_create(try LocalIdentityTests.identity("server"))))
        let expected = try Fixtures.der("\(accepted).pem")
        sec_protocol_options_set_verify_block(options.securityProtocolOptions, { metadata, trust, complete in
            let trust = sec_trust_copy_ref(trust).takeRetainedValue()
            let leaf = SecTrustGetCertificateAtIndex(trust, 0).map { SecCertificateCopyData($0) as Data }
            asked.append(leaf ?? Data())
            // The metadata shows the same chain.
            var chain: [Data] = []
            sec_protocol_metadata_access_peer_certificate_chain(metadata) { certificate in
                chain.append(SecCertificateCopyData(sec_certificate_copy_ref(certificate).takeRetainedValue()) as Data)
            }
            complete(leaf == expected && chain.first == expected)
        }, DispatchQueue(label: "listener verify"))
        let parameters = dtls ? NWParameters(dtls: options) : NWParameters(tls: options)
        let server = try ClassicEchoServer(parameters) { connection in
            connection.stateUpdateHandler = { state in serverStates.append(state) }
            ClassicEchoServer.echo(connection)
        }
        return (server.listener, try await server.start())
    }

    /// A new-API DTLS listener judging clients with `judge`; each connection's end goes to
    /// `ended`, its messages are echoed.
    private func newAPIDTLSListener(
        judge: @escaping TLSPeerJudge, ended: Recorder<NetworkError>
    ) async throws -> (NetworkListener<DTLS>, Task<Void, any Error>) {
        let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any)) {
            DTLS { UDP() }.alpn(["echo"]).identity(
                certificateChainFile: Fixtures.path("server.pem"), privateKeyFile: Fixtures.path("server-key.pem")
            ).verified(by: TLSPeerVerifier(judge))
        }
        let task = Task {
            try await listener.run { connection in
                do {
                    for try await (content, _) in connection.messages { try await connection.send(content) }
                } catch {}
                // The connection's end, however its messages ended.
                for await state in connection.states {
                    if case .failed(let error) = state {
                        ended.append(error)
                        break
                    }
                    if state == .cancelled { break }
                }
            }
        }
        try await listener.waitUntilReady()
        return (listener, task)
    }

    /// A judge accepting exactly `accepted`'s certificate, recording each chain's leaf.
    private func judge(accepting accepted: String, asked: Recorder<Data>) throws -> TLSPeerJudge {
        let expected = [UInt8](try Fixtures.der("\(accepted).pem"))
        return { peer, decide in
            asked.append(Data(peer.certificateChain.first ?? []))
            decide(peer.peerIsClient && peer.certificateChain.first == expected)
        }
    }

    // MARK: Clients

    private func dtlsClient(to port: NWEndpoint.Port, presenting certificate: String) -> NetworkConnection<DTLS> {
        NetworkConnection(to: .hostPort(host: "localhost", port: port)) {
            DTLS { UDP() }.alpn(["echo"]).trust(.certificateAuthorities(file: Fixtures.caFile))
                .identity(certificateChainFile: Fixtures.path("\(certificate).pem"), privateKeyFile: Fixtures.path("\(certificate)-key.pem"))
        }
    }

    private func tlsClient(to port: NWEndpoint.Port, presenting certificate: String) -> NetworkConnection<TLS> {
        NetworkConnection(to: .hostPort(host: "localhost", port: port)) {
            testTLSClient().identity(
                certificateChainFile: Fixtures.path("\(certificate).pem"), privateKeyFile: Fixtures.path("\(certificate)-key.pem"))
        }
    }

    /// The client's end once the listener refused it: the handshake may complete on the
    /// client's side first (the listener judges after it), so a send and a receive meet the
    /// listener's alert. Its description names the bad certificate.
    private func clientError(_ exchange: @escaping @Sendable () async throws -> Void) async throws -> NetworkError {
        let error = try await withDeadline(.seconds(60)) { () -> NetworkError? in
            do {
                try await exchange()
                return nil
            } catch let error as NetworkError {
                return error
            }
        }
        return try #require(error, "the refused client kept talking")
    }

    private func expectBadCertificate(_ error: NetworkError, sourceLocation: SourceLocation = #_sourceLocation) {
        let text = "\(error)"
        #expect(text.contains("bad certificate") || text.contains("bad_certificate"), "\(text)", sourceLocation: sourceLocation)
    }

    /// Waits for the listener's connection to fail and returns its error.
    private func serverFailure(_ states: Recorder<NWConnection.State>) async throws -> NWError? {
        try await withDeadline(.seconds(60)) {
            while true {
                for state in states.values { if case .failed(let error) = state { return error } }
                try await Task.sleep(for: .milliseconds(20))
            }
        }
    }

    // MARK: DTLS, classic

    /// A client certificate from an authority nobody trusts, which the block pins: the block
    /// is asked with it, accepts, and messages flow.
    @Test func aDTLSListenerBlockAcceptsTheCertificateItPins() async throws {
        let asked = Recorder<Data>(), serverStates = Recorder<NWConnection.State>()
        let (listener, port) = try await classicListener(dtls: true, accepting: Self.untrustedClient, asked: asked, serverStates: serverStates)
        defer { listener.cancel() }
        let connection = dtlsClient(to: port, presenting: Self.untrustedClient)
        defer { connection.cancel() }
        for index in 0..<3 {
            let message = Data("judged \(index)".utf8)
            try await connection.send(message)
            #expect(try await connection.receive().content == message)
        }
        #expect(asked.values == [try Fixtures.der("\(Self.untrustedClient).pem")])
        #expect(serverStates.values.contains(.ready))
    }

    /// A certificate the block refuses, though the test CA signed it: the listener's connection
    /// fails with errSSLBadCert without becoming ready, and the client hears bad_certificate.
    @Test func aDTLSListenerBlockRefusalFailsBothEnds() async throws {
        let asked = Recorder<Data>(), serverStates = Recorder<NWConnection.State>()
        let (listener, port) = try await classicListener(dtls: true, accepting: Self.untrustedClient, asked: asked, serverStates: serverStates)
        defer { listener.cancel() }
        let connection = dtlsClient(to: port, presenting: Self.trustedClient)
        defer { connection.cancel() }
        let error = try await clientError {
            try await connection.send(Data("refused".utf8))
            _ = try await connection.receive()
        }
        expectBadCertificate(error)
        #expect(try await serverFailure(serverStates) == .tls(-9808))
        #expect(!serverStates.values.contains(.ready))
        #expect(asked.values == [try Fixtures.der("\(Self.trustedClient).pem")])
    }

    /// A listener with a block asks every client for a certificate: one without fails the
    /// handshake, and the block is never asked.
    @Test func aDTLSListenerBlockRequiresACertificate() async throws {
        let asked = Recorder<Data>(), serverStates = Recorder<NWConnection.State>()
        let (listener, port) = try await classicListener(dtls: true, accepting: Self.untrustedClient, asked: asked, serverStates: serverStates)
        defer { listener.cancel() }
        let connection = NetworkConnection(to: .hostPort(host: "localhost", port: port)) {
            DTLS { UDP() }.alpn(["echo"]).trust(.certificateAuthorities(file: Fixtures.caFile))
        }
        defer { connection.cancel() }
        _ = try await clientError {
            try await connection.send(Data("anonymous".utf8))
            _ = try await connection.receive()
        }
        #expect(try await serverFailure(serverStates) != nil)
        #expect(asked.values.isEmpty)
    }

    // MARK: DTLS, new API

    /// The new API's listener with a judge: accepted and refused clients, each with its typed
    /// error where refused (`certificateRejected` on the listener's side).
    @Test func aNewAPIDTLSListenerJudgesItsClients() async throws {
        let asked = Recorder<Data>(), ended = Recorder<NetworkError>()
        let (listener, task) = try await newAPIDTLSListener(judge: try judge(accepting: Self.trustedClient, asked: asked), ended: ended)
        defer { task.cancel() }

        let accepted = dtlsClient(to: listener.port!, presenting: Self.trustedClient)
        try await accepted.send(Data("accepted".utf8))
        #expect(try await accepted.receive().content == Data("accepted".utf8))
        accepted.cancel()

        let refused = dtlsClient(to: listener.port!, presenting: Self.untrustedClient)
        defer { refused.cancel() }
        let error = try await clientError {
            try await refused.send(Data("refused".utf8))
            _ = try await refused.receive()
        }
        expectBadCertificate(error)
        let serverError = try await withDeadline(.seconds(60)) {
            while true {
                if let rejected = ended.values.first(where: { "\($0)".contains("rejected") || "\($0)".contains("refused") }) {
                    return rejected
                }
                try await Task.sleep(for: .milliseconds(20))
            }
        }
        #expect(serverError.map { NWError($0) } == .tls(-9808), "\(String(describing: serverError)); ended: \(ended.values)")
        #expect(asked.values.count == 2)
    }

    // MARK: TLS

    @Test func aTLSListenerBlockAcceptsTheCertificateItPins() async throws {
        let asked = Recorder<Data>(), serverStates = Recorder<NWConnection.State>()
        let (listener, port) = try await classicListener(dtls: false, accepting: Self.untrustedClient, asked: asked, serverStates: serverStates)
        defer { listener.cancel() }
        let connection = tlsClient(to: port, presenting: Self.untrustedClient)
        defer { connection.cancel() }
        try await connection.send(Data("judged".utf8))
        #expect(try await connection.receive(exactly: 6).content == Data("judged".utf8))
        #expect(asked.values == [try Fixtures.der("\(Self.untrustedClient).pem")])
    }

    @Test func aTLSListenerBlockRefusalFailsBothEnds() async throws {
        let asked = Recorder<Data>(), serverStates = Recorder<NWConnection.State>()
        let (listener, port) = try await classicListener(dtls: false, accepting: Self.untrustedClient, asked: asked, serverStates: serverStates)
        defer { listener.cancel() }
        let connection = tlsClient(to: port, presenting: Self.trustedClient)
        defer { connection.cancel() }
        let error = try await clientError {
            try await connection.send(Data("refused".utf8))
            _ = try await connection.receive(exactly: 7)
        }
        expectBadCertificate(error)
        #expect(try await serverFailure(serverStates) == .tls(-9808))
        #expect(!serverStates.values.contains(.ready))
    }

    /// Every client is judged: a listener with a judge issues no tickets, so a second
    /// connection from the same client is judged again rather than resumed.
    @Test func aNewAPITLSListenerJudgesEveryConnection() async throws {
        let asked = Recorder<Data>()
        let server = try await RunningStreamListener.start(
            testTLSServer().verified(by: TLSPeerVerifier(try judge(accepting: Self.trustedClient, asked: asked))))
        defer { server.task.cancel() }
        let cache = TLS.SessionCache()
        for round in 0..<2 {
            let connection = NetworkConnection(to: .hostPort(host: "localhost", port: server.port)) {
                testTLSClient().sessionCache(cache).identity(
                    certificateChainFile: Fixtures.path("client.pem"), privateKeyFile: Fixtures.path("client-key.pem"))
            }
            try await connection.send(Data("round \(round)".utf8))
            #expect(try await connection.receive(exactly: 7).content == Data("round \(round)".utf8))
            #expect(connection.isResumed == false)
            connection.cancel()
        }
        #expect(asked.values.count == 2)
    }
}

/// What handlers on other threads saw, in order.
final class Recorder<Element: Sendable>: Sendable {
    private let storage = Mutex<[Element]>([])

    init() {}

    func append(_ element: Element) { storage.withLock { $0.append(element) } }

    var values: [Element] { storage.withLock { $0 } }
}
