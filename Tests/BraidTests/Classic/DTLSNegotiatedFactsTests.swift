import Dispatch
import Foundation
import Testing

@testable import Braid
import BraidCore

/// What a DTLS handshake agreed, read on both ends over loopback: the ALPN protocol
/// (`negotiatedALPN` in the new API, `sec_protocol_metadata_get_negotiated_protocol` on the
/// classic connection's `NWProtocolTLS.Metadata`) and, on a listener that asked for one, the
/// client's certificate.
@Suite(.timeLimit(.minutes(3))) struct DTLSNegotiatedFactsTests {
    /// The listener's connection reads the protocol it chose from the client's offer, and so
    /// does the client.
    @Test func bothEndsOfANewAPIConnectionReadTheNegotiatedALPN() async throws {
        let seen = Recorder<String?>()
        let listener = NetworkListener(for: .hostPort(host: "127.0.0.1", port: .any)) {
            DTLS { UDP() }.alpn(["coap", "echo"]).peerAuthentication(.none).identity(
                certificateChainFile: Fixtures.path("server.pem"), privateKeyFile: Fixtures.path("server-key.pem"))
        }
        let task = Task {
            try await listener.run { connection in
                for try await (content, _) in connection.messages {
                    // Ready by the first message.
                    seen.append(connection.negotiatedALPN)
                    try await connection.send(content)
                }
            }
        }
        defer { task.cancel() }
        try await listener.waitUntilReady()
        let connection = NetworkConnection(to: .hostPort(host: "localhost", port: listener.port!)) {
            DTLS { UDP() }.alpn(["echo", "other"]).trust(.certificateAuthorities(file: Fixtures.caFile))
        }
        defer { connection.cancel() }
        try await connection.send(Data("which protocol?".utf8))
        #expect(try await connection.receive().content == Data("which protocol?".utf8))
        #expect(connection.negotiatedALPN == "echo")
        #expect(seen.values == ["echo"])
    }

    /// A classic listener's connection: its TLS metadata names the protocol and shows the
    /// certificate the client presented; the classic client's metadata names the protocol too.
    @Test func classicConnectionsCarryTheirTLSMetadata() async throws {
        let server = ListenerMetadata()
        let options = NWProtocolTLS.Options()
        sec_protocol_options_add_tls_application_protocol(options.securityProtocolOptions, "echo")
        sec_protocol_options_set_local_identity(
            options.securityProtocolOptions, try #require(sec_identity_create(try LocalIdentityTests.identity("server"))))
        // The client's certificate reaches the metadata when the listener asks for it: a
        // verify block makes it ask, and this one accepts the test CA's client.
        let clientCertificate = try Fixtures.der("client.pem")
        sec_protocol_options_set_verify_block(options.securityProtocolOptions, { _, trust, complete in
            let trust = sec_trust_copy_ref(trust).takeRetainedValue()
            complete(SecTrustGetCertificateAtIndex(trust, 0).map { SecCertificateCopyData($0) as Data } == clientCertificate)
        }, DispatchQueue(label: "verify"))
        let echo = try ClassicEchoServer(NWParameters(dtls: options)) { connection in
            connection.stateUpdateHandler = { state in
                guard state == .ready else { return }
                server.record(connection.metadata(definition: NWProtocolTLS.definition) as? NWProtocolTLS.Metadata)
            }
            ClassicEchoServer.echo(connection)
        }
        let port = try await echo.start()
        defer { echo.listener.cancel() }

        let clientOptions = NWProtocolTLS.Options()
        sec_protocol_options_add_tls_application_protocol(clientOptions.securityProtocolOptions, "echo")
        clientOptions.securityProtocolOptions.update { $0.trustRoots = .certificateAuthorities(file: Fixtures.caFile) }
        sec_protocol_options_set_local_identity(
            clientOptions.securityProtocolOptions, try #require(sec_identity_create(try LocalIdentityTests.identity("client"))))
        let connection = NWConnection(host: "localhost", port: port, using: NWParameters(dtls: clientOptions))
        defer { connection.cancel() }
        let states = StateRecorder(connection)
        connection.start(queue: DispatchQueue(label: "dtls client"))
        try await states.wait(for: "ready") { $0 == .ready }
        #expect(await connection.sendAsync(Data("metadata".utf8)) == nil)
        #expect(await connection.receiveMessageAsync().content == Data("metadata".utf8))

        let mine = try #require(connection.metadata(definition: NWProtocolTLS.definition) as? NWProtocolTLS.Metadata)
        #expect(sec_protocol_metadata_get_negotiated_protocol(mine.securityProtocolMetadata).map { String(cString: $0) } == "echo")
        let theirs = try #require(try await server.first())
        #expect(sec_protocol_metadata_get_negotiated_protocol(theirs.securityProtocolMetadata).map { String(cString: $0) } == "echo")
        // DTLS reports its own version, as Apple's `tls_protocol_version_t` names it.
        #expect(sec_protocol_metadata_get_negotiated_tls_protocol_version(mine.securityProtocolMetadata) == .DTLSv12)
        #expect(sec_protocol_metadata_get_negotiated_tls_protocol_version(theirs.securityProtocolMetadata) == .DTLSv12)
        var chain: [Data] = []
        sec_protocol_metadata_access_peer_certificate_chain(theirs.securityProtocolMetadata) { certificate in
            chain.append(SecCertificateCopyData(sec_certificate_copy_ref(certificate).takeRetainedValue()) as Data)
        }
        #expect(chain.first == clientCertificate)
    }
}

/// The metadata a classic listener's first connection read once ready.
private final class ListenerMetadata: Sendable {
    private let stored = Recorder<NWProtocolTLS.Metadata?>()

    func record(_ metadata: NWProtocolTLS.Metadata?) { stored.append(metadata) }

    func first() async throws -> NWProtocolTLS.Metadata? {
        try await withDeadline(.seconds(60)) { [self] in
            while stored.values.isEmpty { try await Task.sleep(for: .milliseconds(20)) }
            return stored.values.first ?? nil
        }
    }
}
