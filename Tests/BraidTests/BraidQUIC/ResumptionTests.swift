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

    /// A resumed connection, the stream it sent on, and what the server read.
    struct ResumedSend {
        let client: QUICConnection
        let stream: Int64
        let server: QUICConnection
        let sink: StreamSink
    }

    /// Connects with `ticket` and, before any packet went out (so in 0-RTT if the server takes
    /// it), sends `bytes` with FIN on a new stream; returns once the server has read them all.
    /// `observe` sees every event as well.
    func resumeAndSend(
        _ bytes: [UInt8], network: SimulatedNetwork, context: QUICClientContext, ticket: QUICResumptionTicket,
        observe: @escaping (QUICConnection, QUICEvent) -> Void = { _, _ in }
    ) throws -> ResumedSend {
        let sink = StreamSink()
        network.onEvent = { connection, event in
            if connection.role == .server, case .streamReadable(let id) = event { sink.drain(connection, stream: id) }
            observe(connection, event)
        }
        let client = try network.connect(context, resumption: ticket)
        let id = try client.openStream(bidirectional: true)
        try client.send(streamID: id, bytes: bytes, fin: true)
        var serverSide: QUICConnection? { network.serverConnections.last }
        #expect(network.run { serverSide.map { sink.isFinished($0, id) } ?? false })
        return ResumedSend(client: client, stream: id, server: try #require(serverSide), sink: sink)
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

        let request = pattern(seed: 99, count: 3000)
        let sent = try resumeAndSend(request, network: network, context: context, ticket: restored)
        #expect(sent.sink.bytes(sent.server, sent.stream) == request)
        #expect(sent.sink.earlyBytes[ObjectIdentifier(sent.server)] == request.count, "server must see the bytes flagged as 0-RTT")
        #expect(network.run { sent.client.isEstablished })
        #expect(sent.client.earlyDataAccepted)
        #expect(sent.server.earlyDataAccepted)
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

        let resumed = try resumeAndSend([1, 2, 3], network: network, context: context, ticket: issued)
        #expect(network.run { resumed.client.isEstablished })
        #expect(resumed.client.earlyDataAccepted)
        #expect(resumed.sink.earlyBytes[ObjectIdentifier(resumed.server)] == 3)
    }

    @Test func rejectedZeroRTTIsResentAfterHandshake() throws {
        let context = try Fixtures.client()
        // A ticket from one server endpoint means nothing to another (different ticket key).
        let ticket = try ticket(network: SimulatedNetwork(server: try Fixtures.server()), context: context)
        let network = SimulatedNetwork(server: try Fixtures.server())
        var rejected = false
        let request = pattern(seed: 5, count: 5000)
        let sent = try resumeAndSend(request, network: network, context: context, ticket: ticket) { connection, event in
            if connection.role == .client, event == .earlyDataRejected { rejected = true }
        }
        #expect(rejected)
        #expect(!sent.client.earlyDataAccepted)
        #expect(sent.sink.bytes(sent.server, sent.stream) == request)
        #expect(sent.sink.earlyBytes[ObjectIdentifier(sent.server)] == nil)
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
        let sent = try resumeAndSend([7, 8, 9], network: network, context: context, ticket: ticket)
        #expect(network.run { sent.client.isEstablished })
        #expect(sent.client.earlyDataAccepted)
        #expect(sent.sink.earlyBytes[ObjectIdentifier(sent.server)] == 3)
    }

    @Test func zeroRTTDisabledOnServerStillDeliversData() throws {
        let server = try Fixtures.server { $0.earlyDataEnabled = false }
        let network = SimulatedNetwork(server: server)
        let context = try Fixtures.client()
        let ticket = try ticket(network: network, context: context)
        let sent = try resumeAndSend([1, 2, 3], network: network, context: context, ticket: ticket)
        #expect(sent.sink.bytes(sent.server, sent.stream) == [1, 2, 3])
        #expect(!sent.client.earlyDataAccepted)
    }
}
