import BraidCore
import CBraid
import Testing
@testable import BraidQUIC

/// Handshake outcomes: success, ALPN, certificate verification and pinning, on both ends.
@Suite struct HandshakeTests {
    /// Runs one client against `server` until the client is established or closed, and
    /// returns both sides' close reasons (nil = still open).
    func handshake(client context: QUICClientContext, server: QUICServerEndpoint, serverName: String = "localhost")
        throws -> (client: QUICConnection, server: QUICConnection?, network: SimulatedNetwork)
    {
        let network = SimulatedNetwork(server: server)
        let client = try network.connect(context, serverName: serverName)
        var serverSide: QUICConnection?
        network.onEvent = { connection, _ in if connection.role == .server { serverSide = connection } }
        network.run(for: .seconds(20)) {
            client.isEstablished && serverSide?.isEstablished == true || client.isClosed
        }
        // Let the peer process the CONNECTION_CLOSE, if any.
        network.settle()
        return (client, serverSide ?? network.serverConnections.first, network)
    }

    @Test func completesWithALPNAndVerifiedCertificate() throws {
        let (client, server, network) = try handshake(client: Fixtures.client(), server: Fixtures.server())
        #expect(client.isEstablished)
        #expect(client.negotiatedALPN == "echo")
        #expect(server?.isEstablished == true)
        #expect(server?.negotiatedALPN == "echo")
        // 1-RTT handshake: ready after about one round trip (20 ms) on the 10 ms one-way wire.
        #expect(client.statistics.smoothedRTT >= .milliseconds(20))
        #expect(network.server!.connectionCount == 1)
    }

    /// The client's ClientHello prefers X25519 and carries a key share for it alone; the
    /// server takes it.
    @Test func clientSendsOneX25519KeyShare() throws {
        let network = SimulatedNetwork(server: try Fixtures.server())
        let client = try network.connect(try Fixtures.client())
        ClientHelloCapture.install(on: client.session)
        network.run(for: .seconds(20)) { client.isEstablished || client.isClosed }
        #expect(client.isEstablished)
        let offered = try #require(ClientHelloCapture.taken().flatMap(ClientHelloGroups.init(handshakeMessage:)))
        #expect(offered.keyShares == [ClientHelloGroups.x25519])
        #expect(offered.supported.first == ClientHelloGroups.x25519)
        #expect(gnutls_group_get_name(gnutls_group_get(client.session)).map { String(cString: $0) } == "X25519")
    }

    /// A server connection's handshake is stamped from the Initial its endpoint made it for
    /// to the handshake's completion (what the listener's handshake timer records).
    @Test func aServersHandshakeIsStampedFromTheFirstInitial() throws {
        let (client, server, _) = try handshake(client: Fixtures.client(), server: Fixtures.server())
        let serverSide = try #require(server)
        let start = try #require(serverSide.firstPacketTime)
        let end = try #require(serverSide.handshakeCompletedTime)
        // The client's Finished arrives a round trip (20 ms on the 10 ms one-way wire) after
        // the server's first flight.
        #expect(end - start >= .milliseconds(20))
        #expect(client.handshakeCompletedTime != nil)
        #expect(client.firstPacketTime == nil)
    }

    @Test func acceptsIPLiteralWhenCertificateHasIPAddress() throws {
        let (client, _, _) = try handshake(client: Fixtures.client(), server: Fixtures.server(), serverName: "127.0.0.1")
        #expect(client.isEstablished)
    }

    @Test func alpnMismatchFailsOnBothSides() throws {
        let (client, server, _) = try handshake(client: Fixtures.client(alpn: ["nope"]), server: Fixtures.server())
        #expect(client.closeReason == .alpnMismatch(offered: ["nope"]))
        #expect(server?.closeReason == .alpnMismatch(offered: ["echo"]))
        #expect(client.isClosed && server?.isClosed == true)
    }

    @Test func untrustedCertificateIsRejected() throws {
        let (client, server, _) = try handshake(client: Fixtures.client(), server: Fixtures.server(certificate: "untrusted"))
        #expect(client.closeReason == .certificateRejected(.untrusted))
        expectPeerRejectedCertificate(server?.closeReason)
        #expect(client.closeReason!.description.contains("not signed by a trusted certificate authority"))
    }

