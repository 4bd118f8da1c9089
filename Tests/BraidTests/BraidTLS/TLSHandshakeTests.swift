import CBraid
import Testing
@testable import BraidTLS

/// Handshakes between two in-memory engines: success, ALPN, versions, configuration errors.
@Suite struct TLSHandshakeTests {
    @Test func handshakeCompletesAndEchoesBothWays() throws {
        let pair = try TLSPair(client: TLSFixtures.client(), server: TLSFixtures.server())
        pair.run()
        #expect(pair.client.error == nil)
        #expect(pair.server.error == nil)
        #expect(pair.client.connection.isHandshakeComplete)
        #expect(pair.server.connection.isHandshakeComplete)
        #expect(pair.client.events.first == .handshakeCompleted)
        #expect(pair.server.events.first == .handshakeCompleted)
        #expect(pair.client.connection.negotiatedVersion == .v1_3)
        #expect(pair.client.connection.isResumed == false)
        #expect(pair.client.connection.peerCertificateChain.count == 1)

        pair.client.outgoing = Array("ping from the client".utf8)
        pair.server.outgoing = Array("pong from the server".utf8)
        pair.client.flushOutgoing()
        pair.server.flushOutgoing()
        pair.run()
        #expect(String(decoding: pair.server.received, as: UTF8.self) == "ping from the client")
        #expect(String(decoding: pair.client.received, as: UTF8.self) == "pong from the server")
    }

    /// The client prefers X25519 and generates a key share for it alone (GnuTLS's default also
    /// generates a P-256 one, thrown away when the server takes X25519); the server takes it.
    @Test func clientSendsOneX25519KeyShareAndTheServerTakesIt() throws {
        let pair = try TLSPair(client: TLSFixtures.client(), server: TLSFixtures.server())
        let offered = try #require(ClientHelloGroups(firstRecord: firstFlight(of: pair.client)))
        #expect(offered.keyShares == [ClientHelloGroups.x25519])
        #expect(offered.supported.prefix(2) == [ClientHelloGroups.x25519, ClientHelloGroups.secp256r1])
        pair.run()
        #expect(pair.client.error == nil && pair.server.error == nil)
        #expect(pair.client.connection.keyExchangeGroup == "X25519")
        #expect(pair.server.connection.keyExchangeGroup == "X25519")
    }

    /// A server without X25519 asks for P-256 (HelloRetryRequest); the client sends that share
    /// and the handshake completes, with data both ways.
    @Test func serverWithoutX25519GetsItsGroupAfterARetry() throws {
        let pair = try TLSPair(client: TLSFixtures.client(), server: TLSFixtures.server())
        #expect(gnutls_priority_set_direct(pair.server.connection.session, "NORMAL:-GROUP-ALL:+GROUP-SECP256R1", nil) == 0)
        pair.run()
        #expect(pair.client.error == nil && pair.server.error == nil)
        #expect(pair.client.connection.isHandshakeComplete)
        #expect(pair.client.connection.keyExchangeGroup == "SECP256R1")
        pair.client.outgoing = Array("after a retry".utf8)
        pair.client.flushOutgoing()
        pair.run()
        #expect(String(decoding: pair.server.received, as: UTF8.self) == "after a retry")
    }

    /// The client's first flight as it would go on the wire (left in place).
    private func firstFlight(of client: TLSEnd) -> [UInt8] {
        client.process()
        var flight: [UInt8] = []
        _ = client.connection.withPendingCiphertext { bytes in
            flight = Array(bytes)
            return 0
        }
        return flight
    }

    @Test func alpnIsAgreedInTheServersPreferenceOrder() throws {
        let pair = try TLSPair(
            client: TLSFixtures.client(alpn: ["h2", "http/1.1"]), server: TLSFixtures.server(alpn: ["http/1.1", "h2"]))
        pair.run()
        #expect(pair.client.connection.negotiatedALPN == "http/1.1")
        #expect(pair.server.connection.negotiatedALPN == "http/1.1")
    }

