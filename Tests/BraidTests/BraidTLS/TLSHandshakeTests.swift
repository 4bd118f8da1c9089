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
