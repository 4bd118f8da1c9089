import Testing
@testable import BraidQUIC

@Suite struct DatagramTests {
    func established(conditions: LinkConditions = LinkConditions(), seed: UInt64 = 1)
        throws -> (SimulatedNetwork, QUICConnection, [(bytes: [UInt8], early: Bool)])
    {
        let network = SimulatedNetwork(seed: seed, server: try Fixtures.server())
        network.conditions = conditions
        let client = try network.connect(Fixtures.client())
        #expect(network.run { client.isEstablished })
        return (network, client, [])
    }

    /// Datagram `index`: 8-byte index, then a pattern derived from it.
    func datagram(_ index: Int, size: Int = 1000) -> [UInt8] {
        withUnsafeBytes(of: UInt64(index).bigEndian, Array.init) + pattern(seed: UInt64(index), count: size - 8)
    }

    @Test func datagramsArriveIntact() throws {
        let (network, client, _) = try established()
        var received: [[UInt8]] = []
        network.onEvent = { connection, event in
            if connection.role == .server, case .datagramReceived(let bytes, let early) = event {
                #expect(!early)
                received.append(bytes)
            }
        }
        for index in 0..<200 { try client.sendDatagram(datagram(index)) }
        #expect(network.run { received.count == 200 })
        #expect(Set(received) == Set((0..<200).map { datagram($0) }))
    }

    // Several seeds: the losses fall on different packets (ACK-only flights included, which
    // once stalled both ends; see the datagram probe in QUICConnection).
    @Test(arguments: [77, 5, 2024] as [UInt64])
    func underLossSurvivorsAreIntactAndLossIsReported(seed: UInt64) throws {
        var conditions = LinkConditions()
        conditions.dropRate = 0.10
        let (network, client, _) = try established(conditions: conditions, seed: seed)
        var received: [[UInt8]] = []
        var acknowledged = Set<UInt64>()
        var lost = Set<UInt64>()
        network.onEvent = { connection, event in
            switch (connection.role, event) {
            case (.server, .datagramReceived(let bytes, _)): received.append(bytes)
            case (.client, .datagramAcknowledged(let id)): acknowledged.insert(id)
            case (.client, .datagramLost(let id)): lost.insert(id)
            default: break
            }
        }
        let count = 500
        for index in 0..<count { try client.sendDatagram(datagram(index)) }
        network.run(for: .seconds(30)) { acknowledged.count + lost.count == count }
        network.settle()
        let expected = Set((0..<count).map { datagram($0) })
        #expect(!received.isEmpty)
        #expect(received.allSatisfy { expected.contains($0) }, "a received datagram was altered")
        #expect(Set(received).count == received.count, "a datagram was delivered twice")
        #expect(received.count < count, "10% loss must lose some")
        #expect(!lost.isEmpty, "losses must be reported to the sender")
        #expect(acknowledged.count + lost.count == count, "acknowledged \(acknowledged.count), lost \(lost.count)")
        #expect(client.statistics.datagramsLost == UInt64(lost.count))
        #expect(acknowledged.isSubset(of: Set(0..<UInt64(count))))
    }

    @Test func oversizedDatagramIsAClearError() throws {
        let (_, client, _) = try established()
        let maximum = client.maxDatagramPayloadSize
        #expect(maximum > 1000 && maximum < 1452)
        #expect(throws: QUICError.datagramTooLarge(size: maximum + 1, maximum: maximum)) {
            try client.sendDatagram([UInt8](repeating: 0, count: maximum + 1))
        }
        try client.sendDatagram([UInt8](repeating: 0, count: maximum))
    }

    @Test func datagramsDisabledByPeerIsAClearError() throws {
        let network = SimulatedNetwork(server: try Fixtures.server { $0.transport.maxDatagramFrameSize = 0 })
        let client = try network.connect(Fixtures.client())
        #expect(network.run { client.isEstablished })
        #expect(throws: QUICError.datagramsNotSupported) { try client.sendDatagram([1, 2, 3]) }
    }
}

@Suite struct ResumptionTests {
    /// Connects once and returns the resumption ticket the server issued.
    func ticket(network: SimulatedNetwork, context: QUICClientContext) throws -> QUICResumptionTicket {
        var ticket: QUICResumptionTicket?
        network.onEvent = { connection, event in
            if case .resumptionTicket(let issued) = event, connection.role == .client { ticket = issued }
        }
        let first = try network.connect(context)
        #expect(network.run { first.isEstablished && ticket?.token.isEmpty == false })
        first.close(now: network.now)
        network.settle()
        return try #require(ticket)
    }