    @Test func alpnMismatchFailsBothEnds() throws {
        let pair = try TLSPair(client: TLSFixtures.client(alpn: ["h2", "spdy"]), server: TLSFixtures.server(alpn: ["echo"]))
        pair.run()
        #expect(pair.server.error == .alpnMismatch(offered: ["h2", "spdy"]))
        #expect(pair.client.error == .alpnMismatch(offered: ["h2", "spdy"]))
        #expect(!pair.client.connection.isHandshakeComplete)
    }

    @Test func clientWithoutALPNIsAccepted() throws {
        let pair = try TLSPair(client: TLSFixtures.client(alpn: []), server: TLSFixtures.server(alpn: ["echo"]))
        pair.run()
        #expect(pair.server.error == nil)
        #expect(pair.client.connection.isHandshakeComplete)
        #expect(pair.server.connection.negotiatedALPN == nil)
    }

    @Test func maximumVersionForcesTLS12() throws {
        let pair = try TLSPair(
            client: TLSFixtures.client { $0.maximumVersion = .v1_2 }, server: TLSFixtures.server())
        pair.run()
        #expect(pair.client.error == nil)
        #expect(pair.client.connection.negotiatedVersion == .v1_2)
        #expect(pair.server.connection.negotiatedVersion == .v1_2)
        #expect(pair.client.connection.negotiatedALPN == "echo")
    }

    @Test func minimumVersionForcesTLS13OnTheServer() throws {
        let pair = try TLSPair(client: TLSFixtures.client(), server: TLSFixtures.server { $0.minimumVersion = .v1_3 })
        pair.run()
        #expect(pair.client.connection.negotiatedVersion == .v1_3)
    }

    @Test func versionMismatchFailsBothEnds() throws {
        let pair = try TLSPair(
            client: TLSFixtures.client { $0.maximumVersion = .v1_2 }, server: TLSFixtures.server { $0.minimumVersion = .v1_3 })
        pair.run()
        #expect(pair.server.error == .protocolVersionMismatch)
        #expect(pair.client.error == .protocolVersionMismatch)
    }

    @Test func configurationErrorsAreClear() throws {
        #expect(throws: TLSError.configuration("minimumVersion TLS 1.3 is above maximumVersion TLS 1.2")) {
            try TLSFixtures.client { $0.minimumVersion = .v1_3; $0.maximumVersion = .v1_2 }
        }
        #expect(throws: TLSError.configuration("SPKI pins are SHA-256 digests (32 bytes); got 3 bytes")) {
            try TLSFixtures.client { $0.verification.pinnedSPKISHA256 = [[1, 2, 3]] }
        }
        #expect(throws: TLSError.self) { try TLSFixtures.server(certificate: "missing") }
        #expect(throws: TLSError.self) { try TLSFixtures.server { $0.earlyDataEnabled = true; $0.maximumVersion = .v1_2 } }
        #expect(throws: TLSError.self) { try TLSFixtures.client { $0.certificateChainFile = Fixtures.path("client.pem") } }
    }

    @Test func sendBeforeTheHandshakeIsRefused() throws {
        let connection = try TLSConnection.client(context: TLSFixtures.client(), serverName: "localhost")
        #expect(throws: TLSError.self) { try [UInt8](repeating: 0, count: 4).withUnsafeBytes { try connection.send($0) } }
    }
}

extension TLSHandshakeTests {
    @Test func versionMismatchTheOtherWayFailsBothEnds() throws {
        let pair = try TLSPair(
            client: TLSFixtures.client { $0.minimumVersion = .v1_3 }, server: TLSFixtures.server { $0.maximumVersion = .v1_2 })
        pair.run()
        #expect(pair.server.error == .protocolVersionMismatch)
        #expect(pair.client.error == .protocolVersionMismatch)
    }

    @Test func alertNamesComeFromGnuTLS() {
        #expect(tlsAlertName(42) == "bad_certificate")
        #expect(tlsAlertName(48) == "unknown_ca")
        #expect(tlsAlertName(250) == "alert 250")
    }
}

extension TLSConnection {
    /// The key exchange group GnuTLS negotiated ("X25519", "SECP256R1"), nil before.
    fileprivate var keyExchangeGroup: String? {
        gnutls_group_get_name(gnutls_group_get(session)).map { String(cString: $0) }
    }
}
