import Testing
@testable import BraidQUIC

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

    /// Both ends free their GnuTLS session once nothing needs it (it is most of an idle
    /// connection's TLS memory): the server when the handshake completes, the client once the
    /// handshake is confirmed and it holds a ticket. That ticket still resumes with 0-RTT.
    @Test func tlsSessionsAreReleasedAfterTheHandshakeAndTheTicket() throws {
        let network = SimulatedNetwork(server: try Fixtures.server())
        let context = try Fixtures.client()
        var ticket: QUICResumptionTicket?
        network.onEvent = { connection, event in
            if case .resumptionTicket(let issued) = event, connection.role == .client { ticket = issued }
        }
        let client = try network.connect(context)
        #expect(network.run { client.isEstablished && client.session == nil })
        let issued = try #require(ticket)
        #expect(network.serverConnections.last?.session == nil)

        let sink = StreamSink()
        network.onEvent = { connection, event in
            if connection.role == .server, case .streamReadable(let id) = event { sink.drain(connection, stream: id) }
        }
        let resumed = try network.connect(context, resumption: issued)
        let id = try resumed.openStream(bidirectional: true)
        try resumed.send(streamID: id, bytes: [1, 2, 3], fin: true)
        var serverSide: QUICConnection? { network.serverConnections.last }
        #expect(network.run { resumed.isEstablished && serverSide.map { sink.isFinished($0, id) } ?? false })
        #expect(resumed.earlyDataAccepted)
        #expect(sink.earlyBytes[ObjectIdentifier(serverSide!)] == 3)
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