    @Test func resumedConnectionCarriesZeroRTTStreamDataFlaggedEarly() throws {
        let server = try Fixtures.server()
        let network = SimulatedNetwork(server: server)
        let context = try Fixtures.client()
        let ticket = try ticket(network: network, context: context)
        // The ticket survives a round trip through its byte form (a file-backed cache).
        let restored = try #require(QUICResumptionTicket(serialized: ticket.serialized()))
        #expect(restored == ticket)
        #expect(QUICResumptionTicket(serialized: Array(ticket.serialized().dropLast())) == nil)

        let sink = StreamSink()
        network.onEvent = { connection, event in
            if connection.role == .server, case .streamReadable(let id) = event { sink.drain(connection, stream: id) }
        }
        let client = try network.connect(context, resumption: restored)
        // Before any packet went out: the stream and its bytes go in 0-RTT.
        let id = try client.openStream(bidirectional: true)
        let request = pattern(seed: 99, count: 3000)
        try client.send(streamID: id, bytes: request, fin: true)
        var serverSide: QUICConnection? { network.serverConnections.last }
        #expect(network.run { serverSide.map { sink.isFinished($0, id) } ?? false })
        #expect(sink.bytes(serverSide!, id) == request)
        #expect(sink.earlyBytes[ObjectIdentifier(serverSide!)] == request.count, "server must see the bytes flagged as 0-RTT")
        #expect(network.run { client.isEstablished })
        #expect(client.earlyDataAccepted)
        #expect(serverSide!.earlyDataAccepted)
    }

    @Test func rejectedZeroRTTIsResentAfterHandshake() throws {
        let context = try Fixtures.client()
        // A ticket from one server endpoint means nothing to another (different ticket key).
        let ticket = try ticket(network: SimulatedNetwork(server: try Fixtures.server()), context: context)
        let network = SimulatedNetwork(server: try Fixtures.server())
        let sink = StreamSink()
        var rejected = false
        network.onEvent = { connection, event in
            if connection.role == .server, case .streamReadable(let id) = event { sink.drain(connection, stream: id) }
            if connection.role == .client, event == .earlyDataRejected { rejected = true }
        }
        let client = try network.connect(context, resumption: ticket)
        let id = try client.openStream(bidirectional: true)
        let request = pattern(seed: 5, count: 5000)
        try client.send(streamID: id, bytes: request, fin: true)
        var serverSide: QUICConnection? { network.serverConnections.last }
        #expect(network.run { serverSide.map { sink.isFinished($0, id) } ?? false })
        #expect(rejected)
        #expect(!client.earlyDataAccepted)
        #expect(sink.bytes(serverSide!, id) == request)
        #expect(sink.earlyBytes[ObjectIdentifier(serverSide!)] == nil)
    }

    /// Endpoints sharing `QUICServerKeys` (one server on several loops) accept each other's
    /// tickets: a client resumes with 0-RTT on whichever one the kernel hands it to.
    @Test func ticketFromOneEndpointResumesOnItsSibling() throws {
        let keys = try QUICServerKeys()
        let configuration = Fixtures.serverConfiguration()
        let first = try QUICServerEndpoint(configuration: configuration, keys: keys, connectionIDTag: 0)
        let second = try QUICServerEndpoint(configuration: configuration, keys: keys, connectionIDTag: 1)
        let context = try Fixtures.client()
        let ticket = try ticket(network: SimulatedNetwork(server: first), context: context)
        let network = SimulatedNetwork(server: second)
        let sink = StreamSink()
        network.onEvent = { connection, event in
            if connection.role == .server, case .streamReadable(let id) = event { sink.drain(connection, stream: id) }
        }
        let client = try network.connect(context, resumption: ticket)
        let id = try client.openStream(bidirectional: true)
        try client.send(streamID: id, bytes: [7, 8, 9], fin: true)
        var serverSide: QUICConnection? { network.serverConnections.last }
        #expect(network.run { serverSide.map { sink.isFinished($0, id) } ?? false })
        #expect(network.run { client.isEstablished })
        #expect(client.earlyDataAccepted)
        #expect(sink.earlyBytes[ObjectIdentifier(serverSide!)] == 3)
    }

    @Test func zeroRTTDisabledOnServerStillDeliversData() throws {
        let server = try Fixtures.server { $0.earlyDataEnabled = false }
        let network = SimulatedNetwork(server: server)
        let context = try Fixtures.client()
        let ticket = try ticket(network: network, context: context)
        let sink = StreamSink()
        network.onEvent = { connection, event in
            if connection.role == .server, case .streamReadable(let id) = event { sink.drain(connection, stream: id) }
        }
        let client = try network.connect(context, resumption: ticket)
        let id = try client.openStream(bidirectional: true)
        try client.send(streamID: id, bytes: [1, 2, 3], fin: true)
        var serverSide: QUICConnection? { network.serverConnections.last }
        #expect(network.run { serverSide.map { sink.isFinished($0, id) } ?? false })
        #expect(sink.bytes(serverSide!, id) == [1, 2, 3])
        #expect(!client.earlyDataAccepted)
    }
}

@Suite struct EndpointTests {
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
