import CBraid
import Testing
@testable import BraidTLS

/// DTLS client and server engines against each other in memory: the cookie exchange,
/// certificates, messages as records, loss and reordering, the MTU and bounded queues.
@Suite struct DTLSConnectionTests {
    @Test func handshakeCompletesAfterACookieAndMessagesFlowBothWays() throws {
        let pair = try DTLSPair(client: DTLSFixtures.client(), server: DTLSFixtures.server())
        pair.run()
        #expect(pair.clientError == nil && pair.serverError == nil)
        #expect(pair.cookieReplies == 1)
        #expect(pair.clientEvents == [.handshakeCompleted])
        #expect(pair.serverEvents == [.handshakeCompleted])
        #expect(pair.client.negotiatedALPN == "echo")
        #expect(gnutls_protocol_get_version(pair.client.session) == GNUTLS_DTLS1_2)
        #expect(pair.client.retransmissionTimeout == nil)
        let server = try #require(pair.server)

        for message in ["one", "two", "three"] {
            #expect(try Array(message.utf8).withUnsafeBytes { try pair.client.send($0) })
        }
        // One message, one datagram.
        #expect(pair.client.pendingDatagramCount == 3)
        #expect(try Array("back".utf8).withUnsafeBytes { try server.send($0) })
        pair.run()
        #expect(pair.serverReceived.map { String(decoding: $0, as: UTF8.self) } == ["one", "two", "three"])
        #expect(pair.clientReceived.map { String(decoding: $0, as: UTF8.self) } == ["back"])
    }

    /// A hello without a cookie, or with one made for another address, gets a
    /// HelloVerifyRequest smaller than itself and no state; anything else is dropped.
    @Test func cookieCheckKeepsNoStateForUnprovenAddresses() throws {
        let context = try DTLSFixtures.server()
        let client = try DTLSConnection.client(context: DTLSFixtures.client(), serverName: "localhost")
        _ = try client.process { _ in }
        let hello = try #require(client.popDatagram())
        let address: [UInt8] = [192, 0, 2, 1, 0, 53]
        guard case .reply(let verifyRequest) = hello.withUnsafeBytes({ context.checkCookie(in: $0, from: address) }) else {
            Issue.record("a hello without a cookie must get a HelloVerifyRequest")
            return
        }
        #expect(verifyRequest.count < hello.count)
        verifyRequest.withUnsafeBytes { _ = client.receiveDatagram($0) }
        _ = try client.process { _ in }
        let helloWithCookie = try #require(client.popDatagram())
        guard case .verified = helloWithCookie.withUnsafeBytes({ context.checkCookie(in: $0, from: address) }) else {
            Issue.record("the hello carrying the cookie must pass")
            return
        }
        // The same hello from a spoofed source: the cookie names the real one.
        guard case .reply = helloWithCookie.withUnsafeBytes({ context.checkCookie(in: $0, from: [198, 51, 100, 7, 0, 53]) }) else {
            Issue.record("a cookie made for another address must not pass")
            return
        }
        // A cookie from another server context (another secret) does not pass either.
        guard case .reply = helloWithCookie.withUnsafeBytes({ try! DTLSFixtures.server().checkCookie(in: $0, from: address) }) else {
            Issue.record("a cookie from another context must not pass")
            return
        }
        #expect([UInt8](repeating: 0x17, count: 40).withUnsafeBytes { context.checkCookie(in: $0, from: address) } == .drop)
        #expect([UInt8]().withUnsafeBytes { context.checkCookie(in: $0, from: address) } == .drop)
    }

    @Test func untrustedServerCertificateFailsBothEnds() throws {
        let pair = try DTLSPair(client: DTLSFixtures.client(), server: DTLSFixtures.server(certificate: "untrusted"))
        pair.run()
        #expect(pair.clientError == .certificateRejected(.untrusted))
        #expect(pair.serverError == .peerAlert(code: 48, name: "unknown_ca"))
    }

    @Test func wrongServerNameFails() throws {
        let pair = try DTLSPair(client: DTLSFixtures.client(), server: DTLSFixtures.server(certificate: "wrong-name"))
        pair.run()
        #expect(pair.clientError == .certificateRejected(.nameMismatch(expected: "localhost")))
    }

    @Test func serverRequiringAClientCertificateRefusesAClientWithout() throws {
        let server = try DTLSFixtures.server {
            $0.peerAuthentication = .required
            $0.clientCertificateAuthorityFile = Fixtures.caFile
        }
        let pair = try DTLSPair(client: DTLSFixtures.client(), server: server)
        pair.run()
        #expect(pair.serverError == .certificateRejected(.missing))
        #expect(pair.clientError != nil)
    }

    @Test func alpnMismatchFails() throws {
        let pair = try DTLSPair(client: DTLSFixtures.client(alpn: ["h2"]), server: DTLSFixtures.server(alpn: ["echo"]))
        pair.run()
        #expect(pair.clientError == .alpnMismatch(offered: ["h2"]))
        #expect(pair.serverError == .alpnMismatch(offered: ["h2"]))
    }