    @Test func systemTrustDoesNotTrustTheTestCA() throws {
        let context = try Fixtures.client { $0.verification = QUICCertificateVerification(trustRoots: .system) }
        let (client, _, _) = try handshake(client: context, server: Fixtures.server())
        #expect(client.closeReason == .certificateRejected(.untrusted))
    }

    @Test func wrongHostNameIsRejected() throws {
        let (client, server, _) = try handshake(client: Fixtures.client(), server: Fixtures.server(certificate: "wrong-name"))
        #expect(client.closeReason == .certificateRejected(.nameMismatch(expected: "localhost")))
        expectPeerRejectedCertificate(server?.closeReason)
    }

    @Test func pinMismatchIsRejectedEvenWithTrustedChain() throws {
        let otherKeyPin = try spkiSHA256Pin(ofPEMCertificateFile: Fixtures.path("wrong-name.pem"))
        let context = try Fixtures.client { $0.verification.pinnedSPKISHA256 = [otherKeyPin] }
        let (client, server, _) = try handshake(client: context, server: Fixtures.server())
        #expect(client.closeReason == .certificateRejected(.pinMismatch))
        expectPeerRejectedCertificate(server?.closeReason)
    }

    @Test func matchingPinIsAccepted() throws {
        let pin = try spkiSHA256Pin(ofPEMCertificateFile: Fixtures.path("server.pem"))
        let context = try Fixtures.client { $0.verification.pinnedSPKISHA256 = [pin] }
        let (client, _, _) = try handshake(client: context, server: Fixtures.server())
        #expect(client.isEstablished)
    }

    @Test func explicitInsecureOptOutAcceptsUntrustedCertificate() throws {
        let context = try Fixtures.client { $0.verification = .insecureAcceptAnything }
        let (client, _, _) = try handshake(client: context, server: Fixtures.server(certificate: "untrusted"))
        #expect(client.isEstablished)
    }

    @Test func badConfigurationIsAClearError() throws {
        #expect(throws: QUICError.self) { try Fixtures.server(certificate: "missing") }
        #expect(throws: QUICError.self) { try Fixtures.client { $0.verification.trustRoots = .certificateAuthorityFile("/nonexistent.pem") } }
        #expect(throws: QUICError.self) { try Fixtures.client { $0.verification.pinnedSPKISHA256 = [[1, 2, 3]] } }
        #expect(throws: QUICError.self) { try Fixtures.client(alpn: []) }
    }

    @Test func noServerMeansHandshakeTimeout() throws {
        let network = SimulatedNetwork(server: nil)
        let context = try Fixtures.client { $0.transport.handshakeTimeout = .seconds(3) }
        let client = try network.connect(context)
        let start = network.now
        network.run(for: .seconds(30)) { client.isTerminated }
        #expect(client.closeReason == .handshakeTimeout)
        #expect(network.now - start >= .seconds(3))
        #expect(network.now - start < .seconds(4))
    }

    private func expectPeerRejectedCertificate(_ reason: QUICError?, sourceLocation: SourceLocation = #_sourceLocation) {
        guard case .peerTLSAlert(let code) = reason else {
            Issue.record("expected a TLS alert from the client, got \(String(describing: reason))", sourceLocation: sourceLocation)
            return
        }
        // bad_certificate .. unknown_ca: the alerts a client sends when it rejects a certificate.
        #expect((42...48).contains(code), "alert \(code)", sourceLocation: sourceLocation)
    }
}

/// Records the ClientHello a session sends (a GnuTLS handshake hook, which replaces the
/// session's own: for handshake-only tests).
private enum ClientHelloCapture {
    private static let message = Locked<[UInt8]?>(nil)

    static func install(on session: gnutls_session_t) {
        gnutls_handshake_set_hook_function(session, GNUTLS_HANDSHAKE_CLIENT_HELLO.rawValue, GNUTLS_HOOK_POST) { _, _, _, incoming, datum in
            guard incoming == 0, let datum = datum?.pointee, let data = datum.data else { return 0 }
            let body = Array(UnsafeBufferPointer(start: data, count: Int(datum.size)))
            // The hook gets the message without its header: put it back for the parser.
            let header: [UInt8] = [1, UInt8(body.count >> 16 & 0xFF), UInt8(body.count >> 8 & 0xFF), UInt8(body.count & 0xFF)]
            ClientHelloCapture.message.withLock { $0 = header + body }
            return 0
        }
    }

    static func taken() -> [UInt8]? { message.withLock { $0 } }
}
