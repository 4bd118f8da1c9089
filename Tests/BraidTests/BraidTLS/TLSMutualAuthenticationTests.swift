import Testing
import BraidTLS

/// Client certificates: required, optional, missing, untrusted.
@Suite struct TLSMutualAuthenticationTests {
    func handshake(
        clientCertificate: String?, authentication: TLSPeerAuthentication, version: TLSVersion = .v1_3
    ) throws -> TLSPair {
        let client = try TLSFixtures.client {
            if let clientCertificate {
                $0.certificateChainFile = Fixtures.path("\(clientCertificate).pem")
                $0.privateKeyFile = Fixtures.path("\(clientCertificate)-key.pem")
            }
            $0.maximumVersion = version
        }
        let server = try TLSFixtures.server {
            $0.peerAuthentication = authentication
            if authentication != .none { $0.clientCertificateAuthorityFile = Fixtures.caFile }
        }
        let pair = try TLSPair(client: client, server: server)
        pair.run()
        return pair
    }

    @Test(arguments: [TLSVersion.v1_3, .v1_2])
    func requiredCertificateIsVerifiedAndVisible(version: TLSVersion) throws {
        let pair = try handshake(clientCertificate: "client", authentication: .required, version: version)
        #expect(pair.server.error == nil)
        #expect(pair.client.error == nil)
        #expect(pair.server.connection.isHandshakeComplete)
        #expect(pair.server.connection.peerCertificateChain.count == 1)
    }

    @Test func requiredButMissingFailsBothEnds() throws {
        let pair = try handshake(clientCertificate: nil, authentication: .required)
        #expect(pair.server.error == .certificateRejected(.missing))
        #expect(pair.client.error == .peerAlert(code: 116, name: "certificate_required"))
    }

    @Test func requiredButMissingOverTLS12FailsBothEnds() throws {
        let pair = try handshake(clientCertificate: nil, authentication: .required, version: .v1_2)
        #expect(pair.server.error == .certificateRejected(.missing))
        #expect(pair.client.error == .peerAlert(code: 40, name: "handshake_failure"))
    }

    @Test func optionalAndMissingIsAccepted() throws {
        let pair = try handshake(clientCertificate: nil, authentication: .optional)
        #expect(pair.server.error == nil)
        #expect(pair.client.connection.isHandshakeComplete)
        #expect(pair.server.connection.peerCertificateChain.isEmpty)
    }

    @Test func optionalAndPresentedIsVerified() throws {
        let pair = try handshake(clientCertificate: "client", authentication: .optional)
        #expect(pair.server.connection.isHandshakeComplete)
        #expect(pair.server.connection.peerCertificateChain.count == 1)
    }

    @Test func untrustedClientCertificateFailsBothEnds() throws {
        let pair = try handshake(clientCertificate: "untrusted-client", authentication: .required)
        #expect(pair.server.error == .certificateRejected(.untrusted))
        #expect(pair.client.error == .peerAlert(code: 48, name: "unknown_ca"))
    }

    @Test func serverWithoutAuthenticationIgnoresAClientIdentity() throws {
        let pair = try handshake(clientCertificate: "client", authentication: .none)
        #expect(pair.server.connection.isHandshakeComplete)
        #expect(pair.server.connection.peerCertificateChain.isEmpty)
    }
}
