import Testing
import BraidTLS

/// Server certificate checks, with the error each end sees when one fails.
@Suite struct TLSCertificateTests {
    func handshake(
        certificate: String = "server", serverName: String = "localhost",
        configure: (inout TLSClientConfiguration) -> Void = { _ in }
    ) throws -> TLSPair {
        let pair = try TLSPair(
            client: TLSFixtures.client(configure: configure), server: TLSFixtures.server(certificate: certificate),
            serverName: serverName)
        pair.run()
        return pair
    }

    @Test func untrustedCertificateFailsBothEnds() throws {
        let pair = try handshake(certificate: "untrusted")
        #expect(pair.client.error == .certificateRejected(.untrusted))
        #expect(pair.server.error == .peerAlert(code: 48, name: "unknown_ca"))
    }

    @Test func wrongNameFailsBothEnds() throws {
        let pair = try handshake(certificate: "wrong-name")
        #expect(pair.client.error == .certificateRejected(.nameMismatch(expected: "localhost")))
        #expect(pair.server.error == .peerAlert(code: 42, name: "bad_certificate"))
    }

    @Test func pinMismatchFailsBothEnds() throws {
        let otherKey = try spkiSHA256Pin(ofPEMCertificateFile: Fixtures.path("wrong-name.pem"))
        let pair = try handshake { $0.verification.pinnedSPKISHA256 = [otherKey] }
        #expect(pair.client.error == .certificateRejected(.pinMismatch))
        #expect(pair.server.error == .peerAlert(code: 42, name: "bad_certificate"))
    }

    @Test func matchingPinIsAccepted() throws {
        let pin = try spkiSHA256Pin(ofPEMCertificateFile: Fixtures.path("server.pem"))
        let pair = try handshake { $0.verification.pinnedSPKISHA256 = [pin] }
        #expect(pair.client.error == nil)
        #expect(pair.client.connection.isHandshakeComplete)
    }

    @Test func systemTrustDoesNotTrustTheTestCA() throws {
        let pair = try handshake { $0.verification = TLSCertificateVerification(trustRoots: .system) }
        #expect(pair.client.error == .certificateRejected(.untrusted))
    }

    @Test func ipLiteralIsCheckedAgainstTheCertificate() throws {
        let accepted = try handshake(serverName: "127.0.0.1")
        #expect(accepted.client.connection.isHandshakeComplete)
        let rejected = try handshake(certificate: "wrong-name", serverName: "127.0.0.1")
        #expect(rejected.client.error == .certificateRejected(.nameMismatch(expected: "127.0.0.1")))
    }

    @Test func insecureSkipAcceptsAnUntrustedCertificate() throws {
        let pair = try handshake(certificate: "untrusted") { $0.verification = .insecureAcceptAnything }
        #expect(pair.client.error == nil)
        #expect(pair.server.connection.isHandshakeComplete)
    }

    @Test func errorsSayWhatToDo() {
        #expect(TLSError.certificateRejected(.untrusted).description.contains("Trust its CA"))
        #expect(TLSError.truncated.description.contains("close_notify"))
        #expect(TLSError.peerAlert(code: 116, name: "certificate_required").description.contains("client identity"))
    }
}
