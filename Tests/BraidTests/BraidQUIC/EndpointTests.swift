import Testing
@testable import BraidQUIC

@Suite(.ownThread) struct EndpointTests {
    @Test func retryValidatesAddressThenConnects() throws {
        let server = try Fixtures.server { $0.retry = .always }
        let network = SimulatedNetwork(server: server)
        let client = try network.connect(Fixtures.client())
        #expect(network.run { client.isEstablished })
        #expect(server.retriesSent == 1)
        #expect(server.connectionCount == 1)
    }

    @Test func newTokenSkipsRetryNextTime() throws {
        let server = try Fixtures.server { $0.retry = .always }
        let network = SimulatedNetwork(server: server)
        let context = try Fixtures.client()
        var ticket: QUICResumptionTicket?
        network.onEvent = { connection, event in
            if case .resumptionTicket(let issued) = event, connection.role == .client { ticket = issued }
        }
        let first = try network.connect(context)
        #expect(network.run { first.isEstablished && ticket?.token.isEmpty == false })
        #expect(server.retriesSent == 1)
        let second = try network.connect(context, resumption: ticket)
        #expect(network.run { second.isEstablished })
        #expect(server.retriesSent == 1, "the NEW_TOKEN token must validate the address without another Retry")
    }

    @Test func unknownVersionGetsVersionNegotiation() throws {
        let server = try Fixtures.server()
        // A long-header Initial-sized datagram with version 0x0a0a0a0a (reserved).
        var packet = [UInt8](repeating: 0, count: 1200)
        packet[0] = 0xc0
        packet[1...4] = [0x0a, 0x0a, 0x0a, 0x0a]
        packet[5] = 8
        packet[6..<14] = [1, 2, 3, 4, 5, 6, 7, 8]
        packet[14] = 4
        packet[15..<19] = [9, 9, 9, 9]
        let path = QUICPath(local: QUICAddress(ip: "127.0.0.1", port: 4433)!, remote: QUICAddress(ip: "127.0.0.9", port: 9)!)
        #expect(server.receive(datagram: packet, path: path, now: QUICInstant(nanoseconds: 1)) == nil)
        let replies = server.pollEndpointTransmits()
        #expect(replies.count == 1)
        #expect(server.versionNegotiationsSent == 1)
        // Version Negotiation: long header, version 0, then DCID = the client's SCID.
        #expect(Array(replies[0].bytes[1...4]) == [0, 0, 0, 0])
        #expect(replies[0].bytes[5] == 4 && Array(replies[0].bytes[6..<10]) == [9, 9, 9, 9])
        #expect(replies[0].path.remote == path.remote)
        // Too short to be an Initial: no answer (anti-amplification).
        #expect(server.receive(datagram: Array(packet.prefix(100)), path: path, now: QUICInstant(nanoseconds: 2)) == nil)
        #expect(server.pollEndpointTransmits().isEmpty)
    }

    @Test func restartedServerResetsStaleClientStatelessly() throws {
        let secret = pattern(seed: 1, count: 32)
        let network = SimulatedNetwork(server: try Fixtures.server { $0.staticSecret = secret })
        let client = try network.connect(Fixtures.client())
        #expect(network.run { client.isEstablished && client.handshakeConfirmed })
        network.settle()
        // The server restarts with the same static secret but no connection state.
        let restarted = try Fixtures.server { $0.staticSecret = secret }
        network.server = restarted
        let id = try client.openStream(bidirectional: true)
        try client.send(streamID: id, bytes: [1, 2, 3])
        #expect(network.run { client.isClosed })
        #expect(client.closeReason == .statelessReset)
        #expect(restarted.statelessResetsSent >= 1)
    }

    @Test func garbageNeverCrashesTheEndpoint() throws {
        let server = try Fixtures.server()
        var random = SeededRandom(seed: 5)
        let path = QUICPath(local: QUICAddress(ip: "127.0.0.1", port: 4433)!, remote: QUICAddress(ip: "127.0.0.9", port: 9)!)
        for round in 0..<2000 {
            let length = Int(random.next() % 1500)
            var bytes = (0..<length).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            if round % 3 == 0, !bytes.isEmpty { bytes[0] |= 0xc0 }  // long header
            if round % 3 == 1, bytes.count > 5 { bytes[1...4] = [0, 0, 0, 1] }  // QUIC v1
            _ = server.receive(datagram: bytes, path: path, now: QUICInstant(nanoseconds: UInt64(round) * 1000))
            _ = server.pollEndpointTransmits()
        }
        #expect(server.connectionCount == 0)
        #expect(server.droppedDatagrams > 0)
    }
}