    /// The largest message fits one datagram of the MTU; one byte more is refused, unsent.
    @Test func messagesLargerThanOneDatagramAreRefused() throws {
        let pair = try DTLSPair(client: DTLSFixtures.client(), server: DTLSFixtures.server(), mtu: 600)
        pair.run()
        #expect(pair.client.isHandshakeComplete)
        let maximum = pair.client.maximumMessageSize
        #expect(maximum > 400 && maximum < 600)
        let largest = [UInt8](repeating: 7, count: maximum)
        #expect(try largest.withUnsafeBytes { try pair.client.send($0) })
        #expect(throws: TLSError.messageTooLarge(size: maximum + 1, maximum: maximum)) {
            try [UInt8](repeating: 7, count: maximum + 1).withUnsafeBytes { try pair.client.send($0) }
        }
        #expect(pair.client.pendingDatagramCount == 1)
        pair.run()  // checks every datagram against the MTU
        #expect(pair.serverReceived == [largest])
    }

    /// The small MTU splits the server's certificate flight over several datagrams; losing the
    /// first of each end's flights costs retransmissions, not the handshake.
    @Test func handshakeSurvivesLostDatagrams() throws {
        let pair = try DTLSPair(client: DTLSFixtures.client(), server: DTLSFixtures.server(), mtu: 300)
        // Client: the hello carrying the cookie and the first of its final flight; server: the
        // first datagram of its first flight.
        pair.loses = { role, index in role == .client ? index == 1 || index == 2 : index == 0 }
        pair.runThroughLoss()
        let lossless = try DTLSPair(client: DTLSFixtures.client(), server: DTLSFixtures.server(), mtu: 300)
        lossless.run()
        #expect(pair.wire.count > lossless.wire.count, "lost datagrams must have been sent again")
        #expect(pair.clientError == nil && pair.serverError == nil)
        #expect(pair.client.isHandshakeComplete)
        #expect(pair.server?.isHandshakeComplete == true)
        #expect(try Array("after loss".utf8).withUnsafeBytes { try pair.client.send($0) })
        pair.run()
        #expect(pair.serverReceived == [Array("after loss".utf8)])
    }

    @Test func handshakeSurvivesReorderedFlights() throws {
        let pair = try DTLSPair(client: DTLSFixtures.client(), server: DTLSFixtures.server(), mtu: 300)
        pair.reverses = true
        pair.runThroughLoss()
        #expect(pair.clientError == nil && pair.serverError == nil)
        #expect(pair.client.isHandshakeComplete)
        #expect(pair.server?.isHandshakeComplete == true)
        #expect(pair.wire.filter { $0.0 == .server }.count > 3, "the server's flight should span several datagrams")
    }

    /// A forged or replayed datagram is dropped without failing the connection.
    @Test func forgedAndReplayedDatagramsAreDropped() throws {
        let pair = try DTLSPair(client: DTLSFixtures.client(), server: DTLSFixtures.server())
        pair.run()
        let server = try #require(pair.server)
        #expect(try Array("first".utf8).withUnsafeBytes { try pair.client.send($0) })
        let record = try #require(pair.client.popDatagram())
        var forged = record
        forged[forged.count - 1] ^= 0x55
        forged.withUnsafeBytes { _ = server.receiveDatagram($0) }
        record.withUnsafeBytes { _ = server.receiveDatagram($0) }
        record.withUnsafeBytes { _ = server.receiveDatagram($0) }
        pair.run()
        #expect(pair.serverError == nil)
        #expect(pair.serverReceived == [Array("first".utf8)])
    }

    /// A flood beyond the inbox is dropped, not buffered.
    @Test func inboxIsBounded() throws {
        let client = try DTLSConnection.client(context: DTLSFixtures.client(), serverName: "localhost")
        let junk = [UInt8](repeating: 0x16, count: 100)
        let accepted = (0..<(DTLSConnection.inboxLimit + 10)).filter { _ in junk.withUnsafeBytes { client.receiveDatagram($0) } }
        #expect(accepted.count == DTLSConnection.inboxLimit)
        #expect(client.pendingInboundDatagramCount == DTLSConnection.inboxLimit)
    }

    @Test func closeNotifyReachesThePeer() throws {
        let pair = try DTLSPair(client: DTLSFixtures.client(), server: DTLSFixtures.server())
        pair.run()
        pair.client.close()
        pair.run()
        #expect(pair.serverEvents.last == .peerClosed)
        #expect(throws: TLSError.invalidState("send after close")) {
            try [UInt8(1)].withUnsafeBytes { try pair.client.send($0) }
        }
    }

    @Test func sendBeforeTheHandshakeIsRefused() throws {
        let client = try DTLSConnection.client(context: DTLSFixtures.client(), serverName: "localhost")
        #expect(throws: TLSError.invalidState("send before the DTLS handshake completed")) {
            try [UInt8(1)].withUnsafeBytes { try client.send($0) }
        }
    }

    @Test func callerJudgesThePeerWhenAskedTo() throws {
        let pair = try DTLSPair(
            client: DTLSFixtures.client { $0.callerVerifiesPeer = true }, server: DTLSFixtures.server(certificate: "untrusted"))
        pair.run()
        #expect(pair.clientEvents == [.peerAwaitingVerdict])
        #expect(pair.client.peerCertificateChain.count == 1)
        pair.client.acceptPeer()
        pair.run()
        #expect(pair.clientEvents == [.peerAwaitingVerdict, .handshakeCompleted])
    }
}
