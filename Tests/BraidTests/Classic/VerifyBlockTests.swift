import Dispatch
import Foundation
import Testing

@testable import Braid
import BraidCore
import BraidIO

/// TLS verify blocks on the classic client, written as Apple's pinning material writes them:
/// the block replaces Braid's own check, a right pin accepts, a wrong one refuses, and the
/// system trust evaluation refuses an authority it does not know.
@Suite(.timeLimit(.minutes(3))) struct VerifyBlockTests {
    /// A classic TLS client to `server` whose options carry `block` on a queue of its own.
    private func connect(
        to server: RunningStreamListener<TLS>, _ block: @escaping sec_protocol_verify_t
    ) -> (NWConnection, StateRecorder) {
        let tls = NWProtocolTLS.Options()
        sec_protocol_options_add_tls_application_protocol(tls.securityProtocolOptions, "echo")
        sec_protocol_options_set_verify_block(tls.securityProtocolOptions, block, DispatchQueue(label: "verify"))
        let connection = NWConnection(host: "localhost", port: server.port, using: NWParameters(tls: tls))
        let states = StateRecorder(connection)
        connection.start(queue: DispatchQueue(label: "client"))
        return (connection, states)
    }

    private func serving(_ certificate: String) async throws -> RunningStreamListener<TLS> {
        try await RunningStreamListener.start(
            TLS().alpn(["echo"]).identity(
                certificateChainFile: Fixtures.path("\(certificate).pem"), privateKeyFile: Fixtures.path("\(certificate)-key.pem")))
    }

    /// The server's certificate is self-issued by an authority nobody trusts; pinning its
    /// exact certificate accepts it, and bytes flow.
    @Test func aBlockPinningTheServersCertificateAccepts() async throws {
        let server = try await serving("untrusted")
        defer { server.task.cancel() }
        let pinned = try Fixtures.der("untrusted.pem")
        let (connection, states) = connect(to: server) { _, trust, complete in
            let trust = sec_trust_copy_ref(trust).takeRetainedValue()
            guard let leaf = SecTrustGetCertificateAtIndex(trust, 0) else { return complete(false) }
            complete(SecCertificateCopyData(leaf) as Data == pinned)
        }
        defer { connection.cancel() }
        try await states.wait(for: "ready") { $0 == .ready }
        #expect(await connection.sendAsync(Data("pinned".utf8), context: .finalMessage) == nil)
        let echoed = await connection.receiveMessageAsync()
        #expect(echoed.content == Data("pinned".utf8))
    }

    /// A block pinning another key refuses: the connection fails with errSSLBadCert and never
    /// becomes ready; the server hears a bad_certificate alert.
    @Test func aBlockPinningAnotherKeyRefuses() async throws {
        let refused = Locked<NetworkError?>(nil)
        let server = try await RunningStreamListener.start(testTLSServer(), handler: { (connection: NetworkConnection<TLS>) in
            do { _ = try await connection.receive(atLeast: 1, atMost: 10) } catch let error as NetworkError { refused.withLock { $0 = error } }
        })
        defer { server.task.cancel() }
        let otherKey = try #require(SecCertificateCreateWithData(nil, try Fixtures.der("example.pem") as CFData).flatMap(SecCertificateCopyKey))
        let (connection, states) = connect(to: server) { metadata, _, complete in
            let presented = sec_protocol_metadata_copy_peer_public_key(metadata).map { Data($0) }
            complete(presented == SecKeyCopyExternalRepresentation(otherKey, nil) as Data?)
        }
        defer { connection.cancel() }
        let failed = try await states.wait(for: "failed") { if case .failed = $0 { true } else { false } }
        #expect(failed == NWConnection.State.failed(.tls(-9808)))
        let seen = try await withDeadline(.seconds(60)) {
            while refused.withLock({ $0 }) == nil { try await Task.sleep(for: .milliseconds(20)) }
            return refused.withLock { $0 }
        }
        #expect(seen.map { "\($0)" }?.contains("bad certificate") == true || seen.map { "\($0)" }?.contains("bad_certificate") == true)
    }

    /// The system evaluation inside a block refuses a server whose authority is not in the
    /// system store, with errSecNotTrusted; the same server is accepted once the block names
    /// the authority as its anchor.
    @Test func theSystemEvaluationRefusesAnUnknownAuthorityAndAnAnchorAccepts() async throws {
        let server = try await RunningStreamListener.start(testTLSServer())
        defer { server.task.cancel() }
        let evaluation = Locked<CFError?>(nil)
        let queue = DispatchQueue(label: "evaluation")
        let (refusing, refusingStates) = connect(to: server) { _, trust, complete in
            let trust = sec_trust_copy_ref(trust).takeRetainedValue()
            SecTrustEvaluateAsyncWithError(trust, queue) { _, result, error in
                evaluation.withLock { $0 = error }
                complete(result)
            }
        }
        defer { refusing.cancel() }
        #expect(try await refusingStates.wait(for: "failed") { if case .failed = $0 { true } else { false } } == .failed(.tls(-9808)))
        #expect(evaluation.withLock { $0?.code } == Int(errSecNotTrusted))

        let authority = try #require(SecCertificateCreateWithData(nil, try Fixtures.der("ca.pem") as CFData))
        let (anchored, anchoredStates) = connect(to: server) { _, trust, complete in
            let trust = sec_trust_copy_ref(trust).takeRetainedValue()
            SecTrustSetAnchorCertificates(trust, [authority] as CFArray)
            var error: CFError?
            complete(SecTrustEvaluateWithError(trust, &error))
        }
        defer { anchored.cancel() }
        try await anchoredStates.wait(for: "ready") { $0 == .ready }
    }

    /// The block decides on its own time: until it answers the connection is not ready and
    /// nothing the server sent at once reaches a receive, though its bytes have reached this
    /// end; then both happen.
    @Test func nothingOfThePeerArrivesBeforeTheVerdict() async throws {
        // More than the server's session tickets, so bytes waiting here mean the message came.
        let message = Data(repeating: 0x42, count: 6000)
        let server = try await RunningStreamListener.start(testTLSServer(), handler: { connection in
            try await connection.send(message, endOfStream: true)
        })
        defer { server.task.cancel() }
        let (asked, answer) = AsyncStream.makeStream(of: sec_protocol_verify_complete_t.self)
        let (connection, states) = connect(to: server) { _, _, complete in answer.yield(complete) }
        defer { connection.cancel() }
        let received = Locked<Data?>(nil)
        connection.receive(minimumIncompleteLength: message.count, maximumLength: message.count) { content, _, _, _ in
            received.withLock { $0 = content ?? Data() }
        }
        var iterator = asked.makeAsyncIterator()
        let complete = try #require(await iterator.next())
        let transfer = try #require(connection.transfer as? StreamClassicTransfer<TLS>)
        let core = transfer.connection.core
        let arrived = try await withDeadline(.seconds(60)) {
            while try await transfer.connection.loop.submit({ _ in core.value.byteStream.unprocessedInputForTesting() }) < message.count {
                try await Task.sleep(for: .milliseconds(10))
            }
            return true
        }
        #expect(arrived == true)
        #expect(connection.state == .preparing)
        #expect(received.withLock { $0 } == nil)
        complete(true)
        try await states.wait(for: "ready") { $0 == .ready }
        let data = try await withDeadline(.seconds(60)) {
            while received.withLock({ $0 }) == nil { try await Task.sleep(for: .milliseconds(20)) }
            return received.withLock { $0 }
        }
        #expect(data == message)
    }
}
